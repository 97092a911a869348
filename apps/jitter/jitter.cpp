#include "jitter.hpp"

#include <optional>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <unistd.h>

#include "cli.hpp"
#include "pingpong.hpp"
#include "text.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/memory.hpp"

namespace tickrail::jitter {

namespace {
using cli::fmt;
}  // namespace

const char* to_string(Mode m) noexcept {
  switch (m) {
    case Mode::one_way: return "one-way";
    case Mode::pingpong: return "pingpong";
    case Mode::echo: return "echo";
  }
  return "unknown";
}

Mode parse_mode(std::string_view s, std::string_view key) {
  if (s == "one-way" || s == "one_way" || s == "oneway") return Mode::one_way;
  if (s == "pingpong" || s == "ping-pong") return Mode::pingpong;
  if (s == "echo") return Mode::echo;
  cli::bad_value(key, "unknown mode '" + std::string(s) + "' (expected one-way, pingpong or echo)");
}

void read_options(ConfigFile::Section s, Options& o) {
  s.get_enum("mode", o.mode, parse_mode);
  s.get("cpu", o.cpu);
  s.get("duration_ms", o.duration);
  s.get("count", o.count);
  s.get("batch", o.batch);
  s.get("live", o.live);
  s.get("lock_memory", o.lock_memory);
  s.get("json", o.json);
  s.get("hgrm", o.hgrm);
  s.get("svg", o.svg);
  s.get("echo_address", o.echo_address);
  s.get("echo_group", o.echo_group);
  s.get("warmup", o.warmup);
  s.get("ping_timeout_ms", o.ping_timeout);
  s.get("state_out", o.state_out);
  s.get("state_capacity", o.state_capacity);
  s.validated([&] { validate(o); });
}

void read_file(ConfigFile& f, SubscriberConfig& sc, Options& o) {
  read_subscriber_config(f, sc);
  read_options(f.section("jitter"), o);
  read_failover_config(f, o.line_b, o.failover);
  f.check_all_read({"publisher", "replay", "record"});
}

void validate(const Options& o) {
  if (o.cpu < -1) cli::bad_value("cpu", "must be a cpu number, or -1 for none");
  if (o.batch == 0 || o.batch > 65536) cli::bad_value("batch", std::to_string(o.batch) + " is outside 1..65536");
  if (o.ping_timeout.count() <= 0) cli::bad_value("ping_timeout_ms", "must be positive");
  validate_duration("ping_timeout_ms", o.ping_timeout);
  validate_duration("duration_ms", o.duration);
  if (o.state_capacity == 0 || o.state_capacity > kMaxStateCapacity) {
    cli::bad_value("state_capacity", std::to_string(o.state_capacity) + " is outside 1.." +
                                         std::to_string(kMaxStateCapacity));
  }
}

Recorder::Recorder(double ns_per_cycle) : ns_per_cycle_(ns_per_cycle) {}

Window Recorder::take_window(double seconds) noexcept {
  Window w;
  w.seconds = seconds;
  w.count = window_.count();
  w.p50_ns = window_.value_at_percentile(50.0);
  w.p99_ns = window_.value_at_percentile(99.0);
  w.max_ns = window_.max();
  w.lost = window_lost_;
  window_.reset();
  window_lost_ = 0;
  return w;
}

namespace {

std::string describe_end(const RunInfo& info) {
  std::string s = info.ended;
  if (info.ended == "publisher_gone") s = "publisher gone, channel drained";
  if (info.ended == "duration") s = "--duration reached";
  if (info.ended == "count") s = "--count ticks received";
  if (info.ended == "interrupted") s = "interrupted";
  if (info.ended == "evicted") s = "evicted by the publisher";
  if (!info.reason.empty()) s += " (" + info.reason + ")";
  return s;
}

// Why a snapshot that was asked for is not complete, in words.
std::string snapshot_failure(const RunInfo& info) {
  if (info.snapshot_given_up) {
    return "given up after publisher_timeout without progress (its publisher stalled, died or wrote an entry "
           "it never finished)";
  }
  return "the run ended (" + describe_end(info) + ") before it was delivered";
}

}  // namespace

Loss loss(const Recorder& r, const RunInfo& info) noexcept {
  Loss l;
  l.between = r.lost();
  l.start_seq = r.first_seq();
  if (info.mode == Mode::pingpong) {
    l.total = l.between;
    return l;
  }
  // Every gap seen between receipts is a loss the Subscriber counted too.
  l.total = std::max(info.counters.lost, l.between);
  std::uint64_t rest = l.total - l.between;
  if (r.received() != 0 && info.position > r.last_seq() + 1) {
    l.after_last = std::min(rest, info.position - 1 - r.last_seq());
    rest -= l.after_last;
  }
  l.before_first = rest;
  if (r.received() != 0) l.start_seq = r.first_seq() > rest ? r.first_seq() - rest : 1;
  return l;
}

std::string format_report(const Recorder& r, const RunInfo& info) {
  const bool rtt = info.mode == Mode::pingpong;
  std::string t;
  if (rtt) {
    t += "tickrail-jitter: RTT/2 (ping-pong): half the time from publishing a ping to receiving "
         "its echo\n  from tickrail-jitter --mode echo, on this host's clock alone (" + info.clock +
         "); values in ns.\n";
  } else {
    t += "tickrail-jitter: ONE-WAY latency, publisher send stamp (Tick::send_ts) to receipt by "
         "this subscriber,\n  one clock on one host (" + info.clock + "); values in ns.\n";
  }
  t += fmt("  %s channel '%s', %" PRIu64 " ticks in %.3f s (%.0f ticks/s); ended: ",
           info.transport.c_str(), info.channel.c_str(), r.received(), info.elapsed_s,
           info.elapsed_s > 0 ? static_cast<double>(r.received()) / info.elapsed_s : 0.0) +
       describe_end(info) + "\n";
  const Loss lost = loss(r, info);
  if (r.received() != 0) {
    const SubscriberCounters& c = info.counters;
    t += fmt("  sequence %" PRIu64 "..%" PRIu64 ": %" PRIu64 " ticks lost (%" PRIu64
             " in %" PRIu64 " gaps between receipts",
             r.first_seq(), r.last_seq(), lost.total, lost.between, r.gaps());
    if (lost.before_first != 0) t += fmt(", %" PRIu64 " before the first", lost.before_first);
    if (lost.after_last != 0) t += fmt(", %" PRIu64 " after the last", lost.after_last);
    t += ")";
    if (!rtt && !info.failover) t += fmt("; ring laps %" PRIu64 " (%" PRIu64 " skips)", c.laps, c.skips);
    if (c.gaps + c.recovered + c.foreign + c.malformed + c.completion_errors != 0) {
      t += fmt("; transport: %" PRIu64 " gaps, %" PRIu64 " recovered, %" PRIu64 " foreign, %" PRIu64
               " malformed, %" PRIu64 " completion errors",
               c.gaps, c.recovered, c.foreign, c.malformed, c.completion_errors);
    }
    if (lost.start_seq > 1 && !rtt) t += fmt("; joined after %" PRIu64 " ticks", lost.start_seq - 1);
    if (c.conflations != 0) {
      t += fmt("; %" PRIu64 " conflations (%" PRIu64 " entries from the table)", c.conflations,
               r.conflated_ticks());
    }
    if (rtt) t += fmt("; %" PRIu64 " pings unanswered", info.timeouts);
    t += "\n";
  }
  if (info.snapshot_complete) {
    t += fmt("  snapshot: %" PRIu64 " entries of the publisher's last-value table, delivered in %.1f us; "
             "live from sequence %" PRIu64 "\n",
             r.snapshot_ticks(), info.snapshot_us, r.first_seq());
  } else if (info.snapshot) {
    t += fmt("  snapshot: NOT complete (%" PRIu64 " entries delivered): %s; the view is not the publisher's\n",
             r.snapshot_ticks(), snapshot_failure(info).c_str());
  }
  if (info.failover) t += format_lines(info);
  if (r.negative() != 0) {
    t += fmt("  warning: %" PRIu64 " ticks stamped later than received (clocks differ: the "
             "publisher and this process must share one TSC)\n", r.negative());
  }
  const TableRow rows[] = {
      {rtt ? "RTT/2" : "latency", summarize(r.latency(), lost.total)},
      {"inter-arrival", summarize(r.interarrival())},
      {"poll gap", summarize(r.poll_gap())},
  };
  t += format_table(rows);
  t += std::string(rtt ? "  RTT/2: half a round trip; inter-arrival: between two echoes"
                       : "  latency: one-way; inter-arrival: between two received ticks") +
       "; poll gap: between two turns of this\n  subscriber's polling loop (its longest is the OS jitter on cpu " +
       (info.cpu >= 0 ? std::to_string(info.cpu) : std::string("(not pinned)")) + ").\n";
  return t;
}

nlohmann::json report_json(const Recorder& r, const RunInfo& info) {
  const Loss lost = loss(r, info);
  nlohmann::json j = to_json(summarize(r.latency(), lost.total));
  j["figure"] = info.mode == Mode::pingpong ? "rtt/2" : "one-way";
  j["mode"] = to_string(info.mode);
  j["timeouts"] = info.timeouts;
  j["unit"] = "ns";
  j["received"] = r.received();
  j["first_seq"] = r.first_seq();
  j["last_seq"] = r.last_seq();
  j["gaps"] = r.gaps();
  j["gap_ticks"] = lost.between;
  j["lost_before_first"] = lost.before_first;
  j["lost_after_last"] = lost.after_last;
  j["start_seq"] = lost.start_seq;
  j["position"] = info.position;
  if (info.failover) j["failover"] = lines_json(info);
  j["out_of_order"] = r.out_of_order();
  j["negative"] = r.negative();
  const SubscriberCounters& c = info.counters;
  j["ring_lost"] = c.lost;
  j["laps"] = c.laps;
  j["skips"] = c.skips;
  j["table"] = {{"snapshot", info.snapshot}, {"snapshot_complete", info.snapshot_complete},
                {"snapshot_entries", r.snapshot_ticks()},
                {"snapshot_us", info.snapshot_us}, {"conflations", c.conflations},
                {"conflated_entries", r.conflated_ticks()}};
  j["transport_counters"] = {{"received", c.received}, {"gaps", c.gaps}, {"recovered", c.recovered},
                             {"foreign", c.foreign}, {"malformed", c.malformed},
                             {"completion_errors", c.completion_errors}};
  j["interarrival"] = to_json(summarize(r.interarrival()));
  j["poll_gap"] = to_json(summarize(r.poll_gap()));
  j["ended"] = info.ended;
  j["reason"] = info.reason;
  j["transport"] = info.transport;
  j["channel"] = info.channel;
  j["clock"] = info.clock;
  j["elapsed_s"] = info.elapsed_s;
  j["cpu"] = info.cpu;
  j["warnings"] = info.warnings;
  return j;
}

// ---------------------------------------------------------------------------------------------
// Running it.

void note(const std::string& s) { std::fprintf(stderr, "tickrail-jitter: %s\n", s.c_str()); }

// The live line, formatted into a stack buffer and written with one system call.
void live_line(const Window& w, std::uint64_t total) {
  char buf[192];
  const int n = std::snprintf(
      buf, sizeof buf,
      "  %10.0f ticks/s  p50 %9.1f ns  p99 %9.1f ns  max %11.1f ns  lost %llu  total %llu\n",
      w.seconds > 0 ? static_cast<double>(w.count) / w.seconds : 0.0, static_cast<double>(w.p50_ns),
      static_cast<double>(w.p99_ns), static_cast<double>(w.max_ns),
      static_cast<unsigned long long>(w.lost), static_cast<unsigned long long>(total));
  if (n > 0) (void)!write(STDERR_FILENO, buf, static_cast<std::size_t>(std::min(n, static_cast<int>(sizeof buf) - 1)));
}

namespace {

// After an empty poll: why the stream ended, or nullptr while it goes on. Gone with nothing left
// to drain: one more empty poll settles a race with the last ticks, since the state is read
// after the poll.
template <class Handler>
const char* stream_end(Subscriber& sub, Handler& handler, std::size_t want) {
  const SubscriberState st = sub.state();
  if (st != SubscriberState::publisher_gone && st != SubscriberState::evicted &&
      st != SubscriberState::closed) {
    return nullptr;
  }
  if (sub.poll(handler, want) != 0) return nullptr;
  return st == SubscriberState::evicted ? "evicted" : "publisher_gone";
}

}  // namespace

void measure_one_way(const SubscriberConfig& sc, const Options& o, Recorder& rec, RunInfo& info) {
  const Clock& clock = Clock::instance();
  // Waits up to attach_timeout for a live publisher, or until interrupted.
  Subscriber sub = cli::attach_subscriber(sc, cli::stop_flag());
  note("subscribed to " + info.transport + " channel '" + sc.channel + "' (policy " +
       to_string(sc.policy) + "); measuring one-way latency");

  const std::uint64_t start = Clock::now();
  const std::uint64_t end = o.duration.count() > 0
                                ? start + clock.ns_to_cycles(static_cast<double>(o.duration.count()) * 1e6)
                                : ~std::uint64_t{0};
  LiveWindows windows(start, clock.ns_to_cycles(1e9));
  const std::uint64_t limit = o.count == 0 ? ~std::uint64_t{0} : o.count;
  std::optional<MarketView> view;
  if (!o.state_out.empty()) view.emplace(o.state_capacity);
  auto handler = [&rec, &view, &sub](const Tick& t) {
    if ((t.flags & kTickFromTable) != 0) [[unlikely]] {
      rec.on_table_tick(!sub.in_snapshot());
    } else {
      rec.on_tick(t, Clock::now());
    }
    if (view) view->apply(t);
  };
  info.snapshot = sc.start == StartMode::snapshot;
  bool in_snapshot = info.snapshot;
  std::uint64_t abandoned_before = 0;  // table deliveries given up before the snapshot's end
  // The poll that ends a snapshot may deliver nothing (an empty table, a delivery given up).
  auto snapshot_ended = [&] {
    if (!in_snapshot || sub.in_snapshot()) [[likely]] return;
    in_snapshot = false;
    rec.on_snapshot_end(Clock::now());
    abandoned_before = sub.counters().table_abandoned;  // once: the snapshot given up, not delivered
  };

  // The state reads the clock (a heartbeat's age): read on every empty poll it doubled the
  // loop's period and delayed each tick's sighting by up to as much (BENCHMARKS.md, issue 17).
  // Every 64th is soon enough.
  std::uint32_t idle = 0;
  for (;;) {
    const std::uint64_t now = Clock::now();
    rec.on_poll(now);
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(o.batch, limit - rec.received()));
    const std::size_t n = sub.poll(handler, want);
    snapshot_ended();
    if (rec.received() >= limit) {
      info.ended = "count";
      break;
    }
    if (n == 0 && (++idle & 63u) == 0) {
      if (const char* why = stream_end(sub, handler, want)) {
        info.ended = why;
        info.reason = sub.reason();
        break;
      }
    }
    if (cli::stop_requested()) [[unlikely]] {
      info.ended = "interrupted";
      break;
    }
    if (now >= end) {
      info.ended = "duration";
      break;
    }
    if (windows.due(now)) windows.close(now, rec, sub.counters().lost, o.live);
  }
  snapshot_ended();  // in the stream's last polls (stream_end)
  info.elapsed_s = clock.to_ns(Clock::now() - start) * 1e-9;
  info.counters = sub.counters();
  info.position = sub.next_sequence();
  info.snapshot_given_up = info.snapshot && !in_snapshot && abandoned_before != 0;
  info.snapshot_complete = info.snapshot && !in_snapshot && abandoned_before == 0;
  if (info.snapshot_complete && rec.snapshot_end() > start) {
    info.snapshot_us = clock.to_ns(rec.snapshot_end() - start) * 1e-3;
  }
  sub.close();
  if (view) write_state(*view, info, o.state_out);
}

