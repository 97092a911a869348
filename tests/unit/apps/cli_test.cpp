// The command line of the real programs: one precedence rule (a flag beats every config file,
// whatever the order of the arguments), -c taking one file, checked numbers, early checks of
// output paths, one exit-status table, --version, and the error on a host without RDMA.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <nlohmann/json.hpp>

#include "program.hpp"
#include "tickrail/version.hpp"

using namespace tickrail::test;
using nlohmann::json;

namespace {

const std::string kReplay = "apps/replay/tickrail-replay";
const std::string kJitter = "apps/jitter/tickrail-jitter";

// A scratch file name unique to this process and test.
std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tickrail-cli-" + std::to_string(getpid()) + "-" + name))
      .string();
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = scratch(name);
  std::ofstream(path) << text;
  return path;
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A short synthetic replay on its own channel that waits for nobody.
std::vector<std::string> replay_base(const std::string& json_path) {
  return {build_program(kReplay), "--channel", "cli-" + std::to_string(getpid()), "--quiet",
          "--wait-subscribers", "0", "--json", json_path};
}

// Runs replay with `flag` after and then before `-c config`: both orders must give the flag's value.
template <class Check>
void both_orders(const std::vector<std::string>& base, const std::vector<std::string>& flag,
                 const std::string& config, const std::string& json_path, Check check) {
  for (const bool flag_first : {false, true}) {
    std::vector<std::string> args = base;
    const std::vector<std::string> c = {"-c", config};
    args = flag_first ? cat(cat(args, flag), c) : cat(cat(args, c), flag);
    const Finished f = run_program(args, scratch("log"));
    INFO("flag first: " << flag_first << "\n" << f.output);
    check(f, json::parse(slurp(json_path)));
    std::filesystem::remove(json_path);
  }
}

}  // namespace

TEST_CASE("replay: a flag beats every config file, in both argument orders", "[cli]") {
  const std::string j = scratch("replay.json");
  const std::string config = write("replay.toml",
                                   "transport = \"rc\"\nchannel = \"from-config\"\n"
                                   "[replay]\nbook = false\ncount = 50\npacing = \"rate\"\nrate = 1.0\n"
                                   "wait_subscribers = 1\nwait_timeout_ms = 86400000\n");
  const std::string channel = "cli-" + std::to_string(getpid());
  const std::vector<std::string> base = {build_program(kReplay), "--quiet", "--json", j};
  // Every option the file contradicts, given on the command line before or after -c.
  const std::vector<std::string> options = {"--max", "--transport", "shm", "--channel", channel,
                                            "--count", "400", "--wait-subscribers", "0"};

  SECTION("--book over book = false") {
    both_orders(base, cat(options, {"--book"}), config, j, [](const Finished& f, const json& out) {
      REQUIRE(f.status == 0);
      CHECK(out.contains("book"));
    });
  }
  SECTION("options with values over the file's keys") {
    both_orders(base, options, config, j, [&](const Finished& f, const json& out) {
      REQUIRE(f.status == 0);
      CHECK(out["ticks_read"] == 400);      // --count 400 over count = 50
      CHECK(out["pacing"] == "max");        // --max over pacing = "rate" (400 s at 1 tick/s)
      CHECK(out["transport"] == "shm");     // --transport over transport = "rc"
      CHECK(out["channel"] == channel);     // --channel over channel
      CHECK_FALSE(out.contains("book"));
    });
  }
  std::filesystem::remove(config);
}

TEST_CASE("replay: --skip-bad beats skip_bad = false; -c takes one file, not the input", "[cli]") {
  const std::string j = scratch("skip.json");
  const std::string input = write("bad.csv", "kind,price,qty\nadd,1.5,10\nnot-a-kind,1,1\nadd,2,5\n");
  const std::string config = write("skip.toml", "[replay]\nskip_bad = false\nformat = \"csv\"\n");
  // README's pattern: -c FILE, then the input, then the flag.
  const auto base = cat(replay_base(j), {"--max"});
  for (const bool flag_first : {false, true}) {
    std::vector<std::string> args = base;
    if (flag_first) args.push_back("--skip-bad");
    args = cat(args, {"-c", config, input});
    if (!flag_first) args.push_back("--skip-bad");
    const Finished f = run_program(args, scratch("log"));
    INFO(f.output);
    REQUIRE(f.status == 0);
    const json out = json::parse(slurp(j));
    CHECK(out["input"].get<std::string>().find("bad.csv") != std::string::npos);
    CHECK(out["bad_input"]["total"] == 1);
    CHECK(out["ticks_published"] == 2);
  }
  // Without the flag the config's skip_bad = false holds: bad input is a runtime failure.
  const Finished f = run_program(cat(base, {"-c", config, input}), scratch("log"));
  INFO(f.output);
  CHECK(f.status == 1);
  CHECK_THAT(f.output, Catch::Contains("line 3"));
  for (const auto& p : {j, input, config}) std::filesystem::remove(p);
}

