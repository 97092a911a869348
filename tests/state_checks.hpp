// The market-state runs the RC and UD rig tests share (tests/rdma/{rc,ud}_state_test.cpp): a feed
// of market_tick, a late join and a conflation, each run and then checked; what differs by
// transport (making a subscriber, extra checks, the report) stays in the test. And a subscriber
// refused, checked as those and the shared-memory tests (tests/unit/shm/state_test.cpp) check it.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/state.hpp"
#include "tickrail/subscriber.hpp"
#include "market_stream.hpp"

namespace tickrail::test {

// Publishes market_tick(0 .. total - 1) in batches of 16 on its own thread (the publishing
// thread, which also serves connections), holding at `hold_at` until release() (0: no hold).
// A `pace` sleeps after each batch (UD has no back-pressure: a subscriber that keeps reading must
// not fall a history behind); a paced feed serves once more as it stops.
class Feed {
 public:
  Feed(Publisher& pub, std::uint64_t total, std::uint64_t hold_at, std::chrono::microseconds pace = {})
      : thread_([this, &pub, total, hold_at, pace] { run(pub, total, hold_at, pace); }) {}
  ~Feed() { stop(); }
  [[nodiscard]] std::uint64_t published() const { return published_.load(std::memory_order_acquire); }
  void release() { released_.store(true, std::memory_order_release); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run(Publisher& pub, std::uint64_t total, std::uint64_t hold_at, std::chrono::microseconds pace) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    std::array<Tick, 16> batch{};
    std::uint64_t i = 0;
    while (!stop_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
      if (i >= total || (hold_at != 0 && i >= hold_at && !released_.load(std::memory_order_acquire))) {
        pub.service();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
      const std::size_t n = std::min<std::uint64_t>(batch.size(), total - i);
      for (std::size_t j = 0; j < n; ++j) batch[j] = market_tick(i + j);
      i += pub.publish(std::span<const Tick>(batch.data(), n)).published;
      published_.store(i, std::memory_order_release);
      if (pace.count() != 0) std::this_thread::sleep_for(pace);
    }
    if (pace.count() != 0) pub.service();
  }
  std::atomic<std::uint64_t> published_{0};
  std::atomic<bool> released_{false}, stop_{false};
  std::thread thread_;
};

// A late join: what a subscriber there from the start (early) and one that joined with start =
// snapshot after kJoinAfter ticks, while the publisher kept publishing, saw of kTotal ticks.
struct LateJoin {
  static constexpr std::uint64_t kTotal = 100'000, kJoinAfter = 50'000;
  std::uint64_t published = 0;
  View early_view, late_view;
  std::uint64_t early_next = 1;
  bool early_in_order = true;
  std::unique_ptr<Subscriber> late;
  std::uint64_t snapshot_ticks = 0, snapshot_max = 0, live_first = 0, live_next = 0;
  bool live_in_order = true, flag_after_live = false, mixed = false;
  std::chrono::steady_clock::duration snapshot_took{};
};

// Runs the late join with `early` (active, before any tick) and a Feed paced by `pace`. The late
// one comes from `make_late(drain_early, deadline)`, which must call drain_early() (it returns
// how many ticks it took) while the late one connects: the publisher holds the stream until
// then, mid-stream, and must not be held up by an early subscriber left undrained.
template <class MakeLate>
LateJoin run_late_join(Publisher& pub, Subscriber& early, std::chrono::microseconds pace,
                       std::chrono::steady_clock::time_point deadline, MakeLate&& make_late) {
  using std::chrono::steady_clock;
  LateJoin r;
  Feed feed(pub, LateJoin::kTotal, LateJoin::kJoinAfter + 5'000, pace);
  auto drain_early = [&] {
    return early.poll([&](const Tick& t) {
      r.early_in_order = r.early_in_order && t.seq == r.early_next;
      r.early_next = t.seq + 1;
      apply(r.early_view, t);
    });
  };
  while (feed.published() < LateJoin::kJoinAfter && steady_clock::now() < deadline) (void)drain_early();
  REQUIRE(feed.published() >= LateJoin::kJoinAfter);

  r.late = make_late(drain_early, deadline);
  REQUIRE(r.late != nullptr);
  Subscriber& late = *r.late;
  const auto joined = steady_clock::now();
  feed.release();

  auto drain_late = [&] {
    std::uint64_t table_in_poll = 0, live_in_poll = 0;
    const std::size_t n = late.poll([&](const Tick& t) {
      if ((t.flags & kTickFromTable) != 0) {
        ++table_in_poll;
        r.flag_after_live = r.flag_after_live || r.live_first != 0;
        ++r.snapshot_ticks;
        r.snapshot_max = std::max(r.snapshot_max, t.seq);
      } else {
        ++live_in_poll;
        if (r.live_first == 0) r.live_first = r.live_next = t.seq;
        r.live_in_order = r.live_in_order && t.seq == r.live_next;
        r.live_next = t.seq + 1;
      }
      apply(r.late_view, t);
    });
    if (r.snapshot_took == steady_clock::duration{} && !late.in_snapshot()) {
      r.snapshot_took = steady_clock::now() - joined;
    }
    r.mixed = r.mixed || (table_in_poll != 0 && live_in_poll != 0);
    return n;
  };
  while ((r.early_next <= LateJoin::kTotal || late.next_sequence() <= LateJoin::kTotal || late.in_snapshot()) &&
         steady_clock::now() < deadline) {
    if (drain_early() + drain_late() == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  feed.stop();
  r.published = feed.published();
  return r;
}

// The late joiner ends with the view of the early one, and of the publisher's table: the
// snapshot first, never mixed with live ticks in a poll, then the live stream from right after
// its last entry, in order, nothing lost.
inline void check_late_join(Publisher& pub, const LateJoin& r) {
  constexpr std::uint64_t kTotal = LateJoin::kTotal;
  REQUIRE(r.published == kTotal);
  CHECK(r.early_in_order);
  CHECK(r.early_next == kTotal + 1);
  CHECK_FALSE(r.late->in_snapshot());
  CHECK(r.snapshot_ticks > 2900);  // nearly every instrument has every class by then
  CHECK(r.snapshot_ticks <= 3000);
  CHECK_FALSE(r.flag_after_live);
  CHECK_FALSE(r.mixed);
  CHECK(r.live_first == r.snapshot_max + 1);  // nothing reflected twice, nothing after it missed
  CHECK(r.live_in_order);
  CHECK(r.live_next == kTotal + 1);
  CHECK(r.snapshot_max >= LateJoin::kJoinAfter);
  CHECK(r.snapshot_max < kTotal);  // joined mid-stream
  const SubscriberCounters lcnt = r.late->counters();
  CHECK(lcnt.from_table == r.snapshot_ticks);
  CHECK(lcnt.received == kTotal + 1 - r.live_first);
  CHECK(lcnt.lost == 0);
  CHECK(lcnt.table_abandoned == 0);

  REQUIRE(r.early_view.size() == r.late_view.size());
  for (const auto& [key, tick] : r.early_view) {
    const auto it = r.late_view.find(key);
    REQUIRE(it != r.late_view.end());
    CHECK(same(tick, it->second));
    const auto table = pub.last_value(key.first, static_cast<StateClass>(key.second));
    REQUIRE(table);
    CHECK(same(tick, *table));
  }
  CHECK(r.early_view.size() == 3000);
}

// A conflation: what a subscriber that kept up (keeper) and one with policy = conflate that
// stopped reading from kPauseFrom to kPauseTo ticks published (slow) saw of kTotal ticks.
struct Conflation {
  static constexpr std::uint64_t kTotal = 100'000, kPauseFrom = 30'000, kPauseTo = 70'000;
  View keeper_view, slow_view;
  std::uint64_t slow_live = 0, slow_table = 0;
  bool slow_in_order = true, snapshot_said = false;
  SubscriberCounters counters;  // the slow one's
  std::uint64_t missed = 0, trades_missed = 0, trades = 0;  // of the ticks it did not get live
};

// Runs the conflation with `keeper` and `slow` (both connected) and a Feed paced by `pace`.
inline Conflation run_conflation(Publisher& pub, Subscriber& keeper, Subscriber& slow, std::chrono::microseconds pace,
                                 std::chrono::steady_clock::time_point deadline) {
  constexpr std::uint64_t kTotal = Conflation::kTotal;
  Conflation r;
  Feed feed(pub, kTotal, 0, pace);
  std::uint64_t slow_next_live = 0;
  std::vector<bool> seen(kTotal + 1, false);
  while ((keeper.next_sequence() <= kTotal || slow.next_sequence() <= kTotal) &&
         std::chrono::steady_clock::now() < deadline) {
    std::size_t n = keeper.poll([&](const Tick& t) { apply(r.keeper_view, t); });
    const std::uint64_t p = feed.published();
    if (p < Conflation::kPauseFrom || p >= Conflation::kPauseTo) {
      n += slow.poll([&](const Tick& t) {
        if ((t.flags & kTickFromTable) != 0) {
          r.snapshot_said = r.snapshot_said || slow.in_snapshot();
          ++r.slow_table;
        } else {
          r.slow_in_order = r.slow_in_order && t.seq >= slow_next_live;
          slow_next_live = t.seq + 1;
          ++r.slow_live;
          if (t.seq <= kTotal) seen[t.seq] = true;
        }
        apply(r.slow_view, t);
      });
    }
    if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  feed.stop();
  REQUIRE(feed.published() == kTotal);

  r.counters = slow.counters();
  for (std::uint64_t s = 1; s <= kTotal; ++s) {
    const bool trade = state_class_of(market_tick(s - 1).kind) == static_cast<int>(StateClass::trade);
    r.trades += trade ? 1 : 0;
    if (seen[s]) continue;
    ++r.missed;
    r.trades_missed += trade ? 1 : 0;
  }
  return r;
}

// The slow one ends with the keeper's view, through the table, and what it did not get live
// (the trades among it) is counted lost, exactly.
inline void check_conflation(const Conflation& r, const Subscriber& keeper) {
  const SubscriberCounters& c = r.counters;
  CHECK(c.conflations >= 1);
  CHECK_FALSE(r.snapshot_said);  // a conflation's entries, not a snapshot's
  CHECK(c.from_table == r.slow_table);
  CHECK(c.received == r.slow_live);
  CHECK(r.slow_in_order);
  CHECK(c.lost > 0);
  CHECK(c.received + c.lost == Conflation::kTotal);  // exactly what it did not get live is counted lost
  CHECK(r.missed == c.lost);
  CHECK(r.trades_missed > 0);
  CHECK(c.table_abandoned == 0);
  CHECK(keeper.counters().lost == 0);

  REQUIRE(r.keeper_view.size() == r.slow_view.size());
  for (const auto& [key, tick] : r.keeper_view) {
    const auto it = r.slow_view.find(key);
    REQUIRE(it != r.slow_view.end());
    CHECK(same(tick, it->second));
  }
}

// Making a subscriber with `c` is refused: an Error with `code`, its message naming `text` and
// `where`.
inline void refused(const SubscriberConfig& c, Errc code, const std::string& text, const std::string& where) {
  try {
    Subscriber s(c);
    FAIL("constructed");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == make_error_code(code));
    CHECK_THAT(e.what(), Catch::Contains(text) && Catch::Contains(where));
  }
}

}  // namespace tickrail::test
