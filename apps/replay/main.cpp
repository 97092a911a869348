// tickrail-replay: replays a market-data feed (ITCH 5.0 file, pcap of MoldUDP64, CSV of ticks,
// or the synthetic generator) through a tickrail Publisher, paced, with a progress line and an
// end-of-run summary. A thin main over replay.hpp and the public API.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "replay.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/config_file.hpp"
#include "tickrail/error.hpp"
#include "tickrail/report.hpp"

using namespace tickrail;

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) {
  g_stop.store(true, std::memory_order_relaxed);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends at once
}

void note(const std::string& s) { std::fprintf(stderr, "tickrail-replay: %s\n", s.c_str()); }

// Waits (bounded) until every subscriber has consumed what was published, serving the channel.
void drain(Publisher& pub, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pub.service();
    bool behind = false;
    for (const SubscriberStatus& s : pub.subscribers()) behind = behind || (s.state == "active" && s.lag != 0);
    if (!behind) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int run(int argc, char** argv) {
  CLI::App app{
      "tickrail-replay: replays a market-data feed through a tickrail publisher.\n"
      "INPUT is an ITCH 5.0 BinaryFILE (plain or gzip), a pcap/pcapng of ITCH over MoldUDP64, or a\n"
      "CSV of ticks; without INPUT the built-in synthetic feed is replayed. Command-line options\n"
      "override the config files, which are read in order."};
  replay::Options o;
  PublisherConfig pc;

  std::vector<std::string> configs;
  std::string input, format, transport, channel, json;
  double speed = 0, rate = 0, duration_s = 0;
  std::uint64_t count = 0, seed = 0;
  std::uint32_t wait_subscribers = 0, instruments = 0, batch = 0;
  std::int64_t wait_timeout_ms = 0;
  std::uint16_t udp_port = 0;
  int cpu = -1;
  bool quiet = false;

  app.add_option("input", input, "input file (default: the synthetic feed)");
  app.add_option("-c,--config", configs, "TOML config file(s): [publisher], [rdma], [replay]")
      ->check(CLI::ExistingFile);
  app.add_option("--transport", transport, "shm, rc or ud");
  app.add_option("--channel", channel, "channel name");
  app.add_option("--format", format, "input format: auto (default), itch, pcap, csv");
  auto* o_speed = app.add_option("--speed", speed, "pace by the feed's timestamps, X times faster");
  auto* o_rate = app.add_option("--rate", rate, "pace at a fixed rate, in ticks per second");
  bool max = false;
  auto* o_max = app.add_flag("--max", max, "publish as fast as possible");
  o_speed->excludes(o_rate)->excludes(o_max);
  o_rate->excludes(o_max);
  std::string max_gap;
  app.add_option("--max-gap", max_gap,
                 "feed pacing: replay any gap in the feed longer than DURATION (10ms, 1s, 5m) "
                 "as DURATION");
  app.add_flag("--book", o.book, "publish top-of-book quotes built from the order messages");
  app.add_flag("--skip-bad", o.skip_bad, "count bad input and go on instead of failing");
  app.add_option("--wait-subscribers", wait_subscribers,
                 "wait for N subscribers before starting (default 1)");
  app.add_option("--wait-timeout-ms", wait_timeout_ms, "how long to wait for them (default 3000)");
  app.add_option("--count", count, "synthetic feed: ticks to generate (default 5000000)");
  app.add_option("--duration", duration_s, "stop after this many seconds");
  app.add_option("--seed", seed, "synthetic feed: random seed");
  app.add_option("--instruments", instruments, "synthetic feed: instruments");
  app.add_option("--udp-port", udp_port, "pcap: MoldUDP64 destination port (default: any)");
  app.add_option("--batch", batch, "ticks per publish call, at most (default 256)");
  app.add_option("--cpu", cpu, "pin the publishing thread to this cpu");
  app.add_option("--json", json, "write the summary as JSON to this file");
  app.add_flag("-q,--quiet", quiet, "no progress line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  for (const std::string& path : configs) {
    ConfigFile f(path);
    read_publisher_config(f, pc);
    replay::read_options(f.section("replay"), o);
    f.check_all_read({"subscriber", "jitter"});
  }
  if (app.count("input")) o.input = input;
  if (app.count("--format")) o.format = replay::parse_format(format, "--format");
  if (app.count("--transport")) pc.transport = parse_transport(transport, "--transport");
  if (app.count("--channel")) pc.channel = channel;
  if (app.count("--speed")) {
    o.pacing = replay::Pacing::feed;
    o.speed = speed;
  }
  if (app.count("--rate")) {
    o.pacing = replay::Pacing::rate;
    o.rate = rate;
  }
  if (max) o.pacing = replay::Pacing::max;
  if (app.count("--max-gap")) o.max_gap = replay::parse_duration(max_gap, "--max-gap");
  if (app.count("--wait-subscribers")) o.wait_subscribers = wait_subscribers;
  if (app.count("--wait-timeout-ms")) o.wait_timeout = std::chrono::milliseconds(wait_timeout_ms);
  if (app.count("--count")) o.synthetic.limit = count;
  if (app.count("--duration")) o.duration = std::chrono::milliseconds(static_cast<std::int64_t>(duration_s * 1e3));
  if (app.count("--seed")) o.synthetic.seed = seed;
  if (app.count("--instruments")) o.synthetic.instruments = instruments;
  if (app.count("--udp-port")) o.udp_port = udp_port;
  if (app.count("--batch")) o.batch = batch;
  if (app.count("--cpu")) o.cpu = cpu;
  if (app.count("--json")) o.json = json;
  pc.validate();
  replay::validate(o);

  const Clock& clock = Clock::instance();
  if (o.cpu >= 0) {
    const PinResult pin = pin_current_thread(o.cpu);
    if (!pin) throw Error(Errc::invalid_argument, "--cpu: " + pin.message);
    if (!pin.message.empty()) note("warning: " + pin.message);
  }

  std::unique_ptr<feed::TickSource> src = replay::open_input(o);
  Publisher pub(pc);
  note("publishing " + src->name() + " on " + to_string(pc.transport) + " channel '" +
       pc.channel + "', pacing " + to_string(o.pacing) + "; clock " + clock.describe());

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  if (o.wait_subscribers > 0) {
    const std::uint32_t have = replay::wait_for_subscribers(pub, o.wait_subscribers, o.wait_timeout, &g_stop);
    if (have < o.wait_subscribers) {
      note("warning: " + std::to_string(have) + " of " + std::to_string(o.wait_subscribers) +
           " subscribers after " + std::to_string(o.wait_timeout.count()) + " ms; starting anyway");
    }
  }

  const bool tty = !quiet && isatty(STDERR_FILENO) == 1;
  std::function<void(const replay::ProgressLine&)> progress;
  if (tty) {
    progress = [](const replay::ProgressLine& p) {
      std::fprintf(stderr, "\r%-118s", replay::progress_text(p).c_str());
    };
  } else if (!quiet) {
    // Into a pipe or a log: no progress line, but one line when a long gap in the feed begins.
    progress = [last = std::uint64_t{0}](const replay::ProgressLine& p) mutable {
      if (p.wait_ns == 0 || p.wait_feed_ts == last) return;
      last = p.wait_feed_ts;
      const std::string line = replay::progress_text(p);
      note(line.substr(std::min(line.find_first_not_of(' '), line.size())));
    };
  }

  replay::Replayer r(o, *src, pub);
  std::string failure;
  try {
    r.run(&g_stop, progress);
  } catch (const Error& e) {
    failure = e.what();
  }
  if (tty) std::fprintf(stderr, "\r%118s\r", "");
  if (failure.empty()) drain(pub, o.drain_timeout);
  const std::vector<SubscriberStatus> subs = pub.subscribers();
  pub.close();

  const replay::Report rep = replay::make_report(o, *src, r, pub, subs);
  std::fputs(rep.text.c_str(), stdout);
  std::fflush(stdout);
  if (!o.json.empty()) {
    nlohmann::json j = rep.json;
    j["error"] = failure;
    write_text_file(o.json, j.dump(2) + "\n");
  }
  if (!failure.empty()) {
    note("error: " + failure);
    return 1;
  }
  return 0;
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
