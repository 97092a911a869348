// The market's state over UD, on the rig's device (docs/state.md "Over UD"): the publisher's
// last-value table read with RDMA READ over the recovery connection by a late joiner (start =
// snapshot) and by a conflating subscriber that stopped reading until the history had forgotten
// what it missed; and a snapshot asked where it cannot be taken, refused naming why.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/state.hpp"
#include "tickrail/subscriber.hpp"
#include "ud_support.hpp"
#include "../state_checks.hpp"

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

  const auto deadline = std::chrono::steady_clock::now() + 240s;
  // Heard (a heartbeat) before the first tick: it starts at sequence 1.
  while (early.state() != SubscriberState::active && std::chrono::steady_clock::now() < deadline) {
    pub.service();
    (void)early.poll([](const Tick&) {});
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(early.state() == SubscriberState::active);

  SubscriberConfig lc = sc;
  lc.start = StartMode::snapshot;
  const LateJoin r = run_late_join(pub, early, 200us, deadline, [&lc](auto& drain_early, auto until) {
    return make_while(lc, drain_early, until);
  });
  std::cout << "ud snapshot: " << r.snapshot_ticks << " entries up to sequence " << r.snapshot_max << " in "
            << std::chrono::duration_cast<std::chrono::microseconds>(r.snapshot_took).count() << " us (joined after "
            << LateJoin::kJoinAfter << " ticks); early: lost " << early.counters().lost << ", recovered "
            << early.counters().recovered << "; late: recovered " << r.late->counters().recovered << std::endl;
  check_late_join(pub, r);
  CHECK(early.counters().lost == 0);
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

  const Conflation r = run_conflation(pub, keeper, *slow, 200us, deadline);
  const SubscriberCounters& c = r.counters;
  std::cout << "ud conflate: " << c.received << " live, " << c.lost << " lost (" << r.trades_missed << " of "
            << r.trades << " trades), " << c.from_table << " from the table in " << c.conflations
            << " conflations; keeper: lost " << keeper.counters().lost << ", recovered " << keeper.counters().recovered
            << std::endl;
  check_conflation(r, keeper);
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
  SubscriberConfig c = sub_config("239.7.7.23");
  c.start = StartMode::snapshot;
  refused(c, Errc::unsupported, "keeps none ([state] enabled = false)", "ud-state");
  c.start = StartMode::live;
  c.policy = SlowConsumerPolicy::conflate;
  refused(c, Errc::unsupported, "keeps none", "ud-state");
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
  refused(c, Errc::timed_out, "no publisher was heard on group 239.7.7.25", "ud-state");
}
