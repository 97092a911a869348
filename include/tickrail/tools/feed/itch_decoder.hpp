// ItchDecoder: one ITCH 5.0 message -> one Tick, with counts by type and the symbol directory.
//
// decode() validates the message (known type, exact fixed length), counts it, and maps it:
//
//   type          kind     fields (besides exch_ts = timestamp, instrument = stock locate)
//   A add         Add      order_ref, side, price, qty = shares
//   F add+MPID    Add      as A; aux = MPID (4 ASCII bytes, wire order, in the low bytes)
//   E executed    Execute  order_ref, qty = executed shares, aux = match number, price = 0
//   C exec+price  Execute  as E; price = execution price; flags high byte = printable ('Y'/'N')
//   X cancel      Cancel   order_ref, qty = cancelled shares
//   D delete      Delete   order_ref
//   U replace     Modify   order_ref = original ref, aux = new ref, price, qty = new shares
//   P trade       Trade    order_ref (0 on the wire today), side, price, qty, aux = match number
//   Q cross       Trade    price = cross price, qty = shares (saturated at 2^32-1),
//                          aux = match number; flags high byte = cross type
//   others        Status   (or no tick at all when DecoderOptions::status_ticks is false)
//
// Status ticks: flags low byte = message type, flags high byte = the message's code character;
// aux = the 8 symbol bytes (wire order) for messages that carry a stock:
//   S event code | R market category; qty = round lot size (and the directory learns the symbol)
//   H trading state; order_ref = reason (4 ASCII) | Y Reg SHO action
//   L participant state; order_ref = MPID (4 ASCII) | W breached level
//   V price/aux/order_ref = MWCB levels 1/2/3 rescaled from Price(8) to Price(4) (truncated;
//     the full precision is in itch::MwcbDecline), no symbol
//   K release qualifier; price = IPO price, qty = release time (s)
//   J price = reference price, order_ref = upper << 32 | lower collar, qty = extensions
//   h halt action; order_ref = market code | B aux = match number of the broken trade, no symbol
//   I cross type; price = current reference, order_ref = far << 32 | near price,
//     qty/aux_qty = paired/imbalance shares (saturated), side = imbalance direction if B or S
//   N interest flag | O open eligibility; price = near execution price,
//     order_ref = min << 32 | max allowable price
// For every flags low byte, the Tick's flags identify the source message exactly.
//
// seq and send_ts are left 0: the reader numbers ticks, the publisher stamps them.
// Not thread-safe; decode() never allocates or throws.
#pragma once

#include <array>
#include <cstdint>

#include "tickrail/tools/feed/itch.hpp"
#include "tickrail/tools/feed/symbol_directory.hpp"
#include "tickrail/tick.hpp"

namespace tickrail::feed {

struct DecoderOptions {
  bool status_ticks = true;  // false: non-order messages are counted, and yield no tick
};

enum class Decoded : std::uint8_t {
  tick,          // `out` holds a tick
  skipped,       // a valid message that yields no tick (status_ticks off)
  unknown_type,  // first byte is no ITCH 5.0 type
  bad_length,    // empty, or not the fixed length of its type
};

struct ItchCounts {
  std::array<std::uint64_t, 256> by_type{};  // valid messages by type byte
  std::uint64_t messages = 0;                // valid messages
  std::uint64_t ticks = 0;                   // ticks produced
  std::uint64_t unknown_type = 0;            // rejected messages, by reason
  std::uint64_t bad_length = 0;

  [[nodiscard]] std::uint64_t operator[](itch::MsgType t) const noexcept {
    return by_type[static_cast<std::uint8_t>(t)];
  }
};

namespace itch {

// Maps a message check() accepted to `out`, as the table above says. Returns false for a
// status-type message when status_ticks is false (out is then left partly written).
[[nodiscard]] bool to_tick(const std::uint8_t* m, Tick& out, bool status_ticks) noexcept;

}  // namespace itch

class ItchDecoder {
 public:
  explicit ItchDecoder(DecoderOptions opts = {}) : opts_(opts) {}

  // Decodes one message (its bytes without the 2-byte framing) into `out`.
  [[nodiscard]] Decoded decode(const std::uint8_t* msg, std::size_t len, Tick& out) noexcept {
    switch (itch::check(msg, len)) {
      case itch::Check::ok:
        break;
      case itch::Check::unknown_type:
        ++counts_.unknown_type;
        return Decoded::unknown_type;
      case itch::Check::empty:
      case itch::Check::bad_length:
        ++counts_.bad_length;
        return Decoded::bad_length;
    }
    ++counts_.by_type[msg[0]];
    ++counts_.messages;
    if (msg[0] == 'R') {
      const itch::StockDirectory r(msg);
      symbols_.set(r.stock_locate(), r.stock());
    }
    if (!itch::to_tick(msg, out, opts_.status_ticks)) return Decoded::skipped;
    ++counts_.ticks;
    return Decoded::tick;
  }

  [[nodiscard]] const ItchCounts& counts() const noexcept { return counts_; }
  [[nodiscard]] const SymbolDirectory& symbols() const noexcept { return symbols_; }
  [[nodiscard]] const DecoderOptions& options() const noexcept { return opts_; }

 private:
  DecoderOptions opts_;
  ItchCounts counts_;
  SymbolDirectory symbols_;
};

}  // namespace tickrail::feed
