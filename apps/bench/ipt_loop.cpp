// One thread publishes a tick and polls it back, N times, over a shared-memory channel: the
// publish-to-handler path without a second core, so that `valgrind --tool=callgrind` counts its
// instructions exactly and the count can be compared from commit to commit (instructions.sh).
// Not a latency figure: nothing crosses cores here.
//
//   ipt_loop [--ticks N] [--stamp on|off] [--stats on|off] [--mix N] [--state on|off] [--lines 1|2]
//
// --mix N publishes tickrail-bench's table mix over N instruments (state_bench.hpp) instead of
// one blank tick; --state on keeps the last-value table of every class with a capacity of N (1
// without --mix): the same ticks with the table on and off count what the table adds. --lines 2
// publishes each tick on two channels and reads them back through a FailoverSubscriber (hot
// failover): against --lines 1, what a second line and its arbitration add, a publish included.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "tickrail/error.hpp"
#include "tickrail/failover.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "state_bench.hpp"

using namespace tickrail;

namespace {

// The tick goes out on `pub` (and on `second`, when there is one) and comes back through `sub`, a
// Subscriber or a FailoverSubscriber.
template <class Sub>
std::uint64_t loop(Publisher& pub, Publisher* second, Sub& sub, bench::TickMix* mix, std::uint64_t n) {
  Tick blank{};
  std::uint64_t got = 0;
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    blank.order_ref = i;
    const Tick& t = mix != nullptr ? mix->next() : blank;
    (void)pub.publish(t);
    if (second != nullptr) (void)second->publish(t);
    got += sub.poll([&](const Tick& r) { sum += r.order_ref; }, 16);
  }
  return got + (sum & 1);  // the handler's work is not optimised away
}

// Out of line and named apart: callgrind collects inside ipt_measured_loop only
// (--toggle-collect), on this thread only, and not during the warm-up. noipa: identical
// functions would otherwise be folded into one address, which callgrind names after the first.
template <class Sub>
[[gnu::noipa]] std::uint64_t ipt_warm_up(Publisher& pub, Publisher* second, Sub& sub, bench::TickMix* mix,
                                         std::uint64_t n) {
  return loop(pub, second, sub, mix, n);
}
template <class Sub>
[[gnu::noipa]] std::uint64_t ipt_measured_loop(Publisher& pub, Publisher* second, Sub& sub, bench::TickMix* mix,
                                               std::uint64_t n) {
  return loop(pub, second, sub, mix, n);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t ticks = 100'000;
  std::string stamp = "on";
  std::string stats = "on";
  std::string state = "off";
  std::uint32_t mix_instruments = 0;
  int lines = 1;
  CLI::App app{"publishes and polls ticks in one thread, for callgrind's instruction counts"};
  app.add_option("--ticks", ticks, "ticks through the loop")->check(CLI::Range(1ULL, 100'000'000ULL));
  app.add_option("--stamp", stamp, "stamp send times: on or off")->check(CLI::IsMember({"on", "off"}));
  app.add_option("--stats", stats, "live counters: on or off")->check(CLI::IsMember({"on", "off"}));
  app.add_option("--mix", mix_instruments, "publish tickrail-bench's table mix over N instruments")
      ->check(CLI::Range(1U, 65536U));
  app.add_option("--state", state, "the last-value table (capacity: --mix, else 1): on or off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--lines", lines, "1, or 2: each tick on two channels, read by a FailoverSubscriber")
      ->check(CLI::Range(1, 2));
  app.set_version_flag("--version", "ipt_loop (tickrail)");
  app.footer("Exit status: 0 ok; 1 the run failed (shared memory, a subscriber never attached); 2 bad command line.");
  if (const auto status = cli::parse_app(app, "ipt_loop", argc, argv)) return *status;
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
    std::uint64_t got = 0;
    if (lines == 1) {
      Subscriber sub(sc);
      (void)pub.wait_subscribers(1, std::chrono::seconds(10));
      if (!sub.wait_active(std::chrono::seconds(10))) {
        std::fprintf(stderr, "ipt_loop: the subscriber never became active\n");
        return 1;
      }
      // Warm the path (first-touch faults, branch history) outside the measured call.
      (void)ipt_warm_up(pub, nullptr, sub, m, 1000);
      got = ipt_measured_loop(pub, nullptr, sub, m, ticks);
    } else {
      PublisherConfig pc_b = pc;
      pc_b.channel = pc.channel + "-b";
      Publisher pub_b(pc_b);
      FailoverConfig fc;
      fc.line[0] = sc;
      fc.line[1] = sc;
      fc.line[1].channel = pc_b.channel;
      FailoverSubscriber two(fc);
      if (pub.wait_subscribers(1, std::chrono::seconds(10)) != 1 ||
          pub_b.wait_subscribers(1, std::chrono::seconds(10)) != 1) {
        std::fprintf(stderr, "ipt_loop: a line never attached\n");
        return 1;
      }
      (void)ipt_warm_up(pub, &pub_b, two, m, 1000);
      got = ipt_measured_loop(pub, &pub_b, two, m, ticks);
    }
    std::printf("ipt_loop: %llu ticks published and polled (stamp %s, stats %s, mix %u, table %s, lines %d)\n",
                static_cast<unsigned long long>(got), stamp.c_str(), stats.c_str(), mix_instruments,
                state.c_str(), lines);
    return got >= ticks ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "ipt_loop: %s\n", e.what());
    return 1;
  }
}
