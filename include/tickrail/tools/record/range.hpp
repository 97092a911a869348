// Range: the ticks of a recording a reader keeps (tickrail-replay --from-seq .. --to-time,
// tickrail-record --csv). Both bounds inclusive; time is the tick's exchange timestamp (exch_ts).
#pragma once

#include <cstdint>

#include "tickrail/tick.hpp"

namespace tickrail::record {

struct Range {
  std::uint64_t from_seq = 0, to_seq = ~std::uint64_t{0};
  std::uint64_t from_time = 0, to_time = ~std::uint64_t{0};
  [[nodiscard]] bool contains(const Tick& t) const noexcept {
    return t.seq >= from_seq && t.seq <= to_seq && t.exch_ts >= from_time && t.exch_ts <= to_time;
  }
  [[nodiscard]] bool all() const noexcept {
    return from_seq == 0 && to_seq == ~std::uint64_t{0} && from_time == 0 &&
           to_time == ~std::uint64_t{0};
  }
};

}  // namespace tickrail::record
