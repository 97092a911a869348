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

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include "tickrail/feed/itch.hpp"
#include "tickrail/feed/symbol_directory.hpp"
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

[[nodiscard]] inline std::uint32_t saturate32(std::uint64_t v) noexcept {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, std::numeric_limits<std::uint32_t>::max()));
}
[[nodiscard]] inline Side side_of(std::uint8_t c) noexcept {
  return c == 'B' ? Side::Buy : c == 'S' ? Side::Sell : Side::None;
}
[[nodiscard]] inline std::uint16_t flags_of(const std::uint8_t* m, std::size_t code_at) noexcept {
  return static_cast<std::uint16_t>(m[0] | (m[code_at] << 8));
}

// Maps a message check() accepted to `out`, as the table above says. Returns false for a
// status-type message when status_ticks is false (out is then left partly written).
[[nodiscard]] inline bool to_tick(const std::uint8_t* m, Tick& out, bool status_ticks) noexcept {
  out = Tick{};
  out.exch_ts = be48(m + 5);
  out.instrument = be16(m + 1);
  out.flags = m[0];
  switch (m[0]) {
    case 'A':
    case 'F':
      out.kind = TickKind::Add;
      out.order_ref = be64(m + 11);
      out.side = side_of(m[19]);
      out.qty = be32(m + 20);
      out.price = be32(m + 32);
      if (m[0] == 'F') out.aux = ascii4(m + 36);
      return true;
    case 'E':
    case 'C':
      out.kind = TickKind::Execute;
      out.order_ref = be64(m + 11);
      out.qty = be32(m + 19);
      out.aux = be64(m + 23);
      if (m[0] == 'C') {
        out.flags = flags_of(m, 31);
        out.price = be32(m + 32);
      }
      return true;
    case 'X':
      out.kind = TickKind::Cancel;
      out.order_ref = be64(m + 11);
      out.qty = be32(m + 19);
      return true;
    case 'D':
      out.kind = TickKind::Delete;
      out.order_ref = be64(m + 11);
      return true;
    case 'U':
      out.kind = TickKind::Modify;
      out.order_ref = be64(m + 11);
      out.aux = be64(m + 19);
      out.qty = be32(m + 27);
      out.price = be32(m + 31);
      return true;
    case 'P':
      out.kind = TickKind::Trade;
      out.order_ref = be64(m + 11);
      out.side = side_of(m[19]);
      out.qty = be32(m + 20);
      out.price = be32(m + 32);
      out.aux = be64(m + 36);
      return true;
    case 'Q':
      out.kind = TickKind::Trade;
      out.qty = saturate32(be64(m + 11));
      out.price = be32(m + 27);
      out.aux = be64(m + 31);
      out.flags = flags_of(m, 39);
      return true;
    default:
      break;
  }
  if (!status_ticks) return false;
  out.kind = TickKind::Status;
  switch (m[0]) {
    case 'S':
      out.flags = flags_of(m, 11);
      break;
    case 'R':
      out.flags = flags_of(m, 19);
      out.aux = ascii8(m + 11);
      out.qty = be32(m + 21);
      break;
    case 'H':
      out.flags = flags_of(m, 19);
      out.aux = ascii8(m + 11);
      out.order_ref = ascii4(m + 21);
      break;
    case 'Y':
    case 'N':
      out.flags = flags_of(m, 19);
      out.aux = ascii8(m + 11);
      break;
    case 'L':
      out.flags = flags_of(m, 25);
      out.aux = ascii8(m + 15);
      out.order_ref = ascii4(m + 11);
      break;
    case 'V': {
      constexpr std::int64_t kRescale = 10'000;  // Price(8) -> Price(4)
      out.price = static_cast<std::int64_t>(be64(m + 11)) / kRescale;
      out.aux = static_cast<std::uint64_t>(static_cast<std::int64_t>(be64(m + 19)) / kRescale);
      out.order_ref = static_cast<std::uint64_t>(static_cast<std::int64_t>(be64(m + 27)) / kRescale);
      break;
    }
    case 'W':
      out.flags = flags_of(m, 11);
      break;
    case 'K':
      out.flags = flags_of(m, 23);
      out.aux = ascii8(m + 11);
      out.qty = be32(m + 19);
      out.price = be32(m + 24);
      break;
    case 'J':
      out.aux = ascii8(m + 11);
      out.price = be32(m + 19);
      out.order_ref = (std::uint64_t{be32(m + 23)} << 32) | be32(m + 27);
      out.qty = be32(m + 31);
      break;
    case 'h':
      out.flags = flags_of(m, 20);
      out.aux = ascii8(m + 11);
      out.order_ref = m[19];
      break;
    case 'B':
      out.aux = be64(m + 11);
      break;
    case 'I':
      out.flags = flags_of(m, 48);
      out.aux = ascii8(m + 28);
      out.qty = saturate32(be64(m + 11));
      out.aux_qty = saturate32(be64(m + 19));
      out.side = side_of(m[27]);
      out.order_ref = (std::uint64_t{be32(m + 36)} << 32) | be32(m + 40);
      out.price = be32(m + 44);
      break;
    case 'O':
      out.flags = flags_of(m, 19);
      out.aux = ascii8(m + 11);
      out.order_ref = (std::uint64_t{be32(m + 20)} << 32) | be32(m + 24);
      out.price = be32(m + 28);
      break;
    default:
      break;
  }
  return true;
}

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
