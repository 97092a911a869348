// The market's state over RC, on the rig's device (docs/state.md): the publisher's last-value
// table read with RDMA READ by a late joiner (start = snapshot) and by a conflating subscriber
// that stopped reading, and the table's memory region, which a subscriber can read and not write.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <thread>

#include "rc_test_util.hpp"
#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/state.hpp"
#include "tickrail/subscriber.hpp"
#include "transport/rdma/rc/rc_subscriber.hpp"
#include "../state_checks.hpp"

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

  SubscriberConfig lc = sc;
  lc.start = StartMode::snapshot;
  lc.rdma.polling = polling;
  auto attach = [&lc](auto& drain_early, std::chrono::steady_clock::time_point deadline) {
    std::unique_ptr<Subscriber> late;
    std::atomic<bool> attached{false};
    std::thread t([&] {
      late = std::make_unique<Subscriber>(lc);
      attached.store(true, std::memory_order_release);
    });
    while (!attached.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
      if (drain_early() == 0) std::this_thread::sleep_for(20us);
    }
    t.join();
    return late;
  };
  const LateJoin r = run_late_join(pub, *early, {}, std::chrono::steady_clock::now() + 240s, attach);
  std::cout << "rc snapshot (" << (polling == RcPolling::cq ? "cq" : "memory") << " polling): " << r.snapshot_ticks
            << " entries up to sequence " << r.snapshot_max << " in "
            << std::chrono::duration_cast<std::chrono::microseconds>(r.snapshot_took).count() << " us (joined after "
            << LateJoin::kJoinAfter << " ticks)" << std::endl;
  check_late_join(pub, r);
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

  const Conflation r = run_conflation(pub, *keeper, *slow, {}, std::chrono::steady_clock::now() + 240s);
  const SubscriberCounters& c = r.counters;
  std::cout << "rc conflate: " << c.received << " live, " << c.lost << " lost (" << r.trades_missed << " of "
            << r.trades << " trades), " << c.from_table << " from the table in " << c.conflations << " conflations"
            << std::endl;
  check_conflation(r, *keeper);
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
  refused(cq, Errc::unsupported, "policy = conflate", "rdma.polling = memory");
}