void write_state(const MarketView& view, RunInfo& info, const std::string& path) {
  if (view.beyond() != 0) {
    info.warnings.push_back(std::to_string(view.beyond()) + " ticks of instruments beyond --state-capacity " +
                            std::to_string(view.capacity()) + " are not in the view");
  }
  write_text_file(path, state_json(view, info.position).dump(1) + "\n");
}

nlohmann::json state_json(const MarketView& v, std::uint64_t position) {
  nlohmann::json instruments = nlohmann::json::array();
  for (std::uint32_t i = 0; i < v.capacity(); ++i) {
    nlohmann::json row;
    for (const StateClass c : {StateClass::quote, StateClass::trade, StateClass::status}) {
      const Tick* t = v.get(i, c);
      if (t == nullptr) continue;
      row[to_string(c)] = {{"seq", t->seq},           {"kind", to_string(t->kind)},
                           {"price", t->price},       {"qty", t->qty},
                           {"aux", t->aux},           {"aux_qty", t->aux_qty},
                           {"side", to_string(t->side)}, {"exch_ts", t->exch_ts},
                           {"order_ref", t->order_ref},
                           {"flags", t->flags & ~kTickFromTable}};
    }
    if (row.is_null()) continue;
    row["instrument"] = i;
    instruments.push_back(std::move(row));
  }
  return {{"position", position}, {"instruments", std::move(instruments)}};
}

