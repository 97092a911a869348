// tickrail's threads over RC and UD: each named, and the background ones (CM threads, the UD
// conductor and recovery server, stats, log) off the core of the thread that created the
// endpoints, read back from /proc as an operator would. A few seconds in the rig.
#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../thread_census.hpp"
#include "rc_test_util.hpp"
#include "core/stats.hpp"
#include "rig_env.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "tickrail/tools/stats_reader.hpp"
#include "ud_support.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;
namespace rt = tickrail::rdma::test;

namespace {



// Checks the process's threads once `wanted` are there and named (bounded): the wanted names
// present, and no tickrail thread on cpu 0. Threads that are not tickrail's are reported.
void check_threads(const std::vector<std::string>& wanted) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  std::vector<ThreadSeen> all;
  const auto count = [&](const std::string& name) {
    return std::count_if(all.begin(), all.end(), [&](const ThreadSeen& t) { return t.name == name; });
  };
  for (;;) {
    all = threads_of(::getpid());
    bool there = true;
    for (const std::string& w : wanted) {
      there = there && count(w) >= std::count(wanted.begin(), wanted.end(), w);
    }
    if (there || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(2ms);
  }
  INFO(describe(all));
  for (const std::string& w : wanted) {
    INFO(w);
    CHECK(count(w) >= std::count(wanted.begin(), wanted.end(), w));
  }
  for (const ThreadSeen& t : all) {
    if (t.tid == ::getpid()) continue;
    if (!is_tickrail(t)) {
      WARN("a thread that is not tickrail's: " << t.name << " (" << t.tid << ")");
      continue;
    }
    INFO(t.name << " may run on " << format_cpu_list(t.cpus));
    CHECK_FALSE(has_cpu(t, 0));
  }
}

}  // namespace

TEST_CASE("rcThreadsAreNamedAndStayOffTheCreatingThreadsCore", "[threads]") {
  if (!two_cpus()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  const std::string dev = rt::device();
  const std::string addr = rt::address(dev);
  PublisherConfig pc;
  pc.transport = TransportKind::rc;
  pc.channel = "rc-threads";
  pc.ring_capacity = 64;
  pc.rdma.device = dev;
  pc.rdma.address = addr;
  pc.rdma.port = 7463;
  SubscriberConfig sc;
  sc.transport = TransportKind::rc;
  sc.channel = pc.channel;
  sc.rdma = pc.rdma;

  const PinnedHere hot(0);
  Publisher pub(pc);
  // The subscriber connects while this thread serves the publisher: its creating thread is
  // pinned to cpu 0 as well.
  auto sub = rc_test::construct_serving(pub, [&] {
    (void)pin_current_thread(0);
    return std::make_unique<Subscriber>(sc);
  });
  REQUIRE(sub != nullptr);
  check_threads({"tr-rc-cm", "tr-rc-cm", "tr-stats", "tr-log"});
}

TEST_CASE("udThreadsAreNamedAndStayOffTheCreatingThreadsCore", "[threads]") {
  if (!two_cpus()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  PublisherConfig pc = rt::ud_publisher_config("239.7.7.9", 7465);
  pc.channel = "ud-threads";
  SubscriberConfig sc = rt::ud_subscriber_config("239.7.7.9");
  sc.channel = pc.channel;

  const PinnedHere hot(0);
  Publisher pub(pc);
  Subscriber sub(sc);
  check_threads({"tr-ud-recov", "tr-ud-cond", "tr-stats", "tr-log"});
}

TEST_CASE("udHousekeepingCpusPutsTheSubscribersConductorThere", "[threads]") {
  if (!two_cpus()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  SubscriberConfig sc = rt::ud_subscriber_config("239.7.7.10");
  sc.channel = "ud-threads-hk";
  sc.housekeeping_cpus = "1";
  Subscriber sub(sc);  // the creating thread is not pinned: without the key it could run on 0
  const std::vector<ThreadSeen> all = threads_of(::getpid());
  INFO(describe(all));
  bool seen = false;
  for (const ThreadSeen& t : all) {
    if (t.name != "tr-ud-cond") continue;
    seen = true;
    CHECK(t.cpus == std::vector<int>{1});
  }
  CHECK(seen);
}

namespace {
// This process's background wake-ups so far: the publisher's and the subscriber's.
std::pair<std::uint64_t, std::uint64_t> wakeups() {
  std::pair<std::uint64_t, std::uint64_t> w{0, 0};
  for (const stats::BlockSnapshot& b : stats::read_stat_file(stats::current_stat_path()).blocks) {
    if (b.kind == stats::BlockKind::publisher) w.first += b.get(stats::PubCounter::background_wakeups);
    if (b.kind == stats::BlockKind::subscriber) w.second += b.get(stats::SubCounter::background_wakeups);
  }
  return w;
}
}  // namespace

// A connection that is up and idle gives both CM threads nothing to do: they sleep until an
// rdma_cm event, waking at most once a second, not every few milliseconds beside the polling
// threads. Counted, not timed: a slower machine can only wake them less.
TEST_CASE("anRcConnectionThatIsUpDoesNotWakeItsCmThreads", "[threads]") {
  const std::string dev = rt::device();
  PublisherConfig pc;
  pc.transport = TransportKind::rc;
  pc.channel = "rc-quiet";
  pc.ring_capacity = 64;
  pc.rdma.device = dev;
  pc.rdma.address = rt::address(dev);
  pc.rdma.port = 7465;
  SubscriberConfig sc;
  sc.transport = TransportKind::rc;
  sc.channel = pc.channel;
  sc.rdma = pc.rdma;
  Publisher pub(pc);
  auto sub = rc_test::construct_serving(pub, [&] { return std::make_unique<Subscriber>(sc); });
  REQUIRE(sub != nullptr);
  // One tick through: the data path has taken the connection (active).
  Tick t{};
  std::uint64_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool sent = false;
  while (got == 0 && std::chrono::steady_clock::now() < deadline) {
    sent = sent || pub.publish(t).ok();
    pub.service();
    got += sub->poll([](const Tick&) {}, 16);
  }
  REQUIRE(got == 1);
  std::this_thread::sleep_for(200ms);  // the CM thread's last short waits run out
  const auto before = wakeups();
  std::this_thread::sleep_for(3s);
  const auto after = wakeups();
  INFO("publisher's CM thread: " << after.first - before.first << " wake-ups in 3 s; subscriber's: "
                                 << after.second - before.second);
  // The counters are read: each thread has woken at least once (its bounded wait).
  CHECK(after.first >= 1);
  CHECK(after.second >= 1);
  CHECK(after.first - before.first <= 6);  // every 5 ms before: about 600
  CHECK(after.second - before.second <= 6);  // every 50 ms before: about 60
  CHECK(sub->state() == SubscriberState::active);
}
