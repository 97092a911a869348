// The market's state over UD, on the rig's device (docs/state.md "Over UD"): the publisher's
// last-value table read with RDMA READ over the recovery connection by a late joiner (start =
// snapshot) and by a conflating subscriber that stopped reading until the history had forgotten
// what it missed; and a snapshot asked where it cannot be taken, refused naming why.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/state.hpp"
#include "tickrail/subscriber.hpp"
#include "ud_support.hpp"
#include "../market_stream.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

PublisherConfig pub_config(const std::string& group, std::uint16_t port, bool table = true,
                           std::uint32_t history = 1 << 20) {
  PublisherConfig c = rdma::test::ud_publisher_config(group, port);
  c.channel = "ud-state";
  c.state.enabled = table;
  c.state.capacity = 1000;
  c.rdma.history = history;
  c.rdma.heartbeat_interval = 20ms;
  return c;
}

SubscriberConfig sub_config(const std::string& group) {
  SubscriberConfig c = rdma::test::ud_subscriber_config(group);
  c.channel = "ud-state";
  c.publisher_timeout = 10s;  // a guest starved by its host stalls for seconds
  c.rdma.connect_timeout = 20s;
  return c;
}

// Publishes market_tick(0 .. total - 1) in batches of 16 on its own thread, paced (UD has no
// back-pressure: a subscriber that keeps reading must not fall a history behind), holding at
// `hold_at` until release() (0: no hold).
class Feed {
 public:
  Feed(Publisher& pub, std::uint64_t total, std::uint64_t hold_at)
      : thread_([this, &pub, total, hold_at] { run(pub, total, hold_at); }) {}
  ~Feed() { stop(); }
  [[nodiscard]] std::uint64_t published() const { return published_.load(std::memory_order_acquire); }
  void release() { released_.store(true, std::memory_order_release); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run(Publisher& pub, std::uint64_t total, std::uint64_t hold_at) {
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    std::array<Tick, 16> batch{};
    std::uint64_t i = 0;
    while (!stop_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
      if (i >= total || (hold_at != 0 && i >= hold_at && !released_.load(std::memory_order_acquire))) {
        pub.service();
        std::this_thread::sleep_for(100us);
        continue;
      }
      const std::size_t n = std::min<std::uint64_t>(batch.size(), total - i);
      for (std::size_t j = 0; j < n; ++j) batch[j] = market_tick(i + j);
      i += pub.publish(std::span<const Tick>(batch.data(), n)).published;
      published_.store(i, std::memory_order_release);
      std::this_thread::sleep_for(200us);
    }
    pub.service();
  }
  std::atomic<std::uint64_t> published_{0};
  std::atomic<bool> released_{false}, stop_{false};
  std::thread thread_;
};

// The subscriber is made on another thread: a snapshot subscriber waits, in its constructor, for
// the publisher's datagrams and the recovery link, while the caller goes on polling.
template <class Poll>
std::unique_ptr<Subscriber> make_while(const SubscriberConfig& c, Poll&& poll,
                                       std::chrono::steady_clock::time_point deadline) {
  std::unique_ptr<Subscriber> s;
  std::atomic<bool> done{false};
  std::thread t([&] {
    try {
      s = std::make_unique<Subscriber>(c);
    } catch (const std::exception& e) {
      std::cout << "subscriber: " << e.what() << std::endl;
    }
    done.store(true, std::memory_order_release);
  });
  while (!done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
    if (poll() == 0) std::this_thread::sleep_for(20us);
  }
  t.join();
  return s;
}

}  // namespace