namespace {

// --json, --hgrm and --svg, as asked.
void write_report_files(const Options& o, const Recorder& rec, const RunInfo& info) {
  if (!o.json.empty()) write_text_file(o.json, report_json(rec, info).dump(2) + "\n");
  if (!o.hgrm.empty()) write_text_file(o.hgrm, format_hgrm(rec.latency()));
  if (!o.svg.empty()) {
    const bool rtt = o.mode == Mode::pingpong;
    SvgOptions so;
    so.title = std::string("tickrail-jitter: ") + (rtt ? "RTT/2 (half a round trip)" : "ONE-WAY latency") +
               " by percentile, " + info.transport + " '" + info.channel + "'";
    so.y_label = rtt ? "RTT/2" : "one-way latency";
    so.clock = info.clock;
    const SvgSeries series[] = {{so.y_label, &rec.latency()},
                                {rtt ? "inter-arrival (between echoes)" : "inter-arrival", &rec.interarrival()},
                                {"poll gap", &rec.poll_gap()}};
    write_text_file(o.svg, format_svg(series, so));
  }
}

void measure(const Options& o, const SubscriberConfig& sc, Recorder& rec, RunInfo& info) {
  if (o.mode == Mode::pingpong) {
    measure_pingpong(sc, o, rec, info);
  } else if (o.line_b.given()) {
    measure_failover(sc, o, rec, info);
  } else {
    measure_one_way(sc, o, rec, info);
  }
}

}  // namespace

