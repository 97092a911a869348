// One thread publishes a tick and polls it back, N times, over a shared-memory channel: the
// publish-to-handler path without a second core, so that `valgrind --tool=callgrind` counts its
// instructions exactly and the count can be compared from commit to commit (instructions.sh).
// Not a latency figure: nothing crosses cores here.
//
//   ipt_loop [--ticks N] [--stamp on|off] [--stats on|off]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;

namespace {

template <class = void>
std::uint64_t loop(Publisher& pub, Subscriber& sub, std::uint64_t n) {
  Tick t{};
  std::uint64_t got = 0;
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    t.order_ref = i;
    (void)pub.publish(t);
    got += sub.poll([&](const Tick& r) { sum += r.order_ref; }, 16);
  }
  return got + (sum & 1);  // the handler's work is not optimised away
}

// Out of line and named apart: callgrind collects inside ipt_measured_loop only
// (--toggle-collect), on this thread only, and not during the warm-up. noipa: identical
// functions would otherwise be folded into one address, which callgrind names after the first.
[[gnu::noipa]] std::uint64_t ipt_warm_up(Publisher& pub, Subscriber& sub, std::uint64_t n) {
  return loop(pub, sub, n);
}
[[gnu::noipa]] std::uint64_t ipt_measured_loop(Publisher& pub, Subscriber& sub, std::uint64_t n) {
  return loop(pub, sub, n);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t ticks = 100'000;
  std::string stamp = "on";
  std::string stats = "on";
  CLI::App app{"publishes and polls ticks in one thread, for callgrind's instruction counts"};
  app.add_option("--ticks", ticks, "ticks through the loop")->check(CLI::Range(1ULL, 100'000'000ULL));
  app.add_option("--stamp", stamp, "stamp send times: on or off")->check(CLI::IsMember({"on", "off"}));
  app.add_option("--stats", stats, "live counters: on or off")->check(CLI::IsMember({"on", "off"}));
  app.set_version_flag("--version", "ipt_loop (tickrail)");
  CLI11_PARSE(app, argc, argv);
  try {
    PublisherConfig pc;
    pc.channel = "ipt-" + std::to_string(::getpid());
    pc.max_subscribers = 1;
    pc.ring_capacity = 4096;
    pc.stamp_send_time = stamp == "on";
    pc.stats = stats == "on";
    Publisher pub(pc);
    SubscriberConfig sc;
    sc.channel = pc.channel;
    sc.stats = pc.stats;
    Subscriber sub(sc);
    (void)pub.wait_subscribers(1, std::chrono::seconds(10));
    if (!sub.wait_active(std::chrono::seconds(10))) {
      std::fprintf(stderr, "ipt_loop: the subscriber never became active\n");
      return 1;
    }
    // Warm the path (first-touch faults, branch history) outside the measured call.
    (void)ipt_warm_up(pub, sub, 1000);
    const std::uint64_t got = ipt_measured_loop(pub, sub, ticks);
    std::printf("ipt_loop: %llu ticks published and polled (stamp %s, stats %s)\n",
                static_cast<unsigned long long>(got), stamp.c_str(), stats.c_str());
    return got >= ticks ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "ipt_loop: %s\n", e.what());
    return 1;
  }
}
