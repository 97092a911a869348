// ItchWriter: encodes ITCH 5.0 messages in BinaryFILE framing (2-byte big-endian length, then
// the message) into a growing byte buffer. It is the inverse of ItchDecoder, for generating test
// data, fuzz corpora and benchmark files; it is not a data-path object (it allocates as it grows).
//
// Typed helpers exist for the messages that carry order flow and for the directory; any message
// type, and deliberately malformed ones, can be written with the field builder:
//   w.begin('H', locate, ts).str("AAPL", 8).ch('T').ch(' ').str("    ", 4).end();
// end() checks the built message has its type's fixed length (unless begin_raw() was used).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tickrail/tick.hpp"

namespace tickrail::feed {

class ItchWriter {
 public:
  // Field builder for one message; appends as it goes.
  class Builder {
   public:
    Builder& u8(std::uint8_t v);
    Builder& ch(char c) { return u8(static_cast<std::uint8_t>(c)); }
    Builder& u16(std::uint16_t v);
    Builder& u32(std::uint32_t v);
    Builder& u48(std::uint64_t v);
    Builder& u64(std::uint64_t v);
    Builder& price4(std::int64_t p) { return u32(static_cast<std::uint32_t>(p)); }
    // ASCII, right-padded with spaces (or cut) to n bytes.
    Builder& str(std::string_view s, std::size_t n);
    // Writes the 2-byte length; throws Error(invalid_argument) if a typed message has the wrong
    // length for its type.
    void end();

   private:
    friend class ItchWriter;
    Builder(ItchWriter& w, std::size_t frame, bool check) : w_(w), frame_(frame), check_(check) {}
    ItchWriter& w_;
    std::size_t frame_;
    bool check_;
  };

  ItchWriter() = default;
  explicit ItchWriter(std::size_t reserve_bytes) { buf_.reserve(reserve_bytes); }

  // Starts a message of `type` with its common header (tracking number: tracking()).
  [[nodiscard]] Builder begin(char type, std::uint16_t locate, std::uint64_t ts);
  // Starts a frame whose bytes are all the caller's (no header, no length check).
  [[nodiscard]] Builder begin_raw();

  void system_event(std::uint64_t ts, char code);
  void stock_directory(std::uint16_t locate, std::uint64_t ts, std::string_view stock,
                       std::uint32_t round_lot = 100, char market_category = 'Q');
  void add_order(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref, Side side,
                 std::uint32_t shares, std::string_view stock, std::int64_t price);
  void add_order_mpid(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref, Side side,
                      std::uint32_t shares, std::string_view stock, std::int64_t price,
                      std::string_view mpid);
  void order_executed(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref,
                      std::uint32_t shares, std::uint64_t match);
  void order_executed_price(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref,
                            std::uint32_t shares, std::uint64_t match, char printable,
                            std::int64_t price);
  void order_cancel(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref,
                    std::uint32_t shares);
  void order_delete(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref);
  void order_replace(std::uint16_t locate, std::uint64_t ts, std::uint64_t old_ref,
                     std::uint64_t new_ref, std::uint32_t shares, std::int64_t price);
  void trade(std::uint16_t locate, std::uint64_t ts, Side side, std::uint32_t shares,
             std::string_view stock, std::int64_t price, std::uint64_t match);
  void cross_trade(std::uint16_t locate, std::uint64_t ts, std::uint64_t shares,
                   std::string_view stock, std::int64_t price, std::uint64_t match,
                   char cross_type);

  // Encodes an order-flow tick as the message it maps from (Add -> A, or F when aux holds an
  // MPID; Execute -> E, or C when price != 0; Cancel -> X; Delete -> D; Modify -> U;
  // Trade -> P, or Q when flags say 'Q'). Other kinds: nothing written, returns false.
  bool append(const Tick& t, std::string_view stock = "SYNTH");

  void set_tracking(std::uint16_t n) noexcept { tracking_ = n; }
  [[nodiscard]] const std::vector<std::uint8_t>& bytes() const noexcept { return buf_; }
  [[nodiscard]] std::span<const std::uint8_t> span() const noexcept { return buf_; }
  [[nodiscard]] std::size_t messages() const noexcept { return messages_; }
  void clear() noexcept {
    buf_.clear();
    messages_ = 0;
  }

 private:
  std::vector<std::uint8_t> buf_;
  std::size_t messages_ = 0;
  std::uint16_t tracking_ = 0;
};

}  // namespace tickrail::feed
