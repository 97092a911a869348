// tickrail's own threads over shared memory: each one named, the background ones off the core of
// the thread that created the endpoints (or where housekeeping_cpus says), read back from /proc
// as an operator would; their wake-ups in the live counters; a bad housekeeping_cpus refused.
#include <catch2/catch.hpp>

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "../../thread_census.hpp"
#include "core/stats.hpp"
#include "core/thread.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "tickrail/threaded_publisher.hpp"
#include "tickrail/tools/config_file.hpp"
#include "tickrail/tools/stats_reader.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {


std::string channel(const char* what) { return std::string("thr-") + what + "-" + std::to_string(::getpid()); }

struct Endpoints {
  explicit Endpoints(const std::string& name, const std::string& housekeeping = {})
      : pub(pub_config(name, housekeeping)), sub(sub_config(name, housekeeping)) {
    REQUIRE(pub.wait_subscribers(1, 5s) == 1);
  }
  static PublisherConfig pub_config(const std::string& name, const std::string& housekeeping) {
    PublisherConfig c;
    c.channel = name;
    c.max_subscribers = 2;
    c.ring_capacity = 64;
    c.conductor_period = std::chrono::milliseconds(1);
    c.housekeeping_cpus = housekeeping;
    return c;
  }
  static SubscriberConfig sub_config(const std::string& name, const std::string& housekeeping) {
    SubscriberConfig c;
    c.channel = name;
    c.attach_timeout = 5s;
    c.housekeeping_cpus = housekeeping;
    return c;
  }
  Publisher pub;
  Subscriber sub;
};

bool named(const std::vector<ThreadSeen>& ts, const std::string& name) {
  return std::any_of(ts.begin(), ts.end(), [&](const ThreadSeen& t) { return t.name == name; });
}

// Every thread but the main one is the library's, and named; returns them. A process-wide thread
// started a moment ago (the log writer, the stats thread) names itself once placed: waited for
// (bounded) until every one is named and `wanted` are there.

std::vector<ThreadSeen> library_threads(const std::vector<std::string>& wanted) {
  std::vector<ThreadSeen> all;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    all = threads_of(::getpid());
    const std::size_t unnamed = static_cast<std::size_t>(std::count_if(
        all.begin(), all.end(), [](const ThreadSeen& t) { return t.tid != ::getpid() && !is_tickrail(t); }));
    const bool settled =
        (unnamed == 0 || (kRuntimeThreads && unnamed == 1)) &&
        std::all_of(wanted.begin(), wanted.end(), [&](const std::string& w) { return named(all, w); });
    if (settled || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(2ms);
  }
  INFO(describe(all));
  std::vector<ThreadSeen> ours;
  for (const ThreadSeen& t : all) {
    if (t.tid == ::getpid()) continue;
    if (!is_tickrail(t) && kRuntimeThreads) continue;  // the sanitizer's, not ours
    CHECK(is_tickrail(t));
    ours.push_back(t);
  }
  return ours;
}


// The live counters of this process's block `kind` (the first one), read as tickrail-stat does.
stats::BlockSnapshot block_of(stats::BlockKind kind) {
  const stats::ProcessSnapshot p = stats::read_stat_file(stats::current_stat_path());
  for (const stats::BlockSnapshot& b : p.blocks) {
    if (b.kind == kind) return b;
  }
  FAIL("no block of kind " << stats::to_string(kind));
  return {};
}

}  // namespace

