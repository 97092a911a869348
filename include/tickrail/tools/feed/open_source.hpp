// open_source(): the TickSource for an input file, chosen by its content.
//
// A recording's TRRECORD magic -> record::RecordingSource; pcap and pcapng magic numbers ->
// PcapMoldReader; a ".csv" name -> CsvTickReader; anything else (gzip-compressed or not) ->
// ItchFileReader. A format can also be forced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tickrail/tools/feed/itch_decoder.hpp"
#include "tickrail/tools/feed/tick_source.hpp"
#include "tickrail/tools/record/range.hpp"

namespace tickrail::feed {

enum class InputFormat : std::uint8_t { automatic, itch, pcap, csv, recording };

struct SourceOptions {
  InputFormat format = InputFormat::automatic;
  bool skip_bad = false;
  DecoderOptions decoder{};    // ITCH, from a file or a capture
  std::uint16_t udp_port = 0;  // captures: MoldUDP64 destination port, 0 = any
  record::Range range{};       // recordings: the ticks to read (others: must be all)
};

// The format of a file, from its first bytes and its name. Throws Error if it cannot be read.
[[nodiscard]] InputFormat detect_format(const std::string& path);
[[nodiscard]] const char* to_string(InputFormat f) noexcept;

// Opens `path` as opts.format (detected when automatic). Throws what the reader's constructor
// throws.
[[nodiscard]] std::unique_ptr<TickSource> open_source(const std::string& path,
                                                      const SourceOptions& opts = {});

}  // namespace tickrail::feed