TEST_CASE("jitter: options beat the config file in both orders", "[cli]") {
  // The channel does not exist: jitter waits attach_timeout for it. The file asks for 24 h and
  // another transport and channel; the command line's short wait on shm must win.
  const std::string config = write("jitter.toml",
                                   "transport = \"rc\"\nchannel = \"from-config\"\n"
                                   "[subscriber]\nattach_timeout_ms = 86400000\n[rdma]\naddress = \"10.0.0.1\"\n");
  const std::string channel = "cli-missing-" + std::to_string(getpid());
  const std::vector<std::string> flags = {"--attach-timeout-ms", "100", "--transport", "shm", "--channel", channel};
  for (const bool flag_first : {false, true}) {
    std::vector<std::string> args = {build_program(kJitter), "--quiet"};
    args = flag_first ? cat(cat(args, flags), {"-c", config}) : cat(cat(args, {"-c", config}), flags);
    const Finished f = run_program(args, scratch("log"), std::chrono::seconds(30));
    INFO(f.output);
    CHECK(f.status == 1);
    CHECK_THAT(f.output, Catch::Contains(channel));
    CHECK_THAT(f.output, !Catch::Contains("RDMA"));
  }
  std::filesystem::remove(config);
}

TEST_CASE("bad numbers and config values exit 2 naming the option or the key and file", "[cli]") {
  const std::string j = scratch("bad.json");
  struct Case {
    std::string program;
    std::vector<std::string> args;
    std::string names;
  };
  const std::string timeouts = write("timeouts.toml", "[subscriber]\npublisher_timeout_ms = 18446744073710\n");
  const std::string disconnect = write("disconnect.toml", "[subscriber]\ndisconnect_after_ms = 18446744073710\n");
  const std::string typo = write("typo.toml", "[replay]\nbok = true\n");
  const std::vector<Case> cases = {
      {kReplay, {"--count", "-5"}, "--count"},
      {kReplay, {"--duration", "-1"}, "--duration"},
      {kReplay, {"--duration", "nan"}, "--duration"},
      {kReplay, {"--duration", "86401"}, "--duration"},
      {kReplay, {"--wait-timeout-ms", "-5"}, "--wait-timeout-ms"},
      {kReplay, {"--speed", "0"}, "--speed"},
      {kReplay, {"--batch", "12x"}, "--batch"},
      {kReplay, {"--no-such-option"}, "--no-such-option"},
      {kReplay, {"-c", typo}, "bok"},
      {kReplay, {"-c", scratch("absent.toml")}, "absent.toml"},
      {kJitter, {"--attach-timeout-ms", "9223372036854775807"}, "--attach-timeout-ms"},
      {kJitter, {"--count", "-5"}, "--count"},
      {kJitter, {"--duration", "inf"}, "--duration"},
      {kJitter, {"-c", timeouts}, "publisher_timeout_ms"},
      {kJitter, {"-c", disconnect}, "disconnect_after_ms"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {build_program(c.program), "--quiet", "--channel", "cli-bad"};
    args = cat(args, c.args);
    const Finished f = run_program(args, scratch("log"), std::chrono::seconds(30));
    INFO(c.program << " " << c.args.front() << ": " << f.output);
    CHECK(f.status == 2);
    CHECK_THAT(f.output, Catch::Contains(c.names));
  }
  // A config error names the file as well as the key.
  const Finished f = run_program({build_program(kJitter), "-c", timeouts}, scratch("log"));
  CHECK_THAT(f.output, Catch::Contains(timeouts + ":2"));
  for (const auto& p : {timeouts, disconnect, typo}) std::filesystem::remove(p);
}

TEST_CASE("an output path that cannot be written fails at the start, exit 2", "[cli]") {
  const std::string bad_dir = scratch("no-such-dir") + "/out";
  // Both would wait a day (for a subscriber, for the channel) if the path were checked at the end.
  const Finished r = run_program({build_program(kReplay), "--channel", "cli-out", "--wait-subscribers", "1",
                                  "--wait-timeout-ms", "86400000", "--json", bad_dir + ".json"},
                                 scratch("log"), std::chrono::seconds(30));
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("--json") && Catch::Contains(bad_dir + ".json"));
  for (const char* option : {"--json", "--hgrm", "--svg"}) {
    const Finished f = run_program({build_program(kJitter), "--channel", "cli-out", "--attach-timeout-ms",
                                    "86400000", option, bad_dir},
                                   scratch("log"), std::chrono::seconds(30));
    INFO(f.output);
    CHECK(f.status == 2);
    CHECK_THAT(f.output, Catch::Contains(option) && Catch::Contains(bad_dir));
  }
  // A file that exists is kept as it is until the report replaces it.
  const std::string existing = write("existing.json", "kept");
  const Finished ok = run_program({build_program(kReplay), "--channel", "cli-out", "--wait-subscribers", "0",
                                   "--count", "10", "--max", "--json", existing, "--no-such-option"},
                                  scratch("log"));
  CHECK(ok.status == 2);
  CHECK(slurp(existing) == "kept");
  std::filesystem::remove(existing);
}