// A subscriber that joins with start = snapshot after 50,000 ticks over 1,000 instruments, while
// the publisher keeps publishing, ends with the view of one present from the start, and of the
// publisher's table; its live stream starts right after the snapshot's last entry.
TEST_CASE("a late joiner over UD ends with the view of a subscriber there from the start", "[state]") {
  Publisher pub(pub_config("239.7.7.21", 7491));
  const SubscriberConfig sc = sub_config("239.7.7.21");
  Subscriber early(sc);

  constexpr std::uint64_t kTotal = 100'000, kJoinAfter = 50'000;
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  // Heard (a heartbeat) before the first tick: it starts at sequence 1.
  while (early.state() != SubscriberState::active && std::chrono::steady_clock::now() < deadline) {
    pub.service();
    (void)early.poll([](const Tick&) {});
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(early.state() == SubscriberState::active);
  Feed feed(pub, kTotal, kJoinAfter + 5'000);  // holds mid-stream until the late one is in
  View early_view, late_view;
  std::uint64_t early_next = 1;
  bool early_in_order = true;
  auto drain_early = [&] {
    return early.poll([&](const Tick& t) {
      early_in_order = early_in_order && t.seq == early_next;
      early_next = t.seq + 1;
      apply(early_view, t);
    });
  };
  while (feed.published() < kJoinAfter && std::chrono::steady_clock::now() < deadline) (void)drain_early();
  REQUIRE(feed.published() >= kJoinAfter);

  SubscriberConfig lc = sc;
  lc.start = StartMode::snapshot;
  std::unique_ptr<Subscriber> late = make_while(lc, drain_early, deadline);
  REQUIRE(late != nullptr);
  const auto joined = std::chrono::steady_clock::now();
  feed.release();

  std::uint64_t snapshot_ticks = 0, snapshot_max = 0, live_first = 0, live_next = 0;
  bool live_in_order = true, flag_after_live = false, mixed = false;
  std::chrono::steady_clock::duration snapshot_took{};
  auto drain_late = [&] {
    std::uint64_t table_in_poll = 0, live_in_poll = 0;
    const std::size_t n = late->poll([&](const Tick& t) {
      if ((t.flags & kTickFromTable) != 0) {
        ++table_in_poll;
        flag_after_live = flag_after_live || live_first != 0;
        ++snapshot_ticks;
        snapshot_max = std::max(snapshot_max, t.seq);
      } else {
        ++live_in_poll;
        if (live_first == 0) live_first = live_next = t.seq;
        live_in_order = live_in_order && t.seq == live_next;
        live_next = t.seq + 1;
      }
      apply(late_view, t);
    });
    if (snapshot_took == std::chrono::steady_clock::duration{} && !late->in_snapshot()) {
      snapshot_took = std::chrono::steady_clock::now() - joined;
    }
    mixed = mixed || (table_in_poll != 0 && live_in_poll != 0);
    return n;
  };
  while ((early_next <= kTotal || late->next_sequence() <= kTotal || late->in_snapshot()) &&
         std::chrono::steady_clock::now() < deadline) {
    if (drain_early() + drain_late() == 0) std::this_thread::sleep_for(20us);
  }
  feed.stop();
  std::cout << "ud snapshot: " << snapshot_ticks << " entries up to sequence " << snapshot_max
            << " in " << std::chrono::duration_cast<std::chrono::microseconds>(snapshot_took).count()
            << " us (joined after " << kJoinAfter << " ticks); early: lost " << early.counters().lost
            << ", recovered " << early.counters().recovered << "; late: recovered "
            << late->counters().recovered << std::endl;

  REQUIRE(feed.published() == kTotal);
  CHECK(early_in_order);
  CHECK(early_next == kTotal + 1);
  CHECK(early.counters().lost == 0);
  CHECK_FALSE(late->in_snapshot());
  CHECK(snapshot_ticks > 2900);  // nearly every instrument has every class by then
  CHECK(snapshot_ticks <= 3000);
  CHECK_FALSE(flag_after_live);
  CHECK_FALSE(mixed);
  CHECK(live_first == snapshot_max + 1);  // nothing reflected twice, nothing after it missed
  CHECK(live_in_order);
  CHECK(live_next == kTotal + 1);
  CHECK(snapshot_max >= kJoinAfter);
  CHECK(snapshot_max < kTotal);  // joined mid-stream
  const SubscriberCounters lcnt = late->counters();
  CHECK(lcnt.from_table == snapshot_ticks);
  CHECK(lcnt.received == kTotal + 1 - live_first);
  CHECK(lcnt.lost == 0);
  CHECK(lcnt.table_abandoned == 0);

  REQUIRE(early_view.size() == late_view.size());
  for (const auto& [key, tick] : early_view) {
    const auto it = late_view.find(key);
    REQUIRE(it != late_view.end());
    CHECK(same(tick, it->second));
    const auto table = pub.last_value(key.first, static_cast<StateClass>(key.second));
    REQUIRE(table);
    CHECK(same(tick, *table));
  }
  CHECK(early_view.size() == 3000);
}

// policy = conflate over UD: the subscriber stops reading while 40,000 ticks go by, more than the
// publisher's history holds, so recovery cannot fill what it missed; it catches up through the
// table instead, and ends with the view of one that kept up. What it missed live is counted lost,
// exactly.
TEST_CASE("a conflate subscriber over UD that stops reading ends with the view of one that kept up", "[state]") {
  Publisher pub(pub_config("239.7.7.22", 7492, true, 16384));  // 40,000 ticks stopped: gone
  const SubscriberConfig sc = sub_config("239.7.7.22");
  Subscriber keeper(sc);
  SubscriberConfig cc = sc;
  cc.policy = SlowConsumerPolicy::conflate;
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  std::unique_ptr<Subscriber> slow = make_while(cc, [&] {
    pub.service();
    return keeper.poll([](const Tick&) {});
  }, deadline);
  REQUIRE(slow != nullptr);

  constexpr std::uint64_t kTotal = 100'000, kPauseFrom = 30'000, kPauseTo = 70'000;
  Feed feed(pub, kTotal, 0);
  View keeper_view, slow_view;
  std::uint64_t slow_live = 0, slow_table = 0, slow_next_live = 0;
  bool slow_in_order = true, snapshot_said = false;
  std::vector<bool> seen(kTotal + 1, false);
  while ((keeper.next_sequence() <= kTotal || slow->next_sequence() <= kTotal) &&
         std::chrono::steady_clock::now() < deadline) {
    std::size_t n = keeper.poll([&](const Tick& t) { apply(keeper_view, t); });
    const std::uint64_t p = feed.published();
    if (p < kPauseFrom || p >= kPauseTo) {
      n += slow->poll([&](const Tick& t) {
        if ((t.flags & kTickFromTable) != 0) {
          snapshot_said = snapshot_said || slow->in_snapshot();
          ++slow_table;
        } else {
          slow_in_order = slow_in_order && t.seq >= slow_next_live;
          slow_next_live = t.seq + 1;
          ++slow_live;
          if (t.seq <= kTotal) seen[t.seq] = true;
        }
        apply(slow_view, t);
      });
    }
    if (n == 0) std::this_thread::sleep_for(20us);
  }
  feed.stop();
  REQUIRE(feed.published() == kTotal);

  const SubscriberCounters c = slow->counters();
  std::uint64_t missed = 0, trades_missed = 0, trades = 0;
  for (std::uint64_t s = 1; s <= kTotal; ++s) {
    const bool trade = state_class_of(market_tick(s - 1).kind) == static_cast<int>(StateClass::trade);
    trades += trade ? 1 : 0;
    if (seen[s]) continue;
    ++missed;
    trades_missed += trade ? 1 : 0;
  }
  std::cout << "ud conflate: " << c.received << " live, " << c.lost << " lost (" << trades_missed
            << " of " << trades << " trades), " << c.from_table << " from the table in "
            << c.conflations << " conflations; keeper: lost " << keeper.counters().lost
            << ", recovered " << keeper.counters().recovered << std::endl;
  CHECK(c.conflations >= 1);
  CHECK_FALSE(snapshot_said);  // a conflation's entries, not a snapshot's
  CHECK(c.from_table == slow_table);
  CHECK(c.received == slow_live);
  CHECK(slow_in_order);
  CHECK(c.lost > 0);
  CHECK(c.received + c.lost == kTotal);  // exactly what it did not get live is counted lost
  CHECK(missed == c.lost);
  CHECK(trades_missed > 0);
  CHECK(c.table_abandoned == 0);
  CHECK(keeper.counters().lost == 0);

  REQUIRE(keeper_view.size() == slow_view.size());
  for (const auto& [key, tick] : keeper_view) {
    const auto it = slow_view.find(key);
    REQUIRE(it != slow_view.end());
    CHECK(same(tick, it->second));
  }
}

// Bad input: a snapshot of a UD channel whose publisher keeps no table, over two groups, or with
// no publisher there, is refused at construction, saying why and where.
TEST_CASE("snapshot over UD without a table, over two groups or with no publisher is refused naming why", "[state]") {
  Publisher plain(pub_config("239.7.7.23", 7493, /*table=*/false));
  std::atomic<bool> stop{false};
  std::thread beat([&] {
    while (!stop.load()) {
      plain.service();
      std::this_thread::sleep_for(1ms);
    }
  });
  auto refused = [](const SubscriberConfig& c, Errc code, const char* text, const char* where = "ud-state") {
    try {
      Subscriber s(c);
      FAIL("constructed");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == make_error_code(code));
      CHECK_THAT(e.what(), Catch::Contains(text) && Catch::Contains(where));
    }
  };
  SubscriberConfig c = sub_config("239.7.7.23");
  c.start = StartMode::snapshot;
  refused(c, Errc::unsupported, "keeps none ([state] enabled = false)");
  c.start = StartMode::live;
  c.policy = SlowConsumerPolicy::conflate;
  refused(c, Errc::unsupported, "keeps none");
  stop.store(true);
  beat.join();

  c = sub_config("239.7.7.23");
  c.start = StartMode::snapshot;
  c.rdma.groups = {"239.7.7.23", "239.7.7.24"};
  refused(c, Errc::config_error, "exactly one group (2 given)", "rdma.groups");

  c = sub_config("239.7.7.25");  // nobody publishes here
  c.start = StartMode::snapshot;
  c.publisher_timeout = 200ms;
  c.rdma.connect_timeout = 300ms;
  refused(c, Errc::timed_out, "no publisher was heard on group 239.7.7.25");
}
