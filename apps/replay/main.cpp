// tickrail-replay: replays a market-data feed (ITCH 5.0 file, pcap of MoldUDP64, CSV of ticks,
// or the synthetic generator) through a tickrail Publisher, paced, with a progress line and an
// end-of-run summary. A thin main over replay.hpp and the public API.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <thread>

#include "cli.hpp"
#include "replay.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/tools/config_file.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/report.hpp"

using namespace tickrail;

namespace {


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

// Declares every option; each, when given, is written over the config files by cli.resolve().
void declare(cli::Cli& cli, replay::Options& o, PublisherConfig& pc, bool& quiet) {
  using cli::parse_unsigned;
  cli.option("input", "ITCH, pcap, CSV or recording file (default: the synthetic feed)",
             [&](const std::string& v) { o.input = v; })
      ->type_name("INPUT");
  cli.add_config("TOML config file ([publisher], [rdma], [replay]); repeat -c for several");
  cli.option("--transport", "shm, rc or ud", [&](const std::string& v) { pc.transport = parse_transport(v, "--transport"); });
  cli.option("--channel", "channel name", [&](const std::string& v) { pc.channel = v; });
  cli.option("--format", "input format: auto (default), itch, pcap, csv, recording",
             [&](const std::string& v) { o.format = replay::parse_format(v, "--format"); });
  auto* speed = cli.option("--speed", "pace by the feed's timestamps, X times faster (default 1)",
                           [&](const std::string& v) {
                             o.pacing = replay::Pacing::feed;
                             o.speed = cli::parse_real(v, "--speed", 1e-6, 1e9);
                           });
  auto* rate = cli.option("--rate", "pace at a fixed rate, in ticks per second", [&](const std::string& v) {
    o.pacing = replay::Pacing::rate;
    o.rate = cli::parse_real(v, "--rate", 1e-3, 1e10);
  });
  auto* max = cli.flag("--max", "publish as fast as possible", [&] { o.pacing = replay::Pacing::max; });
  speed->excludes(rate)->excludes(max);
  rate->excludes(max);
  cli.option("--max-gap",
             "feed pacing: replay any gap in the feed longer than DURATION (10ms, 1s, 5m) as DURATION",
             [&](const std::string& v) { o.max_gap = replay::parse_duration(v, "--max-gap"); });
  cli.option("--pace-by", "feed pacing by the ticks' exchange time (default) or, for recordings, their send time",
             [&](const std::string& v) { o.pace_by = replay::parse_pace_by(v, "--pace-by"); });
  cli::add_range_options(cli, o.range);
  cli.flag("--book", "publish top-of-book quotes built from the order messages", [&] { o.book = true; });
  cli.flag("--state", "keep the channel's last-value table (latest quote, trade and status per instrument) for subscribers that start from it ([state] enabled)",
           [&] { pc.state.enabled = true; });
  cli.flag("--skip-bad", "count bad input and go on instead of failing", [&] { o.skip_bad = true; });
  cli.option("--wait-subscribers", "wait for N subscribers before starting (default 1; ud: N connected for recovery)",
             [&](const std::string& v) {
               o.wait_subscribers = static_cast<std::uint32_t>(parse_unsigned(v, "--wait-subscribers", kMaxSubscribers));
             });
  cli.option("--wait-timeout-ms", "how long to wait for them (default 3000, at most 24 h)",
             [&](const std::string& v) { o.wait_timeout = cli::parse_milliseconds(v, "--wait-timeout-ms"); });
  cli.option("--count", "synthetic feed: ticks to generate (default 5000000; 0: endless)",
             [&](const std::string& v) { o.synthetic.limit = parse_unsigned(v, "--count"); });
  cli.option("--duration", "stop after this many seconds (at most 86400)",
             [&](const std::string& v) { o.duration = cli::parse_seconds(v, "--duration"); });
  cli.option("--seed", "synthetic feed: random seed", [&](const std::string& v) { o.synthetic.seed = parse_unsigned(v, "--seed"); });
  cli.option("--instruments", "synthetic feed: instruments (default 8)", [&](const std::string& v) {
    o.synthetic.instruments = static_cast<std::uint32_t>(cli::parse_integer(v, "--instruments", 1, 65535));
  });
  cli.option("--udp-port", "pcap: MoldUDP64 destination port (default: any)", [&](const std::string& v) {
    o.udp_port = static_cast<std::uint16_t>(cli::parse_integer(v, "--udp-port", 0, 65535));
  });
  cli.option("--batch", "ticks per publish call, at most (default 256)", [&](const std::string& v) {
    o.batch = static_cast<std::uint32_t>(cli::parse_integer(v, "--batch", 1, 65536));
  });
  cli.option("--cpu", "pin the publishing thread to this cpu (-1: do not pin); tickrail's background threads then run on the others",
             [&](const std::string& v) { o.cpu = static_cast<int>(cli::parse_integer(v, "--cpu", -1, 4095)); });
  cli.option("--housekeeping-cpus", "run tickrail's background threads only on these cpus, e.g. 2-3,6 (housekeeping_cpus)",
             [&](const std::string& v) { pc.housekeeping_cpus = cli::parse_cpu_list_text(v, "--housekeeping-cpus"); });
  cli.output("--json", "write the summary as JSON to this file", o.json);
  cli.flag("-q,--quiet", "no progress line", [&] { quiet = true; });
  cli.value_names({{"--transport", "T"}, {"--channel", "NAME"}, {"--format", "F"}, {"--speed", "X"},
                   {"--rate", "N"}, {"--max-gap", "DURATION"}, {"--pace-by", "BY"}, {"--wait-subscribers", "N"}, {"--wait-timeout-ms", "MS"},
                   {"--count", "N"}, {"--duration", "S"}, {"--seed", "N"}, {"--instruments", "N"},
                   {"--udp-port", "P"}, {"--batch", "N"}, {"--cpu", "N"}, {"--housekeeping-cpus", "LIST"}});
}

void pin_if_asked(const cli::Cli& cli, const replay::Options& o) {
  if (o.cpu < 0) return;
  const PinResult pin = pin_current_thread(o.cpu);
  if (!pin) throw Error(Errc::invalid_argument, "--cpu: " + pin.message);
  if (!pin.message.empty()) cli.note("warning: " + pin.message);
}

void wait_for_subscribers(const cli::Cli& cli, const replay::Options& o, Publisher& pub) {
  if (o.wait_subscribers == 0) return;
  const std::uint32_t have = pub.wait_subscribers(o.wait_subscribers, o.wait_timeout, &cli::stop_flag());
  if (have >= o.wait_subscribers) return;
  const std::string count = std::to_string(have) + " of " + std::to_string(o.wait_subscribers);
  if (cli::stop_flag().load(std::memory_order_relaxed)) {
    cli.note("interrupted while waiting for subscribers (" + count + ")");
    return;
  }
  cli.note("warning: " + count + " subscribers after " + std::to_string(o.wait_timeout.count()) +
           " ms; starting anyway");
}

// The progress line on a terminal; into a pipe or a log, one line when a long gap in the feed
// begins; nothing when quiet.
std::function<void(const replay::ProgressLine&)> progress_printer(const cli::Cli& cli, bool quiet, bool tty) {
  if (tty) {
    return [](const replay::ProgressLine& p) {
      std::fprintf(stderr, "\r%-118s", replay::progress_text(p).c_str());
    };
  }
  if (quiet) return {};
  return [&cli, last = std::uint64_t{0}](const replay::ProgressLine& p) mutable {
    if (p.wait_ns == 0 || p.wait_feed_ts == last) return;
    last = p.wait_feed_ts;
    const std::string line = replay::progress_text(p);
    cli.note(line.substr(std::min(line.find_first_not_of(' '), line.size())));
  };
}

// The summary on stdout (and --json), after the run ended with `failure` ("" when none).
int report(const cli::Cli& cli, const replay::Options& o, const replay::Report& rep,
           const std::string& failure) {
  (void)cli::print(rep.text);  // a failure is said by cli.run()
  if (!o.json.empty()) {
    nlohmann::json j = rep.json;
    j["error"] = failure;
    write_text_file(o.json, j.dump(2) + "\n");
  }
  if (!failure.empty()) {
    cli.note("error: " + failure);
    return cli::kExitFailure;
  }
  return cli::stop_requested() ? cli::kExitInterrupted : cli::kExitOk;
}

int replay_run(const cli::Cli& cli, const replay::Options& o, const PublisherConfig& pc, bool quiet) {
  const Clock& clock = Clock::instance();
  pin_if_asked(cli, o);

  std::unique_ptr<feed::TickSource> src = replay::open_input(o);
  // What takes time (the book's table is touched page by page) is done before the publisher
  // exists: over RDMA a subscriber connecting meanwhile would find nobody serving it.
  std::unique_ptr<feed::OrderBook> book = replay::make_book(o);
  Publisher pub(pc);
  cli.note("publishing " + src->name() + " on " + to_string(pc.transport) + " channel '" +
       pc.channel + "', pacing " + to_string(o.pacing) + "; clock " + clock.describe());

  replay::Replayer r(o, *src, pub, std::move(book));
  cli::install_stop_signals();
  wait_for_subscribers(cli, o, pub);

  const bool tty = !quiet && isatty(STDERR_FILENO) == 1;
  const std::function<void(const replay::ProgressLine&)> progress = progress_printer(cli, quiet, tty);
  std::string failure;
  try {
    r.run(&cli::stop_flag(), progress);
  } catch (const Error& e) {
    failure = e.what();
  }
  if (tty) std::fprintf(stderr, "\r%118s\r", "");
  if (failure.empty()) drain(pub, o.drain_timeout);
  const std::vector<SubscriberStatus> subs = pub.subscribers();
  pub.close();
  return report(cli, o, replay::make_report(o, *src, r, pub, subs), failure);
}

}  // namespace

int main(int argc, char** argv) {
  cli::Cli cli("tickrail-replay",
               "tickrail-replay: replays a market-data feed through a tickrail publisher.\n"
               "INPUT is an ITCH 5.0 BinaryFILE (plain or gzip), a pcap/pcapng of ITCH over MoldUDP64,\n"
               "a CSV of ticks, or a tickrail-record recording (at its recorded pace: --pace-by, --speed;\n"
               "--max for as fast as possible; --from-seq/--to-seq/--from-time/--to-time for a range);\n"
               "without INPUT the built-in synthetic feed is replayed.\n"
               "Precedence: defaults < config files, in order < environment < command line.");
  replay::Options o;
  PublisherConfig pc;
  bool quiet = false;
  declare(cli, o, pc, quiet);
  if (const auto status = cli.parse(argc, argv)) return *status;
  return cli.run([&] {
    cli.resolve([&](const std::string& path) {
      ConfigFile f(path);
      replay::read_file(f, pc, o);
    });
    pc.validate();
    replay::validate(o);
    cli.check_outputs({{"--json", &o.json}});
    return replay_run(cli, o, pc, quiet);
  });
}
