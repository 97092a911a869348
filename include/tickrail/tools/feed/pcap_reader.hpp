// PcapMoldReader: ITCH 5.0 over MoldUDP64 from a pcap or pcapng capture (libpcap reads both).
//
// Each packet is walked from its link header (Ethernet with any number of 802.1Q/802.1ad VLAN
// tags, Linux cooked SLL, or raw IP) through IPv4 and UDP to the MoldUDP64 payload, whose
// sequence numbers are tracked per session (gaps recorded, duplicates skipped) and whose messages
// are decoded to ticks; tick.seq is the message's MoldUDP64 sequence number. Packets that are not
// IPv4/UDP (ARP, IPv6, TCP...), UDP to another port than the one asked, and IP fragments are
// counted and skipped. A packet that claims more bytes than were captured, a MoldUDP64 packet that
// does not parse, a bad ITCH message or a corrupt capture file is bad input (tick_source.hpp):
// its error names the packet number (1-based) and the file offset of its record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tickrail/tools/feed/itch_decoder.hpp"
#include "tickrail/tools/feed/moldudp64.hpp"
#include "tickrail/tools/feed/tick_source.hpp"

namespace tickrail::feed {

struct PcapReadOptions {
  bool skip_bad = false;
  DecoderOptions decoder{};
  std::uint16_t udp_port = 0;  // destination port carrying MoldUDP64; 0: every UDP packet
  std::size_t max_recorded_gaps = 1024;
};

struct PcapCounts {
  std::uint64_t packets = 0;       // records read from the capture
  std::uint64_t mold_packets = 0;  // valid MoldUDP64 packets (heartbeats included)
  std::uint64_t not_udp = 0;       // not IPv4/UDP: skipped
  std::uint64_t other_port = 0;    // UDP to another port than udp_port: skipped
  std::uint64_t fragments = 0;     // IPv4 fragments: skipped (MoldUDP64 packets fit a frame)
  std::uint64_t mold_messages = 0; // messages delivered to the decoder (duplicates excluded)
};

class PcapMoldReader final : public TickSource {
 public:
  // Opens a capture file. Throws Error (not_found, parse_error, unsupported link type).
  explicit PcapMoldReader(const std::string& path, PcapReadOptions opts = {});
  // Reads a capture held in memory (through fmemopen; not copied, must outlive the reader).
  PcapMoldReader(std::span<const std::uint8_t> bytes, std::string name, PcapReadOptions opts = {});
  ~PcapMoldReader() override;

  [[nodiscard]] std::size_t read(std::span<Tick> out) override;
  [[nodiscard]] bool at_end() const noexcept override;
  [[nodiscard]] Progress progress() const noexcept override;
  [[nodiscard]] const ErrorCounts& errors() const noexcept override { return errors_; }
  [[nodiscard]] const std::string& first_error() const noexcept override { return first_error_; }
  [[nodiscard]] std::string name() const override;

  [[nodiscard]] const ItchDecoder& decoder() const noexcept { return decoder_; }
  [[nodiscard]] const ItchCounts& counts() const noexcept { return decoder_.counts(); }
  [[nodiscard]] const SymbolDirectory& symbols() const noexcept { return decoder_.symbols(); }
  [[nodiscard]] const PcapCounts& capture_counts() const noexcept { return capture_; }
  [[nodiscard]] const mold::SequenceTracker& sequence() const noexcept { return tracker_; }

 private:
  struct Capture;  // the pcap_t (keeps <pcap.h> out of this header)

  void open(std::string what);
  // false at the end of the capture, on a pending error, or after skipping its share of packets
  bool next_packet();
  bool bad(std::uint64_t& counter, int errc, const std::string& what);

  PcapReadOptions opts_;
  ItchDecoder decoder_;
  mold::SequenceTracker tracker_;
  std::unique_ptr<Capture> cap_;
  mold::Packet packet_;          // the packet being delivered
  std::uint64_t msg_seq_ = 0;    // MoldUDP64 sequence number of packet_'s next message
  std::uint64_t packet_no_ = 0;  // 1-based number of the last record read
  std::uint64_t packet_offset_ = 0;
  PcapCounts capture_;
  ErrorCounts errors_;
  std::string first_error_;
  int pending_errc_ = 0;
  std::string pending_;
  bool eof_ = false;  // the capture has no more records
};

}  // namespace tickrail::feed
