#include "tickrail/tools/feed/itch_writer.hpp"

#include <string>

#include "tools/feed/format.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch.hpp"

namespace tickrail::feed {

ItchWriter::Builder& ItchWriter::Builder::u8(std::uint8_t v) {
  w_.buf_.push_back(v);
  return *this;
}
ItchWriter::Builder& ItchWriter::Builder::u16(std::uint16_t v) {
  u8(static_cast<std::uint8_t>(v >> 8));
  return u8(static_cast<std::uint8_t>(v));
}
ItchWriter::Builder& ItchWriter::Builder::u32(std::uint32_t v) {
  u16(static_cast<std::uint16_t>(v >> 16));
  return u16(static_cast<std::uint16_t>(v));
}
ItchWriter::Builder& ItchWriter::Builder::u48(std::uint64_t v) {
  u16(static_cast<std::uint16_t>(v >> 32));
  return u32(static_cast<std::uint32_t>(v));
}
ItchWriter::Builder& ItchWriter::Builder::u64(std::uint64_t v) {
  u32(static_cast<std::uint32_t>(v >> 32));
  return u32(static_cast<std::uint32_t>(v));
}
ItchWriter::Builder& ItchWriter::Builder::str(std::string_view s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) ch(i < s.size() ? s[i] : ' ');
  return *this;
}

void ItchWriter::Builder::end() {
  const std::size_t len = w_.buf_.size() - frame_ - 2;
  if (len > 0xffff) throw Error(Errc::invalid_argument, "ITCH writer: message longer than 65535");
  if (check_) {
    const std::uint8_t type = w_.buf_[frame_ + 2];
    if (len != itch::length_of(type)) {
      throw Error(Errc::invalid_argument,
                  "ITCH writer: message type " + describe_byte(type) + " built with " +
                      std::to_string(len) + " bytes, expected " +
                      std::to_string(itch::length_of(type)));
    }
  }
  w_.buf_[frame_] = static_cast<std::uint8_t>(len >> 8);
  w_.buf_[frame_ + 1] = static_cast<std::uint8_t>(len);
  ++w_.messages_;
}

ItchWriter::Builder ItchWriter::begin(char type, std::uint16_t locate, std::uint64_t ts) {
  const std::size_t frame = buf_.size();
  buf_.push_back(0);
  buf_.push_back(0);
  Builder b(*this, frame, true);
  b.ch(type).u16(locate).u16(tracking_).u48(ts);
  return b;
}

ItchWriter::Builder ItchWriter::begin_raw() {
  const std::size_t frame = buf_.size();
  buf_.push_back(0);
  buf_.push_back(0);
  return Builder(*this, frame, false);
}

namespace {
char side_char(Side s) { return s == Side::Sell ? 'S' : 'B'; }
}  // namespace

void ItchWriter::system_event(std::uint64_t ts, char code) { begin('S', 0, ts).ch(code).end(); }

void ItchWriter::stock_directory(std::uint16_t locate, std::uint64_t ts, std::string_view stock,
                                 std::uint32_t round_lot, char market_category) {
  begin('R', locate, ts)
      .str(stock, 8).ch(market_category).ch('N').u32(round_lot).ch('N').ch('C').str("Z", 2)
      .ch('P').ch('N').ch('N').ch('1').ch('N').u32(0).ch('N')
      .end();
}

void ItchWriter::add_order(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref, Side side,
                           std::uint32_t shares, std::string_view stock, std::int64_t price) {
  begin('A', locate, ts).u64(ref).ch(side_char(side)).u32(shares).str(stock, 8).price4(price).end();
}

void ItchWriter::add_order_mpid(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref,
                                Side side, std::uint32_t shares, std::string_view stock,
                                std::int64_t price, std::string_view mpid) {
  begin('F', locate, ts)
      .u64(ref).ch(side_char(side)).u32(shares).str(stock, 8).price4(price).str(mpid, 4)
      .end();
}

void ItchWriter::order_executed(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref,
                                std::uint32_t shares, std::uint64_t match) {
  begin('E', locate, ts).u64(ref).u32(shares).u64(match).end();
}

void ItchWriter::order_executed_price(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref,
                                      std::uint32_t shares, std::uint64_t match, char printable,
                                      std::int64_t price) {
  begin('C', locate, ts).u64(ref).u32(shares).u64(match).ch(printable).price4(price).end();
}

void ItchWriter::order_cancel(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref,
                              std::uint32_t shares) {
  begin('X', locate, ts).u64(ref).u32(shares).end();
}

void ItchWriter::order_delete(std::uint16_t locate, std::uint64_t ts, std::uint64_t ref) {
  begin('D', locate, ts).u64(ref).end();
}

void ItchWriter::order_replace(std::uint16_t locate, std::uint64_t ts, std::uint64_t old_ref,
                               std::uint64_t new_ref, std::uint32_t shares, std::int64_t price) {
  begin('U', locate, ts).u64(old_ref).u64(new_ref).u32(shares).price4(price).end();
}

void ItchWriter::trade(std::uint16_t locate, std::uint64_t ts, Side side, std::uint32_t shares,
                       std::string_view stock, std::int64_t price, std::uint64_t match) {
  begin('P', locate, ts)
      .u64(0).ch(side_char(side)).u32(shares).str(stock, 8).price4(price).u64(match)
      .end();
}

void ItchWriter::cross_trade(std::uint16_t locate, std::uint64_t ts, std::uint64_t shares,
                             std::string_view stock, std::int64_t price, std::uint64_t match,
                             char cross_type) {
  begin('Q', locate, ts).u64(shares).str(stock, 8).price4(price).u64(match).ch(cross_type).end();
}

bool ItchWriter::append(const Tick& t, std::string_view stock) {
  const auto locate = static_cast<std::uint16_t>(t.instrument);
  switch (t.kind) {
    case TickKind::Add:
      if (t.aux != 0) {
        const auto mpid = static_cast<std::uint32_t>(t.aux);
        add_order_mpid(locate, t.exch_ts, t.order_ref, t.side, t.qty, stock, t.price,
                       std::string_view(reinterpret_cast<const char*>(&mpid), 4));
      } else {
        add_order(locate, t.exch_ts, t.order_ref, t.side, t.qty, stock, t.price);
      }
      return true;
    case TickKind::Execute:
      if (t.price != 0) {
        const char printable = (t.flags >> 8) != 0 ? static_cast<char>(t.flags >> 8) : 'Y';
        order_executed_price(locate, t.exch_ts, t.order_ref, t.qty, t.aux, printable, t.price);
      } else {
        order_executed(locate, t.exch_ts, t.order_ref, t.qty, t.aux);
      }
      return true;
    case TickKind::Cancel:
      order_cancel(locate, t.exch_ts, t.order_ref, t.qty);
      return true;
    case TickKind::Delete:
      order_delete(locate, t.exch_ts, t.order_ref);
      return true;
    case TickKind::Modify:
      order_replace(locate, t.exch_ts, t.order_ref, t.aux, t.qty, t.price);
      return true;
    case TickKind::Trade:
      if ((t.flags & 0xff) == 'Q') {
        cross_trade(locate, t.exch_ts, t.qty, stock, t.price, t.aux,
                    (t.flags >> 8) != 0 ? static_cast<char>(t.flags >> 8) : 'O');
      } else {
        trade(locate, t.exch_ts, t.side, t.qty, stock, t.price, t.aux);
      }
      return true;
    default:
      return false;
  }
}

}  // namespace tickrail::feed