TEST_CASE("every program has --version and the exit-status table in --help", "[cli]") {
  for (const char* p : {"apps/replay/tickrail-replay", "apps/jitter/tickrail-jitter", "apps/stat/tickrail-stat",
                        "apps/doctor/tickrail-doctor", "apps/bench/tickrail-bench",
                        "apps/bench-rc/tickrail-bench-rc", "apps/bench-ud/tickrail-bench-ud",
                        "apps/bench-feed/tickrail-bench-feed"}) {
    const std::string path = build_program(p);
    const Finished v = run_program({path, "--version"}, scratch("log"));
    INFO(p << ": " << v.output);
    CHECK(v.status == 0);
    CHECK_THAT(v.output, Catch::Contains(TICKRAIL_VERSION_STRING));
    const Finished h = run_program({path, "--help"}, scratch("log"));
    CHECK(h.status == 0);
    CHECK_THAT(h.output, Catch::Contains("Exit status") && Catch::Contains("130"));
    const Finished u = run_program({path, "--no-such-option"}, scratch("log"));
    CHECK(u.status == 2);
  }
}

TEST_CASE("an interrupted run prints its report, writes its files and exits 130", "[cli]") {
  const std::string channel = "cli-int-" + std::to_string(getpid());
  const std::string rj = scratch("int-replay.json"), jj = scratch("int-jitter.json"), hg = scratch("int.hgrm");
  const std::string rlog = scratch("int-replay.log"), jlog = scratch("int-jitter.log");
  // Replay paces slowly and endlessly; jitter measures it until interrupted.
  const Started r = start({build_program(kReplay), "--channel", channel, "--quiet", "--rate", "2000", "--count", "0",
                           "--wait-subscribers", "1", "--wait-timeout-ms", "30000", "--json", rj},
                          rlog);
  const Started j = start({build_program(kJitter), "--channel", channel, "--quiet", "--attach-timeout-ms", "30000",
                           "--json", jj, "--hgrm", hg},
                          jlog);
  REQUIRE(wait_for_output(jlog, "subscribed to", std::chrono::seconds(30)));
  REQUIRE(wait_for_output(rlog, "publishing", std::chrono::seconds(30)));
  kill(j.pid, SIGINT);
  const int jitter_status = wait_exit(j.pid, std::chrono::seconds(30));
  kill(r.pid, SIGTERM);
  const int replay_status = wait_exit(r.pid, std::chrono::seconds(30));
  const std::string jout = slurp(jlog), rout = slurp(rlog);
  INFO("jitter:\n" << jout << "\nreplay:\n" << rout);
  CHECK(jitter_status == 130);
  CHECK(replay_status == 130);
  CHECK_THAT(jout, Catch::Contains("ended: interrupted"));
  CHECK(json::parse(slurp(jj))["ended"] == "interrupted");
  CHECK_THAT(slurp(hg), Catch::Contains("Percentile"));
  CHECK(json::parse(slurp(rj))["stopped_early"] == true);
  CHECK_THAT(rout, Catch::Contains("published"));
  for (const auto& p : {rj, jj, hg, rlog, jlog}) std::filesystem::remove(p);
}

