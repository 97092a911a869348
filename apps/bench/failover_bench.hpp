// tickrail-bench --failover (issue 15, docs/failover.md): what arbitrating two lines costs per
// tick over shared memory. In each round, one line (Publisher -> Subscriber) and two lines (the
// same ticks published on two channels -> FailoverSubscriber) take turns, first one then the
// other, alternating, and each is timed one way from the tick's send stamp (one per tick, taken
// before its first copy is published). Both senders publish every tick twice: the two-line
// sender on lines A and B, first one then the other by turns; the one-line sender to its line
// first, then to a channel nobody reads. So the senders do the same work, and the one line's
// copy is always the first out (its best case): the ratio is the receiver's cost of a second
// line, if anything overstated. Each round runs both contenders once per code layout (as the
// rounds of tickrail-bench do: rounds.hpp, Layout::nth), by turns, and a round's figure is the
// median of its runs' p50s.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tickrail/tools/histogram.hpp"

namespace tickrail::bench {

struct FailoverBenchOptions {
  int rounds = 20;
  std::uint64_t samples = 2'500;   // ticks per contender per layout of a round
  int layouts = 8;                 // code layouts per round (rounds.hpp)
  std::uint64_t gap_ns = 2'000;    // between sends
  int receiver_cpu = 1;
  std::string housekeeping_cpus;   // tickrail's background threads
};

struct FailoverRound {
  double one_p50 = 0, two_p50 = 0;  // ns
};

struct FailoverRun {
  std::vector<FailoverRound> rounds;
  Histogram one, two;
  std::uint64_t first[2] = {0, 0};       // ticks each line brought first
  std::uint64_t duplicates[2] = {0, 0};  // its copies discarded
  std::uint64_t gaps = 0, skipped = 0;
};

// The sender (the calling thread, pinned already) publishes each tick on line A then B for even
// ticks, B then A for odd ones, so that each line is first about half the time.
[[nodiscard]] FailoverRun measure_failover(const FailoverBenchOptions& o);
[[nodiscard]] std::string failover_text(const FailoverRun& run);
[[nodiscard]] nlohmann::json failover_json(const FailoverRun& run);

}  // namespace tickrail::bench
