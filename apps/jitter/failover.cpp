// tickrail-jitter over two lines (--line-b): one stream read through a FailoverSubscriber, each
// delivered tick measured as on one line, and for the ticks both lines brought, which line
// brought its copy first and by how long.
#include <cinttypes>
#include <optional>

#include "cli.hpp"
#include "jitter.hpp"
#include "text.hpp"

namespace tickrail::jitter {

namespace {

using cli::fmt;

std::string describe_line(const SubscriberConfig& c) {
  std::string s = std::string(to_string(c.transport)) + " '" + c.channel + "'";
  if (c.transport != TransportKind::shm && !c.rdma.address.empty()) {
    s += " at " + c.rdma.address + ":" + std::to_string(c.rdma.port);
  }
  if (c.transport == TransportKind::ud && !c.rdma.groups.empty()) s += " group " + c.rdma.groups.front();
  if (c.transport != TransportKind::shm && !c.rdma.device.empty()) s += " on " + c.rdma.device;
  return s;
}

}  // namespace

FailoverConfig failover_config(const Options& o, const SubscriberConfig& sc) {
  FailoverConfig fc = o.failover;
  fc.line[0] = sc;
  fc.line[1] = o.line_b.apply(sc);
  return fc;
}

void measure_failover(const SubscriberConfig& sc, const Options& o, Recorder& rec, RunInfo& info) {
  const Clock& clock = Clock::instance();
  FailoverConfig fc = failover_config(o, sc);
  fc.measure_lead = true;
  for (int i = 0; i < 2; ++i) info.line_name[i] = describe_line(fc.line[i]);
  FailoverSubscriber sub(fc, cli::interrupt_hook(cli::stop_flag()));  // waits up to attach_timeout for either line
  info.failover = true;
  info.window = fc.window;
  note("subscribed to line A, " + info.line_name[0] + ", and line B, " + info.line_name[1] +
       " (policy " + to_string(sc.policy) + "); measuring one-way latency of the first copies");

  const std::uint64_t start = Clock::now();
  const std::uint64_t end = o.duration.count() > 0
                                ? start + clock.ns_to_cycles(static_cast<double>(o.duration.count()) * 1e6)
                                : ~std::uint64_t{0};
  LiveWindows windows(start, clock.ns_to_cycles(1e9));
  const std::uint64_t limit = o.count == 0 ? ~std::uint64_t{0} : o.count;
  std::optional<MarketView> view;
  if (!o.state_out.empty()) view.emplace(o.state_capacity);
  // A poll may bring more than asked (a tick that fills a hole releases those behind it): what
  // is beyond --count is not recorded.
  auto handler = [&rec, &view, limit](const Tick& t) {
    if (rec.received() >= limit) return;
    rec.on_tick(t, Clock::now());
    if (view) view->apply(t);
  };
  auto lead = [&rec, &info](int line, std::uint64_t cycles) { info.lead[line & 1].record(rec.to_ns(cycles)); };
  auto lost = [&sub] {
    const FailoverCounters c = sub.counters();
    return c.gaps + c.skipped;
  };

  for (;;) {
    const std::uint64_t now = Clock::now();
    rec.on_poll(now);
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(o.batch, limit - rec.received()));
    const std::size_t n = sub.poll(handler, lead, want);
    if (rec.received() >= limit) {
      info.ended = "count";
      break;
    }
    // Both lines down (their publishers closed or silent), and nothing more to drain.
    if (n == 0 && !sub.line_up(0) && !sub.line_up(1) && sub.poll(handler, lead, want) == 0) {
      info.ended = "publisher_gone";
      info.reason = "both lines are down";
      break;
    }
    if (cli::stop_requested()) [[unlikely]] {
      info.ended = "interrupted";
      break;
    }
    if (now >= end) {
      info.ended = "duration";
      break;
    }
    if (windows.due(now)) windows.close(now, rec, lost(), o.live);
  }
  info.elapsed_s = clock.to_ns(Clock::now() - start) * 1e-9;
  info.lines = sub.counters();
  info.counters.lost = info.lines.gaps + info.lines.skipped;
  info.position = sub.next_sequence();
  if (view) write_state(*view, info, o.state_out);
}

std::string format_lines(const RunInfo& info) {
  const FailoverCounters& c = info.lines;
  std::string t = fmt("  failover: %" PRIu64 " lost on both lines, %" PRIu64 " given up waiting for a line\n",
                      c.gaps, c.skipped);
  for (int i = 0; i < 2; ++i) {
    const FailoverLineCounters& l = c.line[i];
    t += fmt("  line %c %s: first %" PRIu64 " (%.1f %%), duplicates %" PRIu64 ", down %" PRIu64
             " times (%.3f s), %s at the end",
             i == 0 ? 'A' : 'B', info.line_name[i].c_str(), l.first,
             c.delivered != 0 ? 100.0 * static_cast<double>(l.first) / static_cast<double>(c.delivered) : 0.0,
             l.duplicates, l.downs, static_cast<double>(l.down_ns) * 1e-9, l.up ? "up" : "down");
    if (l.recovered != 0) t += fmt(", %" PRIu64 " read back", l.recovered);
    // A sequence number far ahead of its own line's that the line's next tick did not follow.
    if (l.refuted != 0) t += fmt(", %" PRIu64 " leaps refuted", l.refuted);
    t += "\n";
  }
  const TableRow rows[] = {{"A led by", summarize(info.lead[0])}, {"B led by", summarize(info.lead[1])}};
  t += format_table(rows);
  const std::uint64_t copies = c.line[0].duplicates + c.line[1].duplicates;
  const std::uint64_t timed = info.lead[0].count() + info.lead[1].count();
  t += "  led by: for each tick both lines brought, how long before the other line's copy the first\n"
       "  arrived, as this thread's polls saw them (line A is polled first in each turn)";
  if (copies > timed) {
    t += fmt(";\n  %" PRIu64 " of the %" PRIu64 " copies discarded are not timed: they came %u or more ticks after\n"
             "  the first (the window), were of ticks given up, or were resent by a line that came back",
             copies - timed, copies, info.window);
  }
  t += ".\n";
  return t;
}

nlohmann::json lines_json(const RunInfo& info) {
  const FailoverCounters& c = info.lines;
  nlohmann::json lines = nlohmann::json::array();
  for (int i = 0; i < 2; ++i) {
    const FailoverLineCounters& l = c.line[i];
    lines.push_back({{"line", i == 0 ? "A" : "B"},
                     {"source", info.line_name[i]},
                     {"first", l.first},
                     {"duplicates", l.duplicates},
                     {"refuted", l.refuted},
                     {"downs", l.downs},
                     {"down_ns", l.down_ns},
                     {"up", l.up},
                     {"recovered", l.recovered},
                     {"lead_ns", to_json(summarize(info.lead[i]))}});
  }
  return {{"window", info.window},{"delivered", c.delivered}, {"gaps", c.gaps}, {"skipped", c.skipped}, {"lines", std::move(lines)}};
}

}  // namespace tickrail::jitter
