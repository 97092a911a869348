// tickrail-jitter: subscribes to a channel and measures what its subscriber sees: one-way
// latency from the publisher's send stamp, inter-arrival times, sequence gaps, and the longest
// pauses of its own polling loop. A thin main over jitter.hpp and the public API.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <thread>

#include "cli.hpp"
#include "jitter.hpp"
#include "pingpong.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/config_file.hpp"
#include "tickrail/error.hpp"
#include "tickrail/memory.hpp"
#include "tickrail/report.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;

namespace {

void note(const std::string& s) { std::fprintf(stderr, "tickrail-jitter: %s\n", s.c_str()); }

// The live line, formatted into a stack buffer and written with one system call.
void live_line(const jitter::Window& w, std::uint64_t total) {
  char buf[192];
  const int n = std::snprintf(
      buf, sizeof buf,
      "  %10.0f ticks/s  p50 %9.1f ns  p99 %9.1f ns  max %11.1f ns  lost %llu  total %llu\n",
      w.seconds > 0 ? static_cast<double>(w.count) / w.seconds : 0.0, static_cast<double>(w.p50_ns),
      static_cast<double>(w.p99_ns), static_cast<double>(w.max_ns),
      static_cast<unsigned long long>(w.lost), static_cast<unsigned long long>(total));
  if (n > 0) (void)!write(STDERR_FILENO, buf, static_cast<std::size_t>(std::min(n, static_cast<int>(sizeof buf) - 1)));
}

// Attaches, waiting up to attach_timeout for the channel to appear. A channel left behind by a
// publisher that died (peer_gone) counts as not there yet: its next publisher replaces it.
Subscriber subscribe(const SubscriberConfig& sc) {
  const auto deadline = std::chrono::steady_clock::now() + sc.attach_timeout;
  bool told = false;
  for (;;) {
    try {
      return Subscriber(sc);
    } catch (const Error& e) {
      if (e.code() != make_error_code(Errc::peer_gone) || std::chrono::steady_clock::now() >= deadline) throw;
      if (!told) note(std::string("waiting for a live publisher: ") + e.what());
      told = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// One-way: receive time minus the publisher's send stamp, one clock.
void one_way(const SubscriberConfig& sc, const jitter::Options& o, jitter::Recorder& rec,
             jitter::RunInfo& info) {
  const Clock& clock = Clock::instance();
  Subscriber sub = subscribe(sc);
  note("subscribed to " + info.transport + " channel '" + sc.channel + "' (policy " +
       to_string(sc.policy) + "); measuring one-way latency");
  cli::install_stop_signals();

  const std::uint64_t start = Clock::now();
  const std::uint64_t second = clock.ns_to_ticks(1e9);
  const std::uint64_t end = o.duration.count() > 0
                                ? start + clock.ns_to_ticks(static_cast<double>(o.duration.count()) * 1e6)
                                : ~std::uint64_t{0};
  std::uint64_t next_live = start + second;
  std::uint64_t last_live = start;
  const std::uint64_t limit = o.count == 0 ? ~std::uint64_t{0} : o.count;
  auto handler = [&rec](const Tick& t) { rec.on_tick(t, Clock::now()); };
  std::uint64_t lost_seen = 0;

  for (;;) {
    const std::uint64_t now = Clock::now();
    rec.on_poll(now);
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(o.batch, limit - rec.received()));
    const std::size_t n = sub.poll(handler, want);
    if (rec.received() >= limit) {
      info.ended = "count";
      break;
    }
    if (n == 0) {
      const SubscriberState st = sub.state();
      if (st == SubscriberState::publisher_gone || st == SubscriberState::evicted ||
          st == SubscriberState::closed) {
        // Gone with nothing left to drain: one more empty poll settles a race with the last
        // ticks, since the state is read after the poll.
        if (sub.poll(handler, want) == 0) {
          info.ended = st == SubscriberState::evicted ? "evicted" : "publisher_gone";
          info.reason = sub.reason();
          break;
        }
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
    if (now >= next_live) {
      jitter::Window w = rec.take_window(clock.to_ns(now - last_live) * 1e-9);
      // The Subscriber's count: also ticks lapped before the first receipt.
      const std::uint64_t lost_now = sub.counters().lost;
      w.lost = std::max(w.lost, lost_now - lost_seen);
      lost_seen = lost_now;
      if (o.live && rec.received() != 0) live_line(w, rec.received());
      last_live = now;
      next_live = now + second;
      rec.skip_poll_gap();  // the line was our doing, not the OS's
    }
  }
  info.elapsed_s = clock.to_ns(Clock::now() - start) * 1e-9;
  info.counters = sub.counters();
  info.position = sub.next_sequence();
  sub.close();
}

// Attaches to a stream whose publisher may not be up yet, over any transport: every failure
// before the deadline is retried; the last one is reported. Between attempts `ours` is served,
// so that the far end's subscription to it completes (it publishes the stream we wait for only
// once subscribed).
Subscriber subscribe_retrying(const SubscriberConfig& sc, Publisher* ours) {
  const auto deadline = std::chrono::steady_clock::now() + sc.attach_timeout;
  // One attempt at a time: a subscriber waiting inside for a listener would leave `ours`
  // unserved, and the far end waits for it.
  SubscriberConfig once = sc;
  once.attach_timeout = std::chrono::milliseconds(0);
  for (;;) {
    try {
      return Subscriber(once);
    } catch (const Error& e) {
      // What no retry can change ends the wait at once.
      if (e.code() == make_error_code(Errc::no_device) || e.code() == make_error_code(Errc::config_error) ||
          std::chrono::steady_clock::now() >= deadline) {
        throw;
      }
      for (int i = 0; i < 50; ++i) {
        if (ours != nullptr) ours->service();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
}

// The measuring end of ping-pong: one ping in flight; RTT/2 recorded as the latency of a tick
// sent half a round trip before its echo came back, numbered by ping so that unanswered pings
// show as gaps.
void ping(const SubscriberConfig& sc, const jitter::Options& o, jitter::Recorder& rec,
          jitter::RunInfo& info) {
  const Clock& clock = Clock::instance();
  Publisher pub(jitter::forward_publisher(sc));
  const SubscriberConfig ec = jitter::echo_subscriber(sc, o);
  note("publishing pings on " + info.transport + " channel '" + sc.channel +
       "'; waiting for tickrail-jitter --mode echo to answer on '" + ec.channel + "'");
  Subscriber sub = subscribe_retrying(ec, &pub);
  cli::install_stop_signals();

  const std::uint64_t timeout = clock.ns_to_ticks(static_cast<double>(o.ping_timeout.count()) * 1e6);
  const std::uint64_t second = clock.ns_to_ticks(1e9);
  const std::uint64_t limit = o.count == 0 ? ~std::uint64_t{0} : o.count;
  std::uint64_t id = 0;           // the ping in flight (Tick::order_ref)
  std::uint64_t warm = 0;         // answered pings before recording starts
  std::uint64_t measured = 0;     // pings sent since recording started
  bool answered = false;
  std::uint64_t rtt = 0;
  auto on_echo = [&](const Tick& t) {
    if (t.order_ref == id && !answered) {
      answered = true;
      rtt = Clock::now() - t.send_ts;
    }
  };
  Tick p{};
  p.kind = TickKind::Status;
  const auto first_deadline = std::chrono::steady_clock::now() + sc.attach_timeout;
  std::uint64_t start = 0, end = ~std::uint64_t{0}, next_live = 0, last_live = 0;

  for (;;) {
    ++id;
    p.order_ref = id;
    answered = false;
    const bool recording = warm >= o.warmup + 1;
    if (recording) ++measured;
    const PublishResult r = pub.publish(p);
    const std::uint64_t sent = Clock::now();
    if (r.status == PublishStatus::closed) {
      info.ended = "publisher_gone";
      break;
    }
    // Spin for the echo (a ping nobody was subscribed to yet is never answered: it times out).
    // The spin is kept to a poll and a clock read: the echo is seen up to one iteration late,
    // so the state check (loads and a clock read of its own) runs once in 64.
    std::uint64_t now = sent;
    for (std::uint32_t spins = 1; !answered && now - sent < timeout; ++spins) {
      rec.on_poll(now);
      if (sub.poll(on_echo, 16) == 0 && r.status == PublishStatus::no_subscribers) pub.service();
      now = Clock::now();
      if (spins % 64 == 0 && !answered &&
          (cli::stop_requested() || sub.state() == SubscriberState::publisher_gone)) {
        break;
      }
    }
    if (answered) {
      if (recording) {
        Tick t = p;
        t.seq = measured;                // gaps = pings unanswered while recording
        t.send_ts = now - rtt / 2;       // so that the recorded latency is RTT/2
        rec.on_tick(t, now);
      } else if (++warm == o.warmup + 1) {
        start = Clock::now();
        end = o.duration.count() > 0
                  ? start + clock.ns_to_ticks(static_cast<double>(o.duration.count()) * 1e6)
                  : ~std::uint64_t{0};
        next_live = start + second;
        last_live = start;
        note("echo answered; " + std::to_string(o.warmup) + " warm-up pings done, measuring RTT/2");
      }
    } else if (recording) {
      ++info.timeouts;
    }
    if (cli::stop_requested()) [[unlikely]] {
      info.ended = "interrupted";
      break;
    }
    if (!answered && sub.state() == SubscriberState::publisher_gone) {
      info.ended = "publisher_gone";
      info.reason = "the echo end: " + sub.reason();
      break;
    }
    if (warm == 0 && std::chrono::steady_clock::now() >= first_deadline) {
      throw Error(Errc::timed_out, "no echo on channel '" + ec.channel + "' within " +
                                     std::to_string(sc.attach_timeout.count()) +
                                     " ms: is tickrail-jitter --mode echo running with the same "
                                     "config (and --echo-address)?");
    }
    if (measured >= limit) {
      info.ended = "count";
      break;
    }
    if (start != 0 && now >= end) {
      info.ended = "duration";
      break;
    }
    if (start != 0 && now >= next_live) {
      const jitter::Window w = rec.take_window(clock.to_ns(now - last_live) * 1e-9);
      if (o.live && rec.received() != 0) live_line(w, rec.received());
      last_live = now;
      next_live = now + second;
      rec.skip_poll_gap();
    }
  }
  info.elapsed_s = start == 0 ? 0 : clock.to_ns(Clock::now() - start) * 1e-9;
  info.counters = sub.counters();
  pub.close();  // the echo end sees the forward stream end and stops
  sub.close();
}

// The far end of ping-pong: every tick received goes back on the echo stream as it came.
int echo(const SubscriberConfig& sc, const jitter::Options& o) {
  Subscriber sub = subscribe_retrying(sc, nullptr);  // the measuring end may start later
  PublisherConfig pc = jitter::echo_publisher(sc, o);
  Publisher pub(pc);
  note("echoing " + std::string(to_string(sc.transport)) + " channel '" + sc.channel +
       "' back on '" + pc.channel + "'");
  cli::install_stop_signals();
  std::uint64_t echoed = 0, unsent = 0;
  auto back = [&](const Tick& t) {
    if (pub.publish(t).ok()) {
      ++echoed;
    } else {
      ++unsent;  // the measuring end not subscribed yet: that ping times out there
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::string ended;
  // An empty poll is followed by housekeeping only once in 64, so that a ping waits for at
  // most one cheap iteration before it is seen.
  for (std::uint32_t idle = 0;;) {
    if (sub.poll(back, 16) == 0 && ++idle % 64 == 0) {
      pub.service();
      const SubscriberState st = sub.state();
      if ((st == SubscriberState::publisher_gone || st == SubscriberState::closed ||
           st == SubscriberState::evicted) &&
          sub.poll(back, 16) == 0) {
        ended = "the measuring end closed its stream (" + sub.reason() + ")";
        break;
      }
    }
    if (cli::stop_requested()) [[unlikely]] {
      ended = "interrupted";
      break;
    }
    if (o.duration.count() > 0 && std::chrono::steady_clock::now() - t0 >= o.duration) {
      ended = "--duration reached";
      break;
    }
  }
  std::printf("tickrail-jitter --mode echo: %llu pings echoed, %llu not sent (nobody subscribed "
              "yet); ended: %s\n",
              static_cast<unsigned long long>(echoed), static_cast<unsigned long long>(unsent),
              ended.c_str());
  return ended == "interrupted" ? cli::kExitInterrupted : cli::kExitOk;
}

// Declares every option; each, when given, is written over the config files by cli.resolve().
void declare(cli::Cli& cli, jitter::Options& o, SubscriberConfig& sc) {
  cli.add_config("TOML config file ([subscriber], [rdma], [jitter]); repeat -c for several");
  cli.option("--transport", "shm, rc or ud", [&](const std::string& v) { sc.transport = parse_transport(v, "--transport"); });
  cli.option("--channel", "channel name", [&](const std::string& v) { sc.channel = v; });
  cli.option("--policy", "slow-consumer policy: block, drop or disconnect",
             [&](const std::string& v) { sc.policy = parse_policy(v, "--policy"); });
  cli.option("--attach-timeout-ms", "wait this long for the channel to appear (default 10000, at most 24 h)",
             [&](const std::string& v) { sc.attach_timeout = cli::parse_milliseconds(v, "--attach-timeout-ms"); });
  cli.option("--mode",
             "one-way (default); pingpong: publish pings and report RTT/2, with the far end "
             "running --mode echo (for hosts that do not share a clock)",
             [&](const std::string& v) { o.mode = jitter::parse_mode(v, "--mode"); });
  cli.option("--echo-address", "pingpong/echo over rc or ud: the echo end's address (default: [rdma] address)",
             [&](const std::string& v) { o.echo_address = v; });
  cli.option("--echo-group", "pingpong/echo over ud: the echo stream's group",
             [&](const std::string& v) { o.echo_group = v; });
  cli.option("--warmup", "pingpong: pings not recorded after the first echo (1000)",
             [&](const std::string& v) { o.warmup = cli::parse_unsigned(v, "--warmup"); });
  cli.option("--cpu", "pin the polling thread to this cpu (-1: do not pin)",
             [&](const std::string& v) { o.cpu = static_cast<int>(cli::parse_integer(v, "--cpu", -1, 4095)); });
  cli.option("--duration", "stop after this many seconds (at most 86400)",
             [&](const std::string& v) { o.duration = cli::parse_seconds(v, "--duration"); });
  cli.option("--count", "stop after this many ticks (0: no limit)",
             [&](const std::string& v) { o.count = cli::parse_unsigned(v, "--count"); });
  cli.output("--json", "write the figures as JSON to this file", o.json);
  cli.output("--hgrm", "write HdrHistogram's percentile distribution (ns) to this file", o.hgrm);
  cli.output("--svg", "draw latency by percentile to this SVG file", o.svg);
  cli.flag("--mlock", "lock all memory (mlockall) before measuring", [&] { o.lock_memory = true; });
  cli.flag("-q,--quiet", "no live line", [&] { o.live = false; });
  cli.value_names({{"--transport", "T"}, {"--channel", "NAME"}, {"--policy", "P"}, {"--attach-timeout-ms", "MS"},
                   {"--mode", "M"}, {"--echo-address", "A"}, {"--echo-group", "G"}, {"--warmup", "N"},
                   {"--cpu", "N"}, {"--duration", "S"}, {"--count", "N"}});
}

int jitter_run(const jitter::Options& o, const SubscriberConfig& sc) {
  const Clock& clock = Clock::instance();
  jitter::RunInfo info;
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

  if (o.mode == jitter::Mode::echo) return echo(sc, o);
  jitter::Recorder rec(clock.ns_per_tick());
  info.mode = o.mode;
  if (o.mode == jitter::Mode::pingpong) {
    ping(sc, o, rec, info);
  } else {
    one_way(sc, o, rec, info);
  }

  std::fputs(jitter::format_report(rec, info).c_str(), stdout);
  std::fflush(stdout);
  if (!o.json.empty()) write_text_file(o.json, jitter::report_json(rec, info).dump(2) + "\n");
  if (!o.hgrm.empty()) write_text_file(o.hgrm, format_hgrm(rec.latency()));
  if (!o.svg.empty()) {
    const bool rtt = o.mode == jitter::Mode::pingpong;
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
  if (info.ended == "evicted") return cli::kExitFailure;
  return info.ended == "interrupted" ? cli::kExitInterrupted : cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  cli::Cli cli("tickrail-jitter",
               "tickrail-jitter: measures the one-way latency and jitter a tickrail subscriber sees.\n"
               "Ends when the publisher closes the channel (after draining it), after --duration or\n"
               "after --count ticks.\n"
               "Precedence: defaults < config files, in order < environment < command line.");
  jitter::Options o;
  SubscriberConfig sc;
  sc.attach_timeout = std::chrono::milliseconds(10'000);  // wait for the publisher to start
  declare(cli, o, sc);
  if (const auto status = cli.parse(argc, argv)) return *status;
  return cli.run([&] {
    cli.resolve([&](const std::string& path) {
      ConfigFile f(path);
      read_subscriber_config(f, sc);
      jitter::read_options(f.section("jitter"), o);
      f.check_all_read({"publisher", "replay"});
    });
    if (o.mode == jitter::Mode::pingpong && o.count == 0 && o.duration.count() == 0) o.count = 100'000;
    sc.validate();
    jitter::validate(o);
    cli.check_outputs({{"--json", &o.json}, {"--hgrm", &o.hgrm}, {"--svg", &o.svg}});
    return jitter_run(o, sc);
  });
}