TEST_CASE("rc and ud on a host without an RDMA device: one message, exit 1", "[cli][no-rdma]") {
  if (std::filesystem::exists("/dev/infiniband/rdma_cm") && std::filesystem::exists("/sys/class/infiniband")) {
    WARN("this host has an RDMA device: the no-device error cannot be seen here");
    return;
  }
  const std::string config = write("rdma.toml", "[rdma]\naddress = \"127.0.0.1\"\n");
  const std::vector<std::vector<std::string>> runs = {
      {build_program(kReplay), "--transport", "rc", "--wait-subscribers", "0"},
      {build_program(kReplay), "--transport", "ud", "--wait-subscribers", "0"},
      {build_program(kJitter), "--transport", "rc", "--attach-timeout-ms", "100"},
      {build_program(kJitter), "--transport", "ud", "--attach-timeout-ms", "100"},
      {build_program(kJitter), "--transport", "rc", "--mode", "pingpong", "--attach-timeout-ms", "100"},
  };
  for (const auto& args : runs) {
    const Finished f = run_program(cat(cat(args, {"-c", config}), {"--quiet"}), scratch("log"), std::chrono::seconds(30));
    const std::string transport = args[2];
    INFO(f.output);
    CHECK(f.status == 1);
    CHECK_THAT(f.output, Catch::Contains("no RDMA device found (") &&
                             Catch::Contains("this host cannot use transport " + transport + "; run tickrail-doctor"));
    CHECK_THAT(f.output, !Catch::Contains("rdma_create_event_channel"));
  }
  std::filesystem::remove(config);
}

TEST_CASE("doctor --config rejects an unknown key naming it and the file, exit 2", "[cli]") {
  const std::string config = write("doctor.toml", "transport = \"shm\"\n[subscriber]\npolicy = \"drop\"\nplicy = \"x\"\n");
  const Finished f = run_program({build_program("apps/doctor/tickrail-doctor"), "--config", config, "--only", "memlock"},
                                 scratch("log"));
  INFO(f.output);
  CHECK(f.status == 2);
  CHECK_THAT(f.output, Catch::Contains(config + ":4") && Catch::Contains("subscriber.plicy"));
  // The same file without the typo is checked.
  const std::string good = write("doctor-good.toml", "transport = \"shm\"\n[subscriber]\npolicy = \"drop\"\n");
  const Finished g = run_program({build_program("apps/doctor/tickrail-doctor"), "--config", good, "--only", "memlock"},
                                 scratch("log"));
  INFO(g.output);
  CHECK(g.status != 2);
  for (const auto& p : {config, good}) std::filesystem::remove(p);
}

namespace {

const std::string kRecord = "apps/record/tickrail-record";

// True when `dir` holds no file.
bool empty_dir(const std::string& dir) {
  return std::filesystem::is_empty(dir);
}

}  // namespace

TEST_CASE("jitter: SIGTERM while waiting for the channel exits 130 with its report", "[cli]") {
  for (const bool two_lines : {false, true}) {
    const std::string channel = "cli-attach-" + std::to_string(getpid());
    const std::string j = scratch("attach.json"), log = scratch("attach.log");
    // No publisher: jitter waits up to a minute for the channel (each line's, with two).
    std::vector<std::string> cmd = {build_program(kJitter), "--channel", channel, "--quiet",
                                    "--attach-timeout-ms", "60000", "--json", j};
    if (two_lines) cmd.insert(cmd.end(), {"--line-b", channel + "-b"});
    const Started s = start(cmd, log);
    REQUIRE(wait_catching(s.pid, SIGTERM, std::chrono::seconds(20)));
    kill(s.pid, SIGTERM);
    const int status = wait_exit(s.pid, std::chrono::seconds(30));
    const std::string out = slurp(log);
    INFO((two_lines ? "two lines: " : "one line: ") << out);
    CHECK(status == 130);
    CHECK_THAT(out, Catch::Contains("interrupted while waiting for the channel") && Catch::Contains("ended: interrupted"));
    CHECK(json::parse(slurp(j))["ended"] == "interrupted");
    for (const auto& p : {j, log}) std::filesystem::remove(p);
  }
}

