// ItchFileReader: NASDAQ BinaryFILE ITCH 5.0 (each message preceded by its 2-byte big-endian
// length), plain or gzip-compressed, decoded to ticks.
//
// A plain file is memory-mapped and decoded in place (zero copy); a gzip file (detected by its
// magic bytes, whatever its name) or a non-regular file is streamed through zlib into one large
// buffer allocated at open. A gzip file cut short (or corrupt) gives every complete message
// before the cut, then the error naming the uncompressed offset where it ends. Byte offsets in errors are offsets in the uncompressed stream, of the
// 2-byte length that frames the bad message. tick.seq is the 1-based ordinal of the message among
// the valid messages of the file (the ITCH sequence number of a file that starts a session).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tickrail/tools/feed/itch_decoder.hpp"
#include "tickrail/tools/feed/tick_source.hpp"

namespace tickrail::feed {

struct ItchReadOptions {
  bool skip_bad = false;               // count bad messages and go on, instead of failing
  DecoderOptions decoder{};
  std::size_t gzip_buffer = 16 << 20;  // bytes of decompressed data held at once
};

class ItchFileReader final : public TickSource {
 public:
  // Opens and maps (or starts inflating) a file. Throws Error (not_found, parse_error) naming it.
  explicit ItchFileReader(const std::string& path, ItchReadOptions opts = {});
  // Reads ITCH bytes already in memory (not copied: they must outlive the reader).
  ItchFileReader(std::span<const std::uint8_t> bytes, std::string name, ItchReadOptions opts = {});
  ~ItchFileReader() override;

  [[nodiscard]] std::size_t read(std::span<Tick> out) override;
  [[nodiscard]] bool at_end() const noexcept override;
  [[nodiscard]] Progress progress() const noexcept override;
  [[nodiscard]] const ErrorCounts& errors() const noexcept override { return errors_; }
  [[nodiscard]] const std::string& first_error() const noexcept override { return first_error_; }
  [[nodiscard]] std::string name() const override;

  [[nodiscard]] const ItchDecoder& decoder() const noexcept { return decoder_; }
  [[nodiscard]] const ItchCounts& counts() const noexcept { return decoder_.counts(); }
  [[nodiscard]] const SymbolDirectory& symbols() const noexcept { return decoder_.symbols(); }
  [[nodiscard]] bool compressed() const noexcept;
  // Offset of the next unread byte in the (uncompressed) stream.
  [[nodiscard]] std::uint64_t offset() const noexcept;

 private:
  struct Input;  // the mapping or the zlib stream (keeps <zlib.h> out of this header)

  bool refill();
  bool on_bad(Decoded d, const std::uint8_t* frame, std::size_t len);
  void on_truncated(const std::uint8_t* frame);
  void on_stream_failed();  // the gzip stream's early end, once the bytes before it are decoded
  void fail(int errc, std::string what);

  ItchReadOptions opts_;
  ItchDecoder decoder_;
  std::unique_ptr<Input> in_;
  const std::uint8_t* cur_ = nullptr;  // window [cur_, end_) of bytes not yet decoded
  const std::uint8_t* end_ = nullptr;
  std::uint64_t seq_ = 0;
  ErrorCounts errors_;
  std::string first_error_;
  int pending_errc_ = 0;  // Errc of an error read() throws on its next call
  std::string pending_;
};

}  // namespace tickrail::feed