TEST_CASE("backgroundThreadsAreNamedAndStayOffTheCoreOfTheThreadThatCreatedTheEndpoints",
          "[threads]") {
  if (!two_cpus()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  const PinnedHere hot(0);
  Endpoints e(channel("default"));
  ThreadedPublisherOptions opt;
  opt.cpu = 1;
  opt.idle = IdleKind::backoff;
  PublisherConfig tc = Endpoints::pub_config(channel("threaded"), "");
  ThreadedPublisher tp(tc, opt);

  const std::vector<ThreadSeen> ours = library_threads({"tr-shm-cond", "tr-stats", "tr-log", "tr-pub"});
  for (const char* name : {"tr-shm-cond", "tr-stats", "tr-log", "tr-pub"}) {
    INFO(name << " among\n" << describe(ours));
    CHECK(named(ours, name));
  }
  for (const ThreadSeen& t : ours) {
    INFO(t.name << " may run on " << format_cpu_list(t.cpus));
    CHECK_FALSE(has_cpu(t, 0));  // the background ones; tr-pub is pinned to 1
  }
}

TEST_CASE("housekeepingCpusPutsEveryBackgroundThreadThere", "[threads]") {
  if (!two_cpus()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  // The creating thread is not pinned: without the key its threads could run on 0 and 1.
  Endpoints e(channel("explicit"), "1");
  const std::vector<ThreadSeen> ours = library_threads({"tr-shm-cond", "tr-stats", "tr-log"});
  CHECK(named(ours, "tr-shm-cond"));
  for (const ThreadSeen& t : ours) {
    INFO(t.name);
    CHECK(t.cpus == std::vector<int>{1});
  }
}

TEST_CASE("backgroundWakeUpsAreCountedInTheLiveCounters", "[threads]") {
  Endpoints e(channel("wakeups"));
  // The conductor wakes every millisecond, the stats thread every 100 ms: bounded waits for both.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::uint64_t conductor = 0;
  std::uint64_t stats_thread = 0;
  while (std::chrono::steady_clock::now() < deadline && (conductor < 3 || stats_thread < 2)) {
    const stats::BlockSnapshot b = block_of(stats::BlockKind::publisher);
    conductor = b.get(stats::PubCounter::background_wakeups);
    stats_thread = b.get(stats::PubCounter::stats_wakeups);
    std::this_thread::sleep_for(5ms);
  }
  CHECK(conductor >= 3);
  CHECK(stats_thread >= 2);
  // A shared-memory subscriber runs no thread.
  CHECK(block_of(stats::BlockKind::subscriber).get(stats::SubCounter::background_wakeups) == 0);
  // tickrail-stat's names for them.
  CHECK(std::string(stats::counter_name(stats::BlockKind::publisher,
                                        static_cast<std::uint32_t>(stats::PubCounter::background_wakeups))) ==
        "background_wakeups");
}

TEST_CASE("aBadHousekeepingCpusIsRefusedNamingTheKeyAndValue", "[threads]") {
  PublisherConfig pc = Endpoints::pub_config(channel("bad"), "1-x");
  try {
    Publisher p(pc);
    FAIL("created with housekeeping_cpus '1-x'");
  } catch (const Error& err) {
    CHECK(err.code() == make_error_code(Errc::config_error));
    CHECK_THAT(err.what(), Contains("housekeeping_cpus") && Contains("'1-x'"));
  }
  // A cpu the process may not use: refused when the endpoint is created, saying which it may.
  SubscriberConfig sc = Endpoints::sub_config(channel("bad"), "4000");
  try {
    Subscriber s(sc);
    FAIL("created with housekeeping_cpus '4000'");
  } catch (const Error& err) {
    CHECK(err.code() == make_error_code(Errc::config_error));
    CHECK_THAT(err.what(), Contains("housekeeping_cpus") && Contains("'4000'") &&
                               Contains("cpu 4000") && Contains(format_cpu_list(process_cpus())));
  }
  // In a file: the file, line and key.
  ConfigFile f(std::string_view("[publisher]\nhousekeeping_cpus = \"two\"\n"), "app.toml");
  PublisherConfig from_file;
  try {
    read_publisher_config(f, from_file);
    FAIL("read housekeeping_cpus 'two'");
  } catch (const Error& err) {
    CHECK_THAT(err.what(), Contains("app.toml:2") && Contains("publisher.housekeeping_cpus") &&
                               Contains("'two'"));
  }
}

TEST_CASE("theDefaultPlacementIsTheProcessCpusOffThePinnedOnes", "[threads]") {
  CHECK(detail::cpus_off({0, 1, 2, 3}, {2}) == std::vector<int>{0, 1, 3});
  CHECK(detail::cpus_off({0, 1, 2, 3}, {0, 1, 2, 3}).empty());  // not pinned: inherit
  CHECK(detail::cpus_off({0}, {0}).empty());                    // one cpu: nothing left
  CHECK(detail::cpus_off({0, 1}, {5}).empty());                 // outside the set: inherit
}

TEST_CASE("theDefaultPlacementKeepsOffEveryHotCpuWhileOneIsLeft", "[threads]") {
  CHECK(detail::default_cpus({0, 1, 2, 3}, {}, {}).empty());                    // nothing hot: inherit
  CHECK(detail::default_cpus({0, 1, 2, 3}, {2}, {0, 1, 3}) == std::vector<int>{0, 1, 3});
  CHECK(detail::default_cpus({0, 1, 2, 3}, {1, 2}, {0, 1, 3}) == std::vector<int>{0, 3});
  CHECK(detail::default_cpus({0, 1, 2, 3}, {1}, {}) == std::vector<int>{0, 2, 3});  // not pinned
  CHECK(detail::default_cpus({0, 1}, {0, 1}, {0}) == std::vector<int>{0});  // all hot: off its own
}

// A thread pinned to a cpu that creates an endpoint makes that cpu hot: the background threads
// of endpoints created before (by a thread that is not pinned) and after move off it.
TEST_CASE("aCpuMadeHotMovesTheDefaultPlacedThreadsOffIt", "[threads]") {
  if (!two_cpus()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  Publisher before(Endpoints::pub_config(channel("before"), ""));
  {
    const PinnedHere hot(0);
    Publisher pinned(Endpoints::pub_config(channel("pinned"), ""));
  }
  Publisher after(Endpoints::pub_config(channel("after"), ""));
  const std::vector<ThreadSeen> ours = library_threads({"tr-shm-cond", "tr-stats", "tr-log"});
  CHECK(std::count_if(ours.begin(), ours.end(), [](const ThreadSeen& t) { return t.name == "tr-shm-cond"; }) == 2);
  for (const ThreadSeen& t : ours) {
    INFO(t.name << " may run on " << format_cpu_list(t.cpus));
    CHECK_FALSE(has_cpu(t, 0));
  }
}

// A ThreadedPublisher's publishing thread makes its cpu hot while it runs: every background
// thread placed by default moves off it, those started before included.
TEST_CASE("aPublishingThreadsCpuIsLeftToIt", "[threads]") {
  const std::vector<int> cpus = process_cpus();
  if (cpus.size() < 3 || cpus[2] != 2) {
    WARN("needs cpus 0, 1 and 2");
    return;
  }
  Publisher before(Endpoints::pub_config(channel("tp-before"), ""));
  ThreadedPublisherOptions opt;
  opt.cpu = 2;
  opt.idle = IdleKind::backoff;
  ThreadedPublisher tp(Endpoints::pub_config(channel("tp"), ""), opt);
  const std::vector<ThreadSeen> ours = library_threads({"tr-shm-cond", "tr-stats", "tr-log", "tr-pub"});
  for (const ThreadSeen& t : ours) {
    INFO(t.name << " may run on " << format_cpu_list(t.cpus));
    if (t.name == "tr-pub") {
      CHECK(t.cpus == std::vector<int>{2});
    } else {
      CHECK_FALSE(has_cpu(t, 2));
    }
  }
}

TEST_CASE("wakeUpCountsLiveOffTheHotCountersLines", "[threads]") {
  // The background threads never write the line pair the publishing or polling thread writes
  // (the hot counters fill one pair exactly).
  STATIC_REQUIRE(sizeof(stats::Block::counters) == stats::kLinePair);
  STATIC_REQUIRE(offsetof(stats::Block, thread_counters) >=
                 offsetof(stats::Block, counters) + sizeof(stats::Block::counters));
  STATIC_REQUIRE(offsetof(stats::Block, thread_counters) + sizeof(stats::Block::thread_counters) <=
                 offsetof(stats::Block, rows));
  // Appended rows: the indices before them keep their meaning.
  STATIC_REQUIRE(static_cast<int>(stats::PubCounter::background_wakeups) == 6);
  STATIC_REQUIRE(static_cast<int>(stats::PubCounter::stats_wakeups) == 7);
  STATIC_REQUIRE(static_cast<int>(stats::SubCounter::background_wakeups) == 11);
}

// A background thread waits on it beside its own fds, with no period: a stop must wake it.
TEST_CASE("aStopSignalIsReadableOnceAStopIsRequested", "[threads]") {
  std::stop_source source;
  const detail::StopSignal before(source.get_token());
  REQUIRE(before.fd() >= 0);
  pollfd p{before.fd(), POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 0);
  std::jthread stopper([&] { source.request_stop(); });
  CHECK(::poll(&p, 1, 10'000) == 1);
  stopper.join();
  // A stop requested before the signal was made: readable at once.
  const detail::StopSignal after(source.get_token());
  pollfd q{after.fd(), POLLIN, 0};
  CHECK(::poll(&q, 1, 0) == 1);
}