TEST_CASE("record: SIGINT or SIGTERM ends the wait for the channel, exit 130, no file made", "[cli]") {
  for (const int sig : {SIGINT, SIGTERM}) {
    const std::string channel = "cli-rec-" + std::to_string(getpid()) + "-" + std::to_string(sig);
    const std::string rec = scratch("wait.rec"), log = scratch("wait.log");
    const Started s = start({build_program(kRecord), "--channel", channel, "-q", "--attach-timeout-ms", "86400000", rec},
                            log);
    REQUIRE(wait_catching(s.pid, sig, std::chrono::seconds(20)));
    kill(s.pid, sig);
    const int status = wait_exit(s.pid, std::chrono::seconds(30));
    const std::string out = slurp(log);
    INFO("signal " << sig << ": " << out);
    CHECK(status == 130);
    CHECK_THAT(out, Catch::Contains("ended: interrupted"));
    CHECK_FALSE(std::filesystem::exists(rec));
    for (const auto& p : {rec, log}) std::filesystem::remove(p);
  }
}

TEST_CASE("record: a failed attach leaves no file, and the same command can be run again", "[cli]") {
  const std::string rec = scratch("missing.rec");
  const std::vector<std::string> args = {build_program(kRecord), "--channel", "cli-rec-none-" + std::to_string(getpid()),
                                         "-q", "--attach-timeout-ms", "100", rec};
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Finished f = run_program(args, scratch("log"));
    INFO("attempt " << attempt << ": " << f.output);
    CHECK(f.status == 1);
    CHECK_THAT(f.output, Catch::Contains("no such channel") && !Catch::Contains("exists"));
    CHECK_FALSE(std::filesystem::exists(rec));
  }
  // An existing recording without --force is still refused before any wait.
  std::ofstream(rec) << "kept";
  const Finished f = run_program(args, scratch("log"));
  INFO(f.output);
  CHECK(f.status == 2);
  CHECK_THAT(f.output, Catch::Contains("exists (--force replaces it)"));
  CHECK(slurp(rec) == "kept");
  std::filesystem::remove(rec);
}

TEST_CASE("an input that cannot be opened is named with the system's reason", "[cli]") {
  const std::string missing = scratch("nonexistent.itch");
  const Finished f = run_program({build_program(kReplay), "--channel", "cli-open", "--wait-subscribers", "0", missing},
                                 scratch("log"));
  INFO(f.output);
  CHECK(f.status == 1);
  CHECK_THAT(f.output, Catch::Contains(missing) && Catch::Contains("No such file or directory"));
  // A directory is found before the wait for subscribers (a day here), not at the first read.
  const std::string dir = scratch("input-dir");
  std::filesystem::create_directories(dir);
  const Finished d = run_program({build_program(kReplay), "--channel", "cli-open", "--wait-subscribers", "1",
                                  "--wait-timeout-ms", "86400000", dir},
                                 scratch("log"), std::chrono::seconds(30));
  INFO(d.output);
  CHECK(d.status == 1);
  CHECK_THAT(d.output, Catch::Contains(dir) && Catch::Contains("Is a directory"));
  std::filesystem::remove(dir);
}

