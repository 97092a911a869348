// The stream the market-state tests publish, and an app's view of it: one definition for the
// shared-memory tests (tests/unit/shm/state_test.cpp) and the RC rig tests (tests/rdma).
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <utility>

#include "tickrail/state.hpp"
#include "tickrail/tick.hpp"

namespace tickrail::test {

// The i-th tick of the stream: 1,000 instruments, every kind the table keeps and one it does not
// (Add).
inline Tick market_tick(std::uint64_t i) {
  static constexpr TickKind kKinds[] = {TickKind::Quote, TickKind::Trade, TickKind::Add,
                                        TickKind::Execute, TickKind::Status, TickKind::Quote};
  Tick t{};
  t.instrument = static_cast<std::uint32_t>(((i * 0x9E3779B97F4A7C15ULL) >> 40) % 1000);
  t.kind = kKinds[i % std::size(kKinds)];
  t.price = static_cast<std::int64_t>(i);
  t.qty = static_cast<std::uint32_t>(i % 997);
  t.exch_ts = i;
  t.flags = static_cast<std::uint16_t>(i & 0x7fff);
  return t;
}

// An app's view: per (instrument, class), the latest tick.
using View = std::map<std::pair<std::uint32_t, int>, Tick>;
inline void apply(View& v, const Tick& t) {
  const int c = state_class_of(t.kind);
  if (c >= 0) v[{t.instrument, c}] = t;
}
inline bool same(const Tick& a, const Tick& b) {
  return a.seq == b.seq && a.instrument == b.instrument && a.kind == b.kind && a.price == b.price &&
         a.qty == b.qty && a.exch_ts == b.exch_ts && a.send_ts == b.send_ts &&
         (a.flags & ~kTickFromTable) == (b.flags & ~kTickFromTable);
}

}  // namespace tickrail::test
