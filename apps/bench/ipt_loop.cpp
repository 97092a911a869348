// One thread publishes a tick and polls it back, N times, over a shared-memory channel: the
// publish-to-handler path without a second core, so that `valgrind --tool=callgrind` counts its
// instructions exactly and the count can be compared from commit to commit (instructions.sh).
// Not a latency figure: nothing crosses cores here.
//
//   ipt_loop [--ticks N] [--stamp on|off] [--stats on|off] [--mix N] [--state on|off]
//
// --mix N publishes tickrail-bench's table mix over N instruments (state_bench.hpp) instead of
// one blank tick; --state on keeps the last-value table of every class with a capacity of N (1
// without --mix): the same ticks with the table on and off count what the table adds.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "state_bench.hpp"

using namespace tickrail;

namespace {

template <class = void>
std::uint64_t loop(Publisher& pub, Subscriber& sub, bench::TickMix* mix, std::uint64_t n) {
  Tick blank{};
  std::uint64_t got = 0;
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    blank.order_ref = i;
    (void)pub.publish(mix != nullptr ? mix->next() : blank);
    got += sub.poll([&](const Tick& r) { sum += r.order_ref; }, 16);
  }
  return got + (sum & 1);  // the handler's work is not optimised away
}

// Out of line and named apart: callgrind collects inside ipt_measured_loop only
// (--toggle-collect), on this thread only, and not during the warm-up. noipa: identical
// functions would otherwise be folded into one address, which callgrind names after the first.
[[gnu::noipa]] std::uint64_t ipt_warm_up(Publisher& pub, Subscriber& sub, bench::TickMix* mix, std::uint64_t n) {
  return loop(pub, sub, mix, n);
}
[[gnu::noipa]] std::uint64_t ipt_measured_loop(Publisher& pub, Subscriber& sub, bench::TickMix* mix,
                                               std::uint64_t n) {
  return loop(pub, sub, mix, n);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t ticks = 100'000;
  std::string stamp = "on";
  std::string stats = "on";
  std::string state = "off";
  std::uint32_t mix_instruments = 0;
  CLI::App app{"publishes and polls ticks in one thread, for callgrind's instruction counts"};
  app.add_option("--ticks", ticks, "ticks through the loop")->check(CLI::Range(1ULL, 100'000'000ULL));
  app.add_option("--stamp", stamp, "stamp send times: on or off")->check(CLI::IsMember({"on", "off"}));
  app.add_option("--stats", stats, "live counters: on or off")->check(CLI::IsMember({"on", "off"}));
  app.add_option("--mix", mix_instruments, "publish tickrail-bench's table mix over N instruments")
      ->check(CLI::Range(1U, 65536U));
  app.add_option("--state", state, "the last-value table (capacity: --mix, else 1): on or off")
      ->check(CLI::IsMember({"on", "off"}));
  app.set_version_flag("--version", "ipt_loop (tickrail)");
  CLI11_PARSE(app, argc, argv);
  try {
    PublisherConfig pc;
    pc.channel = "ipt-" + std::to_string(::getpid());
    pc.max_subscribers = 1;
    pc.ring_capacity = 4096;
    pc.stamp_send_time = stamp == "on";
    pc.stats = stats == "on";
    pc.state.enabled = state == "on";
    pc.state.capacity = std::max<std::uint32_t>(mix_instruments, 1);
    Publisher pub(pc);
    std::optional<bench::TickMix> mix;
    if (mix_instruments != 0) mix.emplace(mix_instruments);
    bench::TickMix* const m = mix ? &*mix : nullptr;
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
    (void)ipt_warm_up(pub, sub, m, 1000);
    const std::uint64_t got = ipt_measured_loop(pub, sub, m, ticks);
    std::printf("ipt_loop: %llu ticks published and polled (stamp %s, stats %s, mix %u, table %s)\n",
                static_cast<unsigned long long>(got), stamp.c_str(), stats.c_str(), mix_instruments,
                state.c_str());
    return got >= ticks ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "ipt_loop: %s\n", e.what());
    return 1;
  }
}