TEST_CASE("a report that cannot be written to stdout is said on stderr, exit 1", "[cli]") {
  const std::string dir = scratch("statdir");
  std::filesystem::create_directories(dir);
  const std::string log = scratch("stdout.log");
  SECTION("tickrail-stat --once > /dev/full") {
    const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
    REQUIRE(full >= 0);
    const Started s = start_with_stdout({build_program("apps/stat/tickrail-stat"), "--once", "--dir", dir}, full, log);
    ::close(full);
    const int status = wait_exit(s.pid, std::chrono::seconds(30));
    INFO(slurp(log));
    CHECK(status == 1);
    CHECK_THAT(slurp(log), Catch::Contains("cannot write the report to standard output: No space left on device"));
  }
  SECTION("tickrail-replay into a pipe whose reader is gone (| head): no SIGPIPE, counters file removed") {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    ::close(p[0]);  // the reader has gone: every write fails with EPIPE (SIGPIPE by default)
    const Started s = start_with_stdout({build_program(kReplay), "--channel", "cli-pipe-" + std::to_string(getpid()),
                                         "--quiet", "--wait-subscribers", "0", "--count", "100", "--max"},
                                        p[1], log, {"TICKRAIL_STAT_DIR=" + dir});
    ::close(p[1]);
    const int status = wait_exit(s.pid, std::chrono::seconds(30));
    INFO(slurp(log));
    CHECK(status == 1);
    CHECK_THAT(slurp(log), Catch::Contains("cannot write the report to standard output: Broken pipe"));
    CHECK(empty_dir(dir));
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove(log);
}

TEST_CASE("doctor -c checks the programs' sections, refuses a directory, takes several files", "[cli]") {
  const std::string doctor = build_program("apps/doctor/tickrail-doctor");
  const std::string good = write("doc-ok.toml", "transport = \"shm\"\n[replay]\nbook = true\n[jitter]\nmode = \"one-way\"\n"
                                                "[record]\nblock_ticks = 1024\n");
  struct Case {
    std::string section, key;
  };
  for (const Case& c : std::vector<Case>{{"replay", "bok"}, {"jitter", "mdoe"}, {"record", "blok_ticks"}}) {
    const std::string bad = write("doc-" + c.section + ".toml", "transport = \"shm\"\n[" + c.section + "]\n" + c.key + " = 1\n");
    // Alone with -c, and as the second of two --config.
    for (const auto& args : {std::vector<std::string>{doctor, "-c", bad, "--only", "memlock"},
                             std::vector<std::string>{doctor, "--config", good, "--config", bad, "--only", "memlock"}}) {
      const Finished f = run_program(args, scratch("log"));
      INFO(f.output);
      CHECK(f.status == 2);
      CHECK_THAT(f.output, Catch::Contains(bad + ":3") && Catch::Contains(c.section + "." + c.key));
    }
    std::filesystem::remove(bad);
  }
  const Finished ok = run_program({doctor, "-c", good, "--config", good, "--only", "memlock"}, scratch("log"));
  INFO(ok.output);
  CHECK(ok.status != 2);
  const std::string dir = scratch("doc-dir");
  std::filesystem::create_directories(dir);
  const Finished d = run_program({doctor, "--config", dir, "--only", "memlock"}, scratch("log"));
  INFO(d.output);
  CHECK(d.status == 2);
  CHECK_THAT(d.output, Catch::Contains(dir));
  std::filesystem::remove(dir);
  std::filesystem::remove(good);
}

TEST_CASE("record --csv: /dev/stdout is an output, not an existing file; --json checked first", "[cli]") {
  const std::string not_rec = write("not-a.rec", "this is not a recording\n");
  // Not refused as existing (exit 2): the input is read, and is not a recording (exit 1).
  const Finished f = run_program({build_program(kRecord), "--csv", "/dev/stdout", not_rec}, scratch("log"));
  INFO(f.output);
  CHECK(f.status == 1);
  CHECK_THAT(f.output, !Catch::Contains("exists"));
  // A regular file under /dev is a file like any other: kept, without --force.
  const std::string shm_csv = "/dev/shm/tickrail-test-" + std::to_string(getpid()) + ".csv";
  { std::ofstream(shm_csv) << "kept"; }
  const Finished k = run_program({build_program(kRecord), "--csv", shm_csv, not_rec}, scratch("log"));
  INFO(k.output);
  CHECK(k.status == 2);
  CHECK_THAT(k.output, Catch::Contains("exists (--force replaces it)"));
  CHECK(slurp(shm_csv) == "kept");
  std::filesystem::remove(shm_csv);
  // --json that cannot be written is refused before --info or --csv runs.
  const std::string bad_json = scratch("no-such-dir") + "/out.json";
  for (const std::vector<std::string>& command : {std::vector<std::string>{"--info"},
                                                  std::vector<std::string>{"--csv", scratch("out.csv")}}) {
    auto args = cat({build_program(kRecord), "--json", bad_json}, command);
    args.push_back(not_rec);
    const Finished j = run_program(args, scratch("log"));
    INFO(j.output);
    CHECK(j.status == 2);
    CHECK_THAT(j.output, Catch::Contains("--json") && Catch::Contains(bad_json));
    CHECK_FALSE(std::filesystem::exists(scratch("out.csv")));
  }
  std::filesystem::remove(not_rec);
}

TEST_CASE("TICKRAIL_STATS with a value it does not know is warned about, naming it", "[cli]") {
  const std::string log = scratch("stats-env.log");
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(null >= 0);
  const Started s = start_with_stdout({build_program(kReplay), "--channel", "cli-env-" + std::to_string(getpid()),
                                       "--quiet", "--wait-subscribers", "0", "--count", "10", "--max"},
                                      null, log, {"TICKRAIL_STATS=bogus"});
  ::close(null);
  const int status = wait_exit(s.pid, std::chrono::seconds(30));
  const std::string out = slurp(log);
  INFO(out);
  CHECK(status == 0);
  CHECK_THAT(out, Catch::Contains("TICKRAIL_STATS='bogus'") && Catch::Contains("the counters stay on"));
  std::filesystem::remove(log);
}
