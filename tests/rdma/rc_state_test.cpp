// The market's state over RC, on the rig's device (docs/state.md): the publisher's last-value
// table read with RDMA READ by a late joiner (start = snapshot) and by a conflating subscriber
// that stopped reading, and the table's memory region, which a subscriber can read and not write.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "rc_test_util.hpp"
#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/state.hpp"
#include "tickrail/subscriber.hpp"
#include "transport/rdma/rc/rc_subscriber.hpp"
#include "../market_stream.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

PublisherConfig pub_config(const std::string& channel, bool table = true) {
  PublisherConfig c;
  c.transport = TransportKind::rc;
  c.channel = channel;
  c.ring_capacity = 4096;
  c.state.enabled = table;
  c.state.capacity = 1000;
  c.rdma.address = rdma::test::address(rdma::test::device());
  c.rdma.port = 0;  // ephemeral
  c.rdma.heartbeat_interval = 20ms;
  c.rdma.connect_timeout = 20s;
  return c;
}

SubscriberConfig sub_config(const Publisher& pub) {
  SubscriberConfig c;
  c.transport = TransportKind::rc;
  c.channel = pub.config().channel;
  c.ring_capacity = 4096;
  c.publisher_timeout = 10s;  // a guest starved by its host stalls for seconds
  c.rdma.address = pub.config().rdma.address;
  c.rdma.port = pub.config().rdma.port;
  c.rdma.polling = RcPolling::memory;
  c.rdma.split_commit = true;  // memory polling where the device does not report order (rxe)
  c.rdma.connect_timeout = 20s;
  return c;
}

template <class T = Subscriber>
std::unique_ptr<T> connect(Publisher& pub, const SubscriberConfig& c) {
  auto s = rc_test::construct_serving(pub, [&c] { return std::make_unique<T>(c); });
  REQUIRE(s != nullptr);
  return s;
}

bool wait_subscribers(Publisher& pub, std::uint32_t n) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (pub.subscriber_count() < n) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    pub.service();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Publishes market_tick(0 .. total - 1) in batches of 16 on its own thread (the publishing
// thread, which also serves connections), holding at `hold_at` until release() (0: no hold).
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
    }
  }
  std::atomic<std::uint64_t> published_{0};
  std::atomic<bool> released_{false}, stop_{false};
  std::thread thread_;
};

}  // namespace

