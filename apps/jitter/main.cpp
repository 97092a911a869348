// tickrail-jitter: subscribes to a channel and measures what its subscriber sees: one-way
// latency from the publisher's send stamp, inter-arrival times, sequence gaps, and the longest
// pauses of its own polling loop. A thin main over jitter.hpp and the public API.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "jitter.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/config_file.hpp"
#include "tickrail/error.hpp"
#include "tickrail/memory.hpp"
#include "tickrail/report.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) {
  g_stop.store(true, std::memory_order_relaxed);
  std::signal(SIGINT, SIG_DFL);
}

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

int run(int argc, char** argv) {
  CLI::App app{
      "tickrail-jitter: measures the one-way latency and jitter a tickrail subscriber sees.\n"
      "Ends when the publisher closes the channel (after draining it), after --duration or after\n"
      "--count ticks. Command-line options override the config files, read in order."};
  jitter::Options o;
  SubscriberConfig sc;
  sc.attach_timeout = std::chrono::milliseconds(10'000);  // wait for the publisher to start

  std::vector<std::string> configs;
  std::string transport, channel, policy, mode, json, hgrm, svg;
  double duration_s = 0;
  std::uint64_t count = 0;
  std::int64_t attach_timeout_ms = 0;
  int cpu = -1;
  bool quiet = false, lock = false;
  app.add_option("-c,--config", configs, "TOML config file(s): [subscriber], [rdma], [jitter]")
      ->check(CLI::ExistingFile);
  app.add_option("--transport", transport, "shm, rc or ud");
  app.add_option("--channel", channel, "channel name");
  app.add_option("--policy", policy, "slow-consumer policy: block, drop or disconnect");
  app.add_option("--attach-timeout-ms", attach_timeout_ms,
                 "wait this long for the channel to appear (default 10000)");
  app.add_option("--mode", mode, "one-way (default), or pingpong: RTT/2 (needs the RC transport)");
  app.add_option("--cpu", cpu, "pin the polling thread to this cpu");
  app.add_option("--duration", duration_s, "stop after this many seconds");
  app.add_option("--count", count, "stop after this many ticks");
  app.add_option("--json", json, "write the figures as JSON to this file");
  app.add_option("--hgrm", hgrm, "write HdrHistogram's percentile distribution (ns) to this file");
  app.add_option("--svg", svg, "draw latency by percentile to this SVG file");
  app.add_flag("--mlock", lock, "lock all memory (mlockall) before measuring");
  app.add_flag("-q,--quiet", quiet, "no live line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  for (const std::string& path : configs) {
    ConfigFile f(path);
    read_subscriber_config(f, sc);
    jitter::read_options(f.section("jitter"), o);
    f.check_all_read({"publisher", "replay"});
  }
  if (app.count("--transport")) sc.transport = parse_transport(transport, "--transport");
  if (app.count("--channel")) sc.channel = channel;
  if (app.count("--policy")) sc.policy = parse_policy(policy, "--policy");
  if (app.count("--attach-timeout-ms")) sc.attach_timeout = std::chrono::milliseconds(attach_timeout_ms);
  if (app.count("--mode")) o.mode = jitter::parse_mode(mode, "--mode");
  if (app.count("--cpu")) o.cpu = cpu;
  if (app.count("--duration")) o.duration = std::chrono::milliseconds(static_cast<std::int64_t>(duration_s * 1e3));
  if (app.count("--count")) o.count = count;
  if (app.count("--json")) o.json = json;
  if (app.count("--hgrm")) o.hgrm = hgrm;
  if (app.count("--svg")) o.svg = svg;
  if (lock) o.lock_memory = true;
  if (quiet) o.live = false;
  sc.validate();
  jitter::validate(o);
  if (o.mode == jitter::Mode::pingpong) {
    throw Error(Errc::unsupported,
                "--mode pingpong: echoing ticks back to the publisher (RTT/2) needs the RC "
                "transport's return path, which this build does not have; use one-way on one host");
  }

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

  jitter::Recorder rec(clock.ns_per_tick());
  Subscriber sub = subscribe(sc);
  note("subscribed to " + info.transport + " channel '" + sc.channel + "' (policy " +
       to_string(sc.policy) + "); measuring one-way latency");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  const std::uint64_t start = Clock::now();
  const std::uint64_t second = clock.ns_to_ticks(1e9);
  const std::uint64_t end = o.duration.count() > 0
                                ? start + clock.ns_to_ticks(static_cast<double>(o.duration.count()) * 1e6)
                                : ~std::uint64_t{0};
  std::uint64_t next_live = start + second;
  std::uint64_t last_live = start;
  const std::uint64_t limit = o.count == 0 ? ~std::uint64_t{0} : o.count;
  auto handler = [&rec](const Tick& t) { rec.on_tick(t, Clock::now()); };

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
    if (g_stop.load(std::memory_order_relaxed)) [[unlikely]] {
      info.ended = "interrupted";
      break;
    }
    if (now >= end) {
      info.ended = "duration";
      break;
    }
    if (now >= next_live) {
      const jitter::Window w = rec.take_window(clock.to_ns(now - last_live) * 1e-9);
      if (o.live && rec.received() != 0) live_line(w, rec.received());
      last_live = now;
      next_live = now + second;
      rec.skip_poll_gap();  // the line was our doing, not the OS's
    }
  }
  info.elapsed_s = clock.to_ns(Clock::now() - start) * 1e-9;
  info.counters = sub.counters();
  sub.close();

  std::fputs(jitter::format_report(rec, info).c_str(), stdout);
  std::fflush(stdout);
  if (!o.json.empty()) write_text_file(o.json, jitter::report_json(rec, info).dump(2) + "\n");
  if (!o.hgrm.empty()) write_text_file(o.hgrm, format_hgrm(rec.latency()));
  if (!o.svg.empty()) {
    SvgOptions so;
    so.title = "tickrail one-way latency by percentile (" + info.transport + ")";
    so.y_label = "one-way latency";
    const SvgSeries series[] = {{"one-way latency", &rec.latency()}};
    write_text_file(o.svg, format_svg(series, so));
  }
  return info.ended == "evicted" ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    note(std::string("error: ") + e.what());
    return 1;
  }
}
