#include "failover_bench.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <unistd.h>

#include "rounds.hpp"
#include "state_bench.hpp"
#include "text.hpp"
#include "tickrail/tools/report.hpp"
#include "tickrail/error.hpp"
#include "tickrail/failover.hpp"
#include "tickrail/publisher.hpp"

namespace tickrail::bench {

namespace {

using cli::fmt;

PublisherConfig line_publisher(const FailoverBenchOptions& o, const std::string& channel) {
  PublisherConfig c;
  c.channel = channel;
  c.max_subscribers = 1;
  c.ring_capacity = kRing;  // as tickrail-bench's latency channels
  c.housekeeping_cpus = o.housekeeping_cpus;
  c.stamp_send_time = false;  // the sender stamps each tick once, before its first copy goes out
  return c;
}

SubscriberConfig line_subscriber(const FailoverBenchOptions& o, const std::string& channel) {
  SubscriberConfig c;
  c.channel = channel;
  c.attach_timeout = std::chrono::seconds(5);
  c.housekeeping_cpus = o.housekeeping_cpus;
  return c;
}

// One run of one contender in `layout`: `o.samples` ticks `gap_ns` apart, sent by `send(i)`,
// received by `poll(record)`; the median one-way latency, ns.
template <class Send, class Poll>
double latency_run(const FailoverBenchOptions& o, Layout layout, Histogram& h, Send& send, Poll& poll) {
  std::vector<std::uint64_t> lat =
      one_way(o.receiver_cpu, layout, o.samples, static_cast<double>(o.gap_ns), send, poll);
  for (const std::uint64_t ns : lat) h.record(ns);
  return median_of(lat);
}

}  // namespace

FailoverRun measure_failover(const FailoverBenchOptions& o) {
  const std::string base = "bench-fo-" + std::to_string(::getpid());
  Publisher one(line_publisher(o, base + "-one"));
  Subscriber one_sub(line_subscriber(o, base + "-one"));
  // The one-line sender publishes each tick twice too, its second copy to a channel nobody
  // reads (a `drop` subscriber that never polls), so both contenders' senders do the same work
  // and the ratio is the receiver's: a second ring polled and the arbiter.
  Publisher one_unread(line_publisher(o, base + "-one-unread"));
  SubscriberConfig unread_cfg = line_subscriber(o, base + "-one-unread");
  unread_cfg.policy = SlowConsumerPolicy::drop;
  Subscriber unread(unread_cfg);
  Publisher a(line_publisher(o, base + "-a"));
  Publisher b(line_publisher(o, base + "-b"));
  FailoverConfig fc;
  fc.line[0] = line_subscriber(o, base + "-a");
  fc.line[1] = line_subscriber(o, base + "-b");
  FailoverSubscriber two(fc);
  for (Publisher* p : {&one, &one_unread, &a, &b}) {
    if (p->wait_subscribers(1, std::chrono::seconds(5)) != 1) {
      throw Error(Errc::timed_out, "a benchmark subscriber never attached");
    }
  }
  if (!one_sub.wait_active(std::chrono::seconds(5))) throw Error(Errc::timed_out, "the one-line subscriber never became active");

  FailoverRun run;
  Tick tick{};
  // Each tick carries one stamp, taken before its first copy goes out. The line read goes first:
  // one line's best case, so that the ratio does not flatter two lines (whose first copy out,
  // on line A or B by turns, is the one likelier to be delivered).
  auto send_one = [&](std::uint64_t) {
    tick.send_ts = Clock::now();
    publish_spinning(one, tick);
    publish_spinning(one_unread, tick);
  };
  auto poll_one = [&](auto& record) { return one_sub.poll(record); };
  auto send_two = [&](std::uint64_t i) {
    Publisher& first = (i & 1) == 0 ? a : b;
    Publisher& second = (i & 1) == 0 ? b : a;
    tick.send_ts = Clock::now();
    publish_spinning(first, tick);
    publish_spinning(second, tick);
  };
  auto poll_two = [&](auto& record) { return two.poll(record); };
  const int layouts = std::max(1, o.layouts);
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<double> one_runs;
    std::vector<double> two_runs;
    for (int k = 0; k < layouts; ++k) {
      const Layout layout = Layout::nth(k, r);
      const auto one_run = [&] { one_runs.push_back(latency_run(o, layout, run.one, send_one, poll_one)); };
      const auto two_run = [&] { two_runs.push_back(latency_run(o, layout, run.two, send_two, poll_two)); };
      if (((r + k) & 1) == 0) {
        one_run();
        two_run();
      } else {
        two_run();
        one_run();
      }
    }
    FailoverRound round;
    round.one_p50 = median(one_runs);
    round.two_p50 = median(two_runs);
    run.rounds.push_back(round);
    std::printf("  round %2d: one line p50 %7.1f ns, two lines %7.1f ns, ratio %.3f\n", r + 1, round.one_p50,
                round.two_p50, round.two_p50 / round.one_p50);
  }
  // The last copies of the last round's ticks are discarded once they arrive.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < deadline &&
         two.counters().line[0].duplicates + two.counters().line[1].duplicates < two.counters().delivered) {
    (void)two.poll([](const Tick&) {});
  }
  const FailoverCounters c = two.counters();
  for (int i = 0; i < 2; ++i) {
    run.first[i] = c.line[i].first;
    run.duplicates[i] = c.line[i].duplicates;
  }
  run.gaps = c.gaps;
  run.skipped = c.skipped;
  return run;
}

std::string failover_text(const FailoverRun& run) {
  std::vector<double> ratio;
  for (const FailoverRound& r : run.rounds) ratio.push_back(r.two_p50 / r.one_p50);
  const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
  const std::uint64_t delivered = run.first[0] + run.first[1];
  std::string t = fmt("  two lines / one line, p50: median of per-round ratios %.3f (%.3f..%.3f)\n", median(ratio),
                      ratio.empty() ? 0.0 : *lo, ratio.empty() ? 0.0 : *hi);
  for (int i = 0; i < 2; ++i) {
    t += fmt("  line %c first: %" PRIu64 " (%.1f %%), duplicates %" PRIu64 "\n", i == 0 ? 'A' : 'B', run.first[i],
             delivered != 0 ? 100.0 * static_cast<double>(run.first[i]) / static_cast<double>(delivered) : 0.0,
             run.duplicates[i]);
  }
  t += fmt("  lost on both lines %" PRIu64 ", given up %" PRIu64 "\n", run.gaps, run.skipped);
  const TableRow rows[] = {{"one line", summarize(run.one)}, {"two lines", summarize(run.two)}};
  return t + format_table(rows);
}

nlohmann::json failover_json(const FailoverRun& run) {
  nlohmann::json rounds = nlohmann::json::array();
  for (const FailoverRound& r : run.rounds) rounds.push_back({{"one_p50_ns", r.one_p50}, {"two_p50_ns", r.two_p50}});
  return {{"rounds", std::move(rounds)},
          {"one_line", to_json(summarize(run.one))},
          {"two_lines", to_json(summarize(run.two))},
          {"first", {run.first[0], run.first[1]}},
          {"duplicates", {run.duplicates[0], run.duplicates[1]}},
          {"gaps", run.gaps},
          {"skipped", run.skipped}};
}

}  // namespace tickrail::bench