int run(const Options& o, const SubscriberConfig& sc) {
  const Clock& clock = Clock::instance();
  RunInfo info;
  info.transport = to_string(sc.transport);
  info.channel = sc.channel;
  info.clock = clock.describe();
  info.cpu = o.cpu;
  if (o.cpu >= 0) {
    const PinResult pin = pin_current_thread(o.cpu);
    if (!pin) throw Error(Errc::invalid_argument, "--cpu: " + pin.message);
  }
  info.warnings = host_warnings(o.cpu);
  for (const std::string& w : info.warnings) note("warning: " + w);
  if (o.lock_memory) {
    const LockResult l = lock_all_memory();
    if (!l) note("warning: " + l.message);
  }

  // Before the attach: a stop while waiting for the channel is an interrupt like any other.
  cli::install_stop_signals();
  if (o.mode == Mode::echo) return echo(sc, o);
  Recorder rec(clock.ns_per_cycle());
  info.mode = o.mode;
  try {
    measure(o, sc, rec, info);
  } catch (const cli::Interrupted& e) {
    note(e.what());
    info.ended = "interrupted";
  }

  (void)cli::print(format_report(rec, info));  // a failure is said by cli.run()
  write_report_files(o, rec, info);
  if (info.ended == "evicted") return cli::kExitFailure;
  if (info.snapshot && !info.snapshot_complete && info.ended != "interrupted") {
    note("error: channel '" + sc.channel + "': the snapshot of the publisher's last-value table is not complete: " +
         snapshot_failure(info));
    return cli::kExitFailure;
  }
  return info.ended == "interrupted" ? cli::kExitInterrupted : cli::kExitOk;
}

}  // namespace tickrail::jitter