// A subscriber that joins with start = snapshot after many ticks over 1,000 instruments, while the
// publisher keeps publishing, ends with the view of one present from the start, and of the
// publisher's table. The late one polls `polling` (the early one memory).
namespace {

void late_join(const std::string& channel, RcPolling polling) {
  Publisher pub(pub_config(channel));
  const SubscriberConfig sc = sub_config(pub);
  auto early = connect(pub, sc);
  REQUIRE(wait_subscribers(pub, 1));

  constexpr std::uint64_t kTotal = 100'000, kJoinAfter = 50'000;
  Feed feed(pub, kTotal, kJoinAfter + 5'000);  // holds mid-stream until the late one is in
  View early_view, late_view;
  std::uint64_t early_next = 1;
  bool early_in_order = true;
  auto drain_early = [&] {
    return early->poll([&](const Tick& t) {
      early_in_order = early_in_order && t.seq == early_next;
      early_next = t.seq + 1;
      apply(early_view, t);
    });
  };
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  while (feed.published() < kJoinAfter && std::chrono::steady_clock::now() < deadline) (void)drain_early();
  REQUIRE(feed.published() >= kJoinAfter);

  SubscriberConfig lc = sc;
  lc.start = StartMode::snapshot;
  lc.rdma.polling = polling;
  std::unique_ptr<Subscriber> late;
  std::atomic<bool> attached{false};
  std::thread attach([&] {
    late = std::make_unique<Subscriber>(lc);
    attached.store(true, std::memory_order_release);
  });
  while (!attached.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
    if (drain_early() == 0) std::this_thread::sleep_for(20us);
  }
  attach.join();
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
  std::cout << "rc snapshot (" << (polling == RcPolling::cq ? "cq" : "memory") << " polling): " << snapshot_ticks << " entries up to sequence " << snapshot_max
            << " in " << std::chrono::duration_cast<std::chrono::microseconds>(snapshot_took).count()
            << " us (joined after " << kJoinAfter << " ticks)" << std::endl;

  REQUIRE(feed.published() == kTotal);
  CHECK(early_in_order);
  CHECK(early_next == kTotal + 1);
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
  CHECK(pub.counters().state_entries == 3000);
}

}  // namespace

TEST_CASE("a late joiner over RC ends with the view of a subscriber there from the start", "[state]") {
  late_join("rc-state-join", RcPolling::memory);
}

// The same over CQ polling: the roll forward reads the ring up to what the completions say.
TEST_CASE("a late joiner over RC polling its completion queue ends with the same view", "[state]") {
  late_join("rc-state-join-cq", RcPolling::cq);
}

// policy = conflate over RC: the subscriber stops reading while the stream goes on, is lapped,
// catches up through the table with RDMA READ, and ends with the view of a block subscriber that
// kept up; what it missed live (the trades among it) is counted exactly.
TEST_CASE("a conflate subscriber over RC that stops reading ends with the view of one that kept up", "[state]") {
  Publisher pub(pub_config("rc-state-conflate"));
  const SubscriberConfig sc = sub_config(pub);
  auto keeper = connect(pub, sc);
  SubscriberConfig cc = sc;
  cc.policy = SlowConsumerPolicy::conflate;
  auto slow = connect(pub, cc);
  REQUIRE(wait_subscribers(pub, 2));

  constexpr std::uint64_t kTotal = 100'000, kPauseFrom = 30'000, kPauseTo = 70'000;
  Feed feed(pub, kTotal, 0);
  View keeper_view, slow_view;
  std::uint64_t slow_live = 0, slow_table = 0, slow_next_live = 0;
  bool slow_in_order = true, snapshot_said = false;
  std::vector<bool> seen(kTotal + 1, false);
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  while ((keeper->next_sequence() <= kTotal || slow->next_sequence() <= kTotal) &&
         std::chrono::steady_clock::now() < deadline) {
    std::size_t n = keeper->poll([&](const Tick& t) { apply(keeper_view, t); });
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
  std::cout << "rc conflate: " << c.received << " live, " << c.lost << " lost (" << trades_missed
            << " of " << trades << " trades), " << c.from_table << " from the table in "
            << c.conflations << " conflations" << std::endl;
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
  CHECK(keeper->counters().lost == 0);

  REQUIRE(keeper_view.size() == slow_view.size());
  for (const auto& [key, tick] : keeper_view) {
    const auto it = slow_view.find(key);
    REQUIRE(it != slow_view.end());
    CHECK(same(tick, it->second));
  }
}

// The table's region is registered for remote read only, and nothing around it is readable: a
// WRITE with its rkey, or a READ past its end, fails at the publisher's NIC and leaves the table
// as it was.
TEST_CASE("a subscriber can read the table and cannot write it", "[state]") {
  Publisher pub(pub_config("rc-state-readonly"));
  Tick q{};
  q.kind = TickKind::Quote;
  q.instrument = 7;
  q.price = 1234;
  for (int i = 0; i < 3; ++i) REQUIRE(pub.publish(q).published == 1);
  SubscriberConfig sc = sub_config(pub);
  sc.start = StartMode::snapshot;
  const std::uint64_t entry = 64 + (7 * kStateClasses + 0) * 64;  // after the table_next line

  auto sub = connect<rdma::rc::RcSubscriber>(pub, sc);
  std::uint64_t from_table = 0;
  auto sink_fn = [&](const Tick& t) { from_table += (t.flags & kTickFromTable) != 0 ? 1 : 0; };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (sub->in_snapshot() && std::chrono::steady_clock::now() < deadline) {
    pub.service();
    (void)sub->poll(detail::TickSink(sink_fn), 64);
  }
  REQUIRE_FALSE(sub->in_snapshot());
  CHECK(from_table == 1);
  CHECK(sub->probe_table(false, entry) == IBV_WC_SUCCESS);  // reading it works
  const ibv_wc_status write = sub->probe_table(true, entry);
  INFO("WRITE: " << ibv_wc_status_str(write));
  CHECK(write == IBV_WC_REM_ACCESS_ERR);

  auto other = connect<rdma::rc::RcSubscriber>(pub, sc);
  const std::uint64_t end = 64 + 1000 * kStateClasses * 64;
  const ibv_wc_status past = other->probe_table(false, end);
  INFO("READ past the end: " << ibv_wc_status_str(past));
  CHECK(past == IBV_WC_REM_ACCESS_ERR);

  const auto kept = pub.last_value(7, StateClass::quote);
  REQUIRE(kept);
  CHECK(kept->price == 1234);
  CHECK(kept->seq == 3);
  CHECK(kept->send_ts != ~std::uint64_t{0});  // the word the WRITE aimed at
}

// Bad input: a snapshot of a channel that keeps no table, and conflate asked of a subscriber that
// would poll its completion queue, are refused with the reason and where.
TEST_CASE("snapshot over RC without a table, or conflate with CQ polling, is refused naming why", "[state]") {
  Publisher bare(pub_config("rc-state-bare", false));
  SubscriberConfig sc = sub_config(bare);
  sc.start = StartMode::snapshot;
  auto f = std::async(std::launch::async, [&sc] { return std::make_unique<Subscriber>(sc); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (f.wait_for(1ms) != std::future_status::ready && std::chrono::steady_clock::now() < deadline) {
    bare.service();
  }
  REQUIRE(f.wait_for(0ms) == std::future_status::ready);
  try {
    (void)f.get();
    FAIL("a snapshot of a channel without a table");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == Errc::unsupported);
    CHECK_THAT(e.what(), Catch::Contains("rc-state-bare") && Catch::Contains("last-value table") &&
                             Catch::Contains("start = snapshot"));
  }

  Publisher pub(pub_config("rc-state-cq"));
  SubscriberConfig cq = sub_config(pub);
  cq.policy = SlowConsumerPolicy::conflate;
  cq.rdma.polling = RcPolling::cq;
  try {
    Subscriber s(cq);
    FAIL("conflate with CQ polling");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == Errc::unsupported);
    CHECK_THAT(e.what(), Catch::Contains("policy = conflate") && Catch::Contains("rdma.polling = memory"));
  }
}
