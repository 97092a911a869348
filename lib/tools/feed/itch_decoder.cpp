// The ITCH 5.0 message -> Tick mapping (the table in itch_decoder.hpp), out of line: the
// decoder's inline fast path calls it once per message.
#include <algorithm>
#include <limits>

#include "tickrail/tools/feed/itch_decoder.hpp"

namespace tickrail::feed::itch {

namespace {

std::uint32_t saturate32(std::uint64_t v) noexcept {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, std::numeric_limits<std::uint32_t>::max()));
}
Side side_of(std::uint8_t c) noexcept {
  return c == 'B' ? Side::Buy : c == 'S' ? Side::Sell : Side::None;
}
// The code character is printable ASCII; its top bit, were it set, would be kTickFromTable's.
std::uint16_t flags_of(const std::uint8_t* m, std::size_t code_at) noexcept {
  return static_cast<std::uint16_t>(m[0] | ((m[code_at] & 0x7f) << 8));
}

// Order messages (A F E C X D U P Q): true when `m` is one, with `out` filled.
bool order_tick(const std::uint8_t* m, Tick& out) noexcept {
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
      return false;
  }
}

// Every other type: a Status tick whose flags, aux, price and order_ref carry its fields.
void status_tick(const std::uint8_t* m, Tick& out) noexcept {
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
}

}  // namespace

bool to_tick(const std::uint8_t* m, Tick& out, bool status_ticks) noexcept {
  out = Tick{};
  out.exch_ts = be48(m + 5);
  out.instrument = be16(m + 1);
  out.flags = m[0];
  if (order_tick(m, out)) return true;
  if (!status_ticks) return false;
  status_tick(m, out);
  return true;
}

}  // namespace tickrail::feed::itch
