#include "jitter.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "text.hpp"
#include "tickrail/error.hpp"

namespace tickrail::jitter {

namespace {
[[noreturn]] void bad(std::string_view key, const std::string& why) {
  throw Error(Errc::config_error, std::string(key) + ": " + why);
}

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
  bad(key, "unknown mode '" + std::string(s) + "' (expected one-way, pingpong or echo)");
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
  s.validated([&] { validate(o); });
}

void validate(const Options& o) {
  if (o.cpu < -1) bad("cpu", "must be a cpu number, or -1 for none");
  if (o.batch == 0 || o.batch > 65536) bad("batch", std::to_string(o.batch) + " is outside 1..65536");
  if (o.ping_timeout.count() <= 0) bad("ping_timeout_ms", "must be positive");
  validate_duration("ping_timeout_ms", o.ping_timeout);
  validate_duration("duration_ms", o.duration);
}

Recorder::Recorder(double ns_per_tick) : ns_per_tick_(ns_per_tick) {}

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
    if (!rtt) t += fmt("; ring laps %" PRIu64 " (%" PRIu64 " skips)", c.laps, c.skips);
    if (c.gaps + c.recovered + c.foreign + c.malformed + c.completion_errors != 0) {
      t += fmt("; transport: %" PRIu64 " gaps, %" PRIu64 " recovered, %" PRIu64 " foreign, %" PRIu64
               " malformed, %" PRIu64 " completion errors",
               c.gaps, c.recovered, c.foreign, c.malformed, c.completion_errors);
    }
    if (lost.start_seq > 1 && !rtt) t += fmt("; joined after %" PRIu64 " ticks", lost.start_seq - 1);
    if (rtt) t += fmt("; %" PRIu64 " pings unanswered", info.timeouts);
    t += "\n";
  }
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
  j["out_of_order"] = r.out_of_order();
  j["negative"] = r.negative();
  const SubscriberCounters& c = info.counters;
  j["ring_lost"] = c.lost;
  j["laps"] = c.laps;
  j["skips"] = c.skips;
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

}  // namespace tickrail::jitter
