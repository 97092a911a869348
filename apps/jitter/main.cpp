// tickrail-jitter: subscribes to a channel and measures what its subscriber sees: one-way
// latency from the publisher's send stamp, inter-arrival times, sequence gaps, and the longest
// pauses of its own polling loop. A thin main: the command line here,
// the run in jitter.cpp (one-way) and pingpong.cpp (ping-pong and echo).
#include "cli.hpp"
#include "jitter.hpp"
#include "tickrail/tools/config_file.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;

namespace {

// Declares every option; each, when given, is written over the config files by cli.resolve().
void declare(cli::Cli& cli, jitter::Options& o, SubscriberConfig& sc) {
  cli.add_config("TOML config file ([subscriber], [rdma], [jitter], [failover]); repeat -c for several");
  cli::add_subscriber_options(cli, sc);
  cli.option("--start", "live (default): from the next tick; snapshot: from the publisher's last-value table, then live",
             [&](const std::string& v) { sc.start = parse_start_mode(v, "--start"); });
  cli.option("--state-capacity", "instruments the --state-out view holds (default 65536)",
             [&](const std::string& v) {
               o.state_capacity = static_cast<std::uint32_t>(cli::parse_integer(v, "--state-capacity", 1, kMaxStateCapacity));
             });
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
  cli.option("--cpu", "pin the polling thread to this cpu (-1: do not pin); tickrail's background threads then run on the others",
             [&](const std::string& v) { o.cpu = static_cast<int>(cli::parse_integer(v, "--cpu", -1, 4095)); });
  cli.option("--duration", "stop after this many seconds (at most 86400)",
             [&](const std::string& v) { o.duration = cli::parse_seconds(v, "--duration"); });
  cli.option("--count", "stop after this many ticks (0: no limit)",
             [&](const std::string& v) { o.count = cli::parse_unsigned(v, "--count"); });
  cli.option("--line-b", "hot failover: line B's channel, carrying the same stream as --channel's; the run reads both and reports each line's share and lead (docs/failover.md)",
             [&](const std::string& v) { o.line_b.channel = v; });
  cli.option("--line-b-transport", "line B's transport (default: line A's)", [&](const std::string& v) { o.line_b.transport = parse_transport(v, "--line-b-transport"); });
  cli.option("--line-b-address", "rc/ud: line B's publisher address (default: line A's)",
             [&](const std::string& v) { o.line_b.address = v; });
  cli.option("--line-b-port", "rc/ud: line B's rdma_cm port (default: line A's)", [&](const std::string& v) {
    o.line_b.port = static_cast<std::uint16_t>(cli::parse_integer(v, "--line-b-port", 1, 65535));
  });
  cli.option("--line-b-group", "ud: line B's multicast group", [&](const std::string& v) { o.line_b.group = v; });
  cli.option("--line-b-device", "rc/ud: line B's verbs device (default: line A's)",
             [&](const std::string& v) { o.line_b.device = v; });
  cli.option("--failover-window", "ticks held beyond a hole while the other line catches up (a power of two, default 4096)",
             [&](const std::string& v) {
               o.failover.window = static_cast<std::uint32_t>(cli::parse_integer(v, "--failover-window", 2, 1 << 20));
             });
  cli.option("--hole-timeout-us", "how long a hole waits for the line behind (default 1000)", [&](const std::string& v) {
    o.failover.hole_timeout = std::chrono::microseconds(cli::parse_integer(v, "--hole-timeout-us", 1, 10'000'000));
  });
  cli.option("--recovery-delay-us", "ud lines: line A reads a hole back once it is this old, line B after twice this (default 200)",
             [&](const std::string& v) {
               o.failover.recovery_delay = std::chrono::microseconds(cli::parse_integer(v, "--recovery-delay-us", 0, 500'000));
             });
  cli.output("--json", "write the figures as JSON to this file", o.json);
  cli.output("--hgrm", "write HdrHistogram's percentile distribution (ns) to this file", o.hgrm);
  cli.output("--svg", "draw latency by percentile to this SVG file", o.svg);
  cli.output("--state-out", "write the view of the market the run ends with (latest quote, trade and status per instrument) as JSON to this file", o.state_out);
  cli.flag("--mlock", "lock all memory (mlockall) before measuring", [&] { o.lock_memory = true; });
  cli.flag("-q,--quiet", "no live line", [&] { o.live = false; });
  cli.value_names({{"--start", "MODE"}, {"--state-capacity", "N"}, {"--mode", "M"}, {"--echo-address", "A"},
                   {"--echo-group", "G"}, {"--warmup", "N"}, {"--cpu", "N"},
                   {"--line-b", "CHANNEL"}, {"--line-b-transport", "T"}, {"--line-b-address", "A"}, {"--line-b-port", "P"},
                   {"--line-b-group", "G"}, {"--line-b-device", "D"}, {"--failover-window", "N"}, {"--hole-timeout-us", "US"}, {"--recovery-delay-us", "US"}, {"--duration", "S"}, {"--count", "N"}});
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
      jitter::read_file(f, sc, o);
    });
    if (o.mode == jitter::Mode::pingpong && o.count == 0 && o.duration.count() == 0) o.count = 100'000;
    sc.validate();
    jitter::validate(o);
    if (o.mode != jitter::Mode::one_way && (sc.start == StartMode::snapshot || !o.state_out.empty())) {
      cli::bad_value("--start snapshot, --state-out", "need --mode one-way");
    }
    if (o.line_b.given()) {
      if (o.mode != jitter::Mode::one_way) cli::bad_value("--line-b", "needs --mode one-way");
      jitter::failover_config(o, sc).validate();
    }
    cli.check_outputs({{"--json", &o.json}, {"--hgrm", &o.hgrm}, {"--svg", &o.svg}, {"--state-out", &o.state_out}});
    return jitter::run(o, sc);
  });
}
