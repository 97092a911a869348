// End to end over shared memory with the two real programs: tickrail-jitter subscribes,
// tickrail-replay publishes a synthetic feed and closes the channel; jitter must have received
// every tick replayed, none lost, and have ended because the publisher closed.
//
// The programs are found in the build tree (the test runs from the build root), or through
// $TICKRAIL_REPLAY and $TICKRAIL_JITTER. The same test runs over RDMA in the rig with
// TICKRAIL_E2E_TRANSPORT=rc or ud, TICKRAIL_RDMA_ADDR (and optionally TICKRAIL_RDMA_DEV): both
// programs then get a config file naming the transport and the address.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../thread_census.hpp"
#include "core/last_value.hpp"
#include "core/thread.hpp"
#include "tickrail/ring.hpp"
#include "transport/shm/shm_publisher.hpp"
#include "../docs_check.hpp"
#include "program.hpp"

namespace {

std::string program(const char* env, const char* build_path) {
  if (const char* p = std::getenv(env); p != nullptr && *p != '\0') return p;
  return (std::filesystem::current_path() / build_path).string();
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  return tickrail::test::start(args, log).pid;
}

using tickrail::test::slurp;

int wait_bounded(pid_t pid, std::chrono::seconds timeout) { return tickrail::test::wait_exit(pid, timeout); }

// Config arguments for both programs: none for shared memory, a written TOML file for RDMA.
std::vector<std::string> transport_args(const std::string& base) {
  const char* t = std::getenv("TICKRAIL_E2E_TRANSPORT");
  if (t == nullptr || *t == '\0' || std::string(t) == "shm") return {};
  const char* addr = std::getenv("TICKRAIL_RDMA_ADDR");
  const char* dev = std::getenv("TICKRAIL_RDMA_DEV");
  REQUIRE(addr != nullptr);
  const std::string path = base + ".toml";
  // A guest starved by its host can stall a process for over a second: the subscriber's default
  // 1 s publisher_timeout would end a run whose data all arrive.
  std::ofstream(path) << "transport = \"" << t << "\"\n[rdma]\naddress = \"" << addr << "\"\n"
                      << "device = \"" << (dev != nullptr ? dev : "") << "\"\n"
                      << "[subscriber]\npublisher_timeout_ms = 5000\n";
  return {"-c", path};
}

struct Run {
  nlohmann::json replay, jitter;
  int replay_rc = 0, jitter_rc = 0;
  std::string replay_log, jitter_log;
  std::string svg, hgrm;
};

Run replay_to_jitter(const std::string& tag, const std::vector<std::string>& replay_args) {
  const std::string replay = program("TICKRAIL_REPLAY", "apps/replay/tickrail-replay");
  const std::string jitter = program("TICKRAIL_JITTER", "apps/jitter/tickrail-jitter");
  REQUIRE(std::filesystem::exists(replay));
  REQUIRE(std::filesystem::exists(jitter));
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("tickrail-e2e-" + tag + "-" + std::to_string(getpid())))
                               .string();
  const std::string channel = "e2e-" + tag + "-" + std::to_string(getpid());

  const std::vector<std::string> config = transport_args(base);
  const bool rdma = !config.empty();
  // Shared memory: jitter first, it waits (bounded) for the channel; replay waits (bounded) for
  // it. RDMA: the publisher must listen before a subscriber can connect, so replay first.
  std::vector<std::string> j_args = {jitter, "--channel", channel, "--attach-timeout-ms", "60000",
                                     "--quiet", "--json", base + "-jitter.json", "--hgrm",
                                     base + ".hgrm", "--svg", base + ".svg"};
  j_args.insert(j_args.begin() + 1, config.begin(), config.end());
  std::vector<std::string> r_args = {replay, "--channel", channel, "--quiet",
                                     "--wait-subscribers", "1", "--wait-timeout-ms", "60000",
                                     "--json", base + "-replay.json"};
  r_args.insert(r_args.begin() + 1, config.begin(), config.end());
  r_args.insert(r_args.end(), replay_args.begin(), replay_args.end());
  pid_t j = -1, r = -1;
  if (rdma) {
    r = spawn(r_args, base + "-replay.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    j = spawn(j_args, base + "-jitter.log");
  } else {
    j = spawn(j_args, base + "-jitter.log");
    r = spawn(r_args, base + "-replay.log");
  }

  Run run;
  run.replay_rc = wait_bounded(r, std::chrono::seconds(240));
  run.jitter_rc = wait_bounded(j, std::chrono::seconds(60));
  run.replay_log = slurp(base + "-replay.log");
  run.jitter_log = slurp(base + "-jitter.log");
  INFO("replay log:\n" << run.replay_log << "\njitter log:\n" << run.jitter_log);
  REQUIRE(run.replay_rc == 0);
  REQUIRE(run.jitter_rc == 0);
  run.replay = nlohmann::json::parse(slurp(base + "-replay.json"));
  run.jitter = nlohmann::json::parse(slurp(base + "-jitter.json"));
  run.hgrm = slurp(base + ".hgrm");
  run.svg = slurp(base + ".svg");
  CHECK_THAT(run.hgrm, Catch::Contains("Percentile"));
  CHECK_THAT(run.svg, Catch::Contains("<svg"));
  for (const char* suffix :
       {"-jitter.json", "-replay.json", "-jitter.log", "-replay.log", ".hgrm", ".svg", ".toml"}) {
    std::error_code ec;
    std::filesystem::remove(base + suffix, ec);
  }
  return run;
}

// Over RDMA in the rig, Soft-RoCE under an emulated CPU moves a few thousand datagrams a second
// on a busy host: a tenth of the ticks still crosses every ring and staging buffer many times.
std::uint64_t max_rate_ticks() {
  const char* t = std::getenv("TICKRAIL_E2E_TRANSPORT");
  return (t == nullptr || *t == '\0' || std::string(t) == "shm") ? 200000 : 20000;
}

std::string with_commas(std::uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

}  // namespace

TEST_CASE("replayToJitterOverShmDeliversEveryTickAsFastAsPossible", "[e2e]") {
  const std::uint64_t n = max_rate_ticks();
  const Run run = replay_to_jitter("max", {"--max", "--count", std::to_string(n)});
  INFO("jitter log:\n" << run.jitter_log);
  CHECK(run.replay["ticks_published"] == n);
  CHECK(run.replay["unheard"] == 0);
  CHECK(run.jitter["count"] == run.replay["ticks_published"]);
  CHECK(run.jitter["lost"] == 0);
  CHECK(run.jitter["first_seq"] == 1);
  CHECK(run.jitter["last_seq"] == n);
  CHECK(run.jitter["ended"] == "publisher_gone");
  CHECK(run.jitter["figure"] == "one-way");
  CHECK_THAT(run.jitter_log, Catch::Contains("ONE-WAY"));
  CHECK(run.replay["subscribers"].size() == 1);
  // The plot names what it shows, draws the three series and marks the latency's percentiles.
  CHECK_THAT(run.svg, Catch::Contains("ONE-WAY latency"));
  CHECK_THAT(run.svg, Catch::Contains(with_commas(n) + " samples  |  host "));
  for (const char* part : {"data-name=\"one-way latency\"", "data-name=\"inter-arrival\"",
                           "data-name=\"poll gap\"", "data-label=\"p50\"", "data-label=\"p99.99\"",
                           "data-label=\"max\""}) {
    CHECK_THAT(run.svg, Catch::Contains(part));
  }
  // Every .hgrm row starts with a blank, as plotters expect.
  std::istringstream rows(run.hgrm);
  for (std::string line; std::getline(rows, line);) {
    if (!line.empty() && line[0] != '#') CHECK(line[0] == ' ');
  }
  // Every key of both reports is in docs/apps.md.
  tickrail::test::require_json_documented(run.replay, "### JSON of tickrail-replay",
                                          {"messages_by_type", "ticks_by_kind"});
  tickrail::test::require_json_documented(run.jitter, "### JSON of tickrail-jitter");
}

TEST_CASE("replayToJitterOverShmAtAFixedRateWithTheBook", "[e2e]") {
  const Run run = replay_to_jitter("rate", {"--rate", "200000", "--count", "50000", "--book"});
  const std::uint64_t published = run.replay["ticks_published"];
  CHECK(published > 0);
  // Every tick had its subscriber: the book is made before the publisher listens (over RDMA a
  // subscriber connecting while the book's table was being touched found nobody serving it, or
  // heard nothing for a second and left before the first tick).
  CHECK(run.replay["unheard"] == 0);
  CHECK(run.replay["lag"]["count"] == published);
  // It took everything before the channel closed, and the publisher knew (over RC, from the
  // credit a subscriber returns once the stream pauses, not only every credit interval).
  REQUIRE(run.replay["subscribers"].size() == 1);
  CHECK(run.replay["subscribers"][0]["lag"] == 0);
  CHECK(run.jitter["count"] == published);
  CHECK(run.jitter["lost"] == 0);
  CHECK(run.jitter["ended"] == "publisher_gone");
  REQUIRE(run.replay.contains("book"));
  REQUIRE(run.replay.contains("lag"));
  tickrail::test::require_json_documented(run.replay, "### JSON of tickrail-replay",
                                          {"messages_by_type", "ticks_by_kind"});
}

// Ping-pong: the measuring end publishes pings, the echo end (a second tickrail-jitter) publishes
// each back; the figure is RTT/2 on the measuring end's clock, and every ping is answered.
TEST_CASE("jitterPingPongReportsRttHalfWithEveryPingAnswered", "[e2e][pingpong]") {
  const std::string jitter = program("TICKRAIL_JITTER", "apps/jitter/tickrail-jitter");
  REQUIRE(std::filesystem::exists(jitter));
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("tickrail-pingpong-" + std::to_string(getpid())))
                               .string();
  const std::string channel = "pp-" + std::to_string(getpid());
  const std::vector<std::string> config = transport_args(base);
  std::vector<std::string> echo_args = {jitter, "--mode", "echo", "--channel", channel,
                                        "--attach-timeout-ms", "60000"};
  std::vector<std::string> ping_args = {jitter, "--mode", "pingpong", "--channel", channel,
                                        "--attach-timeout-ms", "60000", "--count", "3000",
                                        "--warmup", "200", "--quiet", "--json", base + ".json"};
  echo_args.insert(echo_args.begin() + 1, config.begin(), config.end());
  ping_args.insert(ping_args.begin() + 1, config.begin(), config.end());
  // The measuring end publishes the forward stream: it starts first, the echo end attaches.
  const pid_t p = spawn(ping_args, base + "-ping.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const pid_t e = spawn(echo_args, base + "-echo.log");
  const int ping_rc = wait_bounded(p, std::chrono::seconds(240));
  const int echo_rc = wait_bounded(e, std::chrono::seconds(60));
  const std::string ping_log = slurp(base + "-ping.log");
  const std::string echo_log = slurp(base + "-echo.log");
  INFO("ping log:\n" << ping_log << "\necho log:\n" << echo_log);
  REQUIRE(ping_rc == 0);
  CHECK(echo_rc == 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(base + ".json"));
  CHECK(j["figure"] == "rtt/2");
  CHECK(j["ended"] == "count");
  CHECK(j["count"] == 3000);
  CHECK(j["lost"] == 0);
  CHECK(j["timeouts"] == 0);
  CHECK(j["p50_ns"].get<double>() > 0);
  CHECK_THAT(ping_log, Catch::Contains("RTT/2 (ping-pong)"));
  CHECK_THAT(echo_log, Catch::Contains("pings echoed"));
  tickrail::test::require_json_documented(j, "### JSON of tickrail-jitter");
  for (const char* suffix : {".json", "-ping.log", "-echo.log", ".toml"}) {
    std::error_code ec;
    std::filesystem::remove(base + suffix, ec);
  }
}

// Two replays of one input on two channels, read as one stream over two lines: every tick
// delivered once and in order, each line's share and lead reported, and both lines ending.
TEST_CASE("jitterOverTwoLinesDeliversEveryTickOnceAndSaysWhichLineLed", "[e2e][failover]") {
  const std::string replay = program("TICKRAIL_REPLAY", "apps/replay/tickrail-replay");
  const std::string jitter = program("TICKRAIL_JITTER", "apps/jitter/tickrail-jitter");
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("tickrail-failover-" + std::to_string(getpid())))
                               .string();
  const std::string a = "fo-a-" + std::to_string(getpid());
  const std::string b = "fo-b-" + std::to_string(getpid());
  constexpr std::uint64_t n = 100000;
  // A window as long as the run: every second copy is timed, however far the lines drift apart.
  const pid_t j = spawn({jitter, "--channel", a, "--line-b", b, "--failover-window", "1048576", "--attach-timeout-ms",
                         "60000", "--quiet", "--json", base + ".json"},
                        base + "-jitter.log");
  pid_t r[2];
  for (int i = 0; i < 2; ++i) {
    r[i] = spawn({replay, "--channel", i == 0 ? a : b, "--max", "--count", std::to_string(n), "--quiet",
                  "--wait-subscribers", "1", "--wait-timeout-ms", "60000"},
                 base + "-replay" + std::to_string(i) + ".log");
  }
  const int ra = wait_bounded(r[0], std::chrono::seconds(120));
  const int rb = wait_bounded(r[1], std::chrono::seconds(120));
  const int jr = wait_bounded(j, std::chrono::seconds(60));
  const std::string log = slurp(base + "-jitter.log");
  INFO("jitter log:\n" << log << "\nreplay logs:\n" << slurp(base + "-replay0.log") << slurp(base + "-replay1.log"));
  REQUIRE(ra == 0);
  REQUIRE(rb == 0);
  REQUIRE(jr == 0);
  const nlohmann::json js = nlohmann::json::parse(slurp(base + ".json"));
  CHECK(js["count"] == n);
  CHECK(js["lost"] == 0);
  CHECK(js["first_seq"] == 1);
  CHECK(js["last_seq"] == n);
  CHECK(js["ended"] == "publisher_gone");
  const nlohmann::json& fo = js["failover"];
  CHECK(fo["delivered"] == n);
  CHECK(fo["gaps"] == 0);
  CHECK(fo["skipped"] == 0);
  std::uint64_t first = 0, timed = 0;
  for (const auto& line : fo["lines"]) {
    // Each line brought every tick: its own first copies and the other's duplicates.
    CHECK(line["first"].get<std::uint64_t>() + line["duplicates"].get<std::uint64_t>() == n);
    CHECK(line["downs"] == 1);  // its publisher closed at the end
    first += line["first"].get<std::uint64_t>();
    timed += line["lead_ns"]["count"].get<std::uint64_t>();
  }
  CHECK(first == n);
  CHECK(timed == n);
  CHECK_THAT(log, Catch::Contains("line A shm '" + a + "'"));
  CHECK_THAT(log, Catch::Contains("B led by"));
  tickrail::test::require_json_documented(js, "### JSON of tickrail-jitter");
  for (const char* suffix : {".json", "-jitter.log", "-replay0.log", "-replay1.log"}) {
    std::error_code ec;
    std::filesystem::remove(base + suffix, ec);
  }
}

namespace {

struct Census {
  std::vector<tickrail::test::ThreadSeen> replay, jitter;  // every thread but the main one
  std::vector<int> replay_main, jitter_main;               // the main thread's cpus
};

// The threads other than the main one, once every one is named (a thread names itself once it
// is placed) and `wanted` are among them; bounded.
std::vector<tickrail::test::ThreadSeen> settled_threads(pid_t pid, std::vector<int>& main_cpus,
                                                        const std::vector<std::string>& wanted) {
  using tickrail::test::ThreadSeen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<ThreadSeen> all;
  for (;;) {
    all = tickrail::test::threads_of(pid);
    const bool named = std::all_of(all.begin(), all.end(), [&](const ThreadSeen& t) {
      return t.tid == pid || tickrail::test::is_tickrail(t);
    });
    const bool there = std::all_of(wanted.begin(), wanted.end(), [&](const std::string& w) {
      return std::any_of(all.begin(), all.end(), [&](const ThreadSeen& t) { return t.name == w; });
    });
    if ((named && there) || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  INFO("threads of " << pid << ":\n" << tickrail::test::describe(all));
  std::vector<ThreadSeen> others;
  for (const ThreadSeen& t : all) {
    if (t.tid == pid) {
      main_cpus = t.cpus;
      continue;
    }
    CHECK(tickrail::test::is_tickrail(t));
    others.push_back(t);
  }
  for (const std::string& w : wanted) {
    CHECK(std::any_of(others.begin(), others.end(), [&](const ThreadSeen& t) { return t.name == w; }));
  }
  return others;
}

// The publisher's background thread of the transport under test.
std::string publisher_thread() {
  const char* t = std::getenv("TICKRAIL_E2E_TRANSPORT");
  const std::string k = t != nullptr ? t : "";
  return k == "rc" ? "tr-rc-cm" : k == "ud" ? "tr-ud-recov" : "tr-shm-cond";
}

// The subscriber's background thread of the transport under test, once it is connected (shm:
// none of its own).
std::vector<std::string> subscriber_threads() {
  const char* t = std::getenv("TICKRAIL_E2E_TRANSPORT");
  const std::string k = t != nullptr ? t : "";
  if (k == "rc") return {"tr-log", "tr-rc-cm"};
  if (k == "ud") return {"tr-log", "tr-ud-cond"};
  return {"tr-log"};
}

// replay and jitter streaming to each other with extra arguments, their threads read from /proc
// while they run; then both stopped with SIGINT.
Census census(const std::string& tag, const std::vector<std::string>& r_extra,
              const std::vector<std::string>& j_extra) {
  const std::string replay = program("TICKRAIL_REPLAY", "apps/replay/tickrail-replay");
  const std::string jitter = program("TICKRAIL_JITTER", "apps/jitter/tickrail-jitter");
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("tickrail-threads-" + tag + "-" + std::to_string(getpid())))
                               .string();
  const std::string channel = "thr-" + tag + "-" + std::to_string(getpid());
  const std::vector<std::string> config = transport_args(base);
  std::vector<std::string> j_args = {jitter, "--channel", channel, "--attach-timeout-ms", "60000",
                                     "--quiet", "--duration", "120"};
  j_args.insert(j_args.begin() + 1, config.begin(), config.end());
  j_args.insert(j_args.end(), j_extra.begin(), j_extra.end());
  std::vector<std::string> r_args = {replay, "--channel", channel, "--quiet", "--rate", "1000",
                                     "--count", "0", "--duration", "120", "--wait-subscribers", "1",
                                     "--wait-timeout-ms", "60000"};
  r_args.insert(r_args.begin() + 1, config.begin(), config.end());
  r_args.insert(r_args.end(), r_extra.begin(), r_extra.end());
  const bool rdma = !config.empty();
  pid_t r = -1;
  pid_t j = -1;
  if (rdma) {  // the publisher listens first
    r = spawn(r_args, base + "-replay.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    j = spawn(j_args, base + "-jitter.log");
  } else {
    j = spawn(j_args, base + "-jitter.log");
    r = spawn(r_args, base + "-replay.log");
  }
  Census c;
  {
    INFO("replay log:\n" << slurp(base + "-replay.log") << "\njitter log:\n" << slurp(base + "-jitter.log"));
    c.replay = settled_threads(r, c.replay_main, {publisher_thread(), "tr-stats", "tr-log"});
    c.jitter = settled_threads(j, c.jitter_main, subscriber_threads());
  }
  for (pid_t p : {r, j}) {
    CHECK(tickrail::test::wait_catching(p, SIGINT, std::chrono::seconds(30)));
    kill(p, SIGINT);
  }
  const int r_rc = wait_bounded(r, std::chrono::seconds(60));
  const int j_rc = wait_bounded(j, std::chrono::seconds(60));
  INFO("replay log:\n" << slurp(base + "-replay.log") << "\njitter log:\n" << slurp(base + "-jitter.log"));
  CHECK((r_rc == 130 || r_rc == 0));
  CHECK((j_rc == 130 || j_rc == 0));
  for (const char* suffix : {"-replay.log", "-jitter.log", ".toml"}) {
    std::error_code ec;
    std::filesystem::remove(base + suffix, ec);
  }
  return c;
}

bool has_cpus_0_and_1() {
  const std::vector<int> cpus = tickrail::process_cpus();
  return cpus.size() >= 2 && cpus[0] == 0 && cpus[1] == 1;
}

}  // namespace

// --cpu pins the program's hot thread; tickrail's background threads then run on the other cpus.
TEST_CASE("theProgramsCpuKeepsTickrailsThreadsOffThePinnedCore", "[e2e][threads]") {
  if (!has_cpus_0_and_1()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  const Census c = census("cpu", {"--cpu", "0"}, {"--cpu", "1"});
  CHECK(c.replay_main == std::vector<int>{0});
  CHECK(c.jitter_main == std::vector<int>{1});
  for (const auto& t : c.replay) {
    INFO("replay's " << t.name << " may run on " << tickrail::format_cpu_list(t.cpus));
    CHECK_FALSE(tickrail::test::has_cpu(t, 0));
  }
  for (const auto& t : c.jitter) {
    INFO("jitter's " << t.name << " may run on " << tickrail::format_cpu_list(t.cpus));
    CHECK_FALSE(tickrail::test::has_cpu(t, 1));
  }
}

// --housekeeping-cpus puts them where it says, over a config file's housekeeping_cpus.
TEST_CASE("housekeepingCpusFlagBeatsTheConfigFile", "[e2e][threads]") {
  if (!has_cpus_0_and_1()) {
    WARN("needs cpus 0 and 1");
    return;
  }
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("tickrail-hk-" + std::to_string(getpid()) + ".toml"))
                               .string();
  std::ofstream(file) << "housekeeping_cpus = \"0\"\n";
  const Census c = census("flag", {"-c", file, "--housekeeping-cpus", "1"},
                          {"-c", file, "--housekeeping-cpus", "1"});
  std::filesystem::remove(file);
  for (const auto* side : {&c.replay, &c.jitter}) {
    for (const auto& t : *side) {
      INFO(t.name << " may run on " << tickrail::format_cpu_list(t.cpus));
      CHECK(t.cpus == std::vector<int>{1});
    }
  }
}

TEST_CASE("aBadHousekeepingCpusFlagIsAUsageError", "[e2e][threads]") {
  const std::string jitter = program("TICKRAIL_JITTER", "apps/jitter/tickrail-jitter");
  const auto f = tickrail::test::run_program({jitter, "--housekeeping-cpus", "1-x"},
                                             (std::filesystem::temp_directory_path() /
                                              ("tickrail-hk-bad-" + std::to_string(getpid()) + ".log"))
                                                 .string());
  CHECK(f.status == 2);
  CHECK_THAT(f.output, Catch::Contains("--housekeeping-cpus") && Catch::Contains("'1-x'"));
  // A cpu this process may not use: refused before anything starts, naming the option, the cpu
  // and the cpus it may use.
  const std::string replay = program("TICKRAIL_REPLAY", "apps/replay/tickrail-replay");
  const auto g = tickrail::test::run_program({replay, "--count", "1", "--housekeeping-cpus", "0,4000"},
                                             (std::filesystem::temp_directory_path() /
                                              ("tickrail-hk-range-" + std::to_string(getpid()) + ".log"))
                                                 .string());
  CHECK(g.status == 2);
  CHECK_THAT(g.output, Catch::Contains("tickrail-replay: error: --housekeeping-cpus: '0,4000': cpu 4000") &&
                           Catch::Contains(tickrail::format_cpu_list(tickrail::process_cpus())));
  CHECK_THAT(g.output, !Catch::Contains("publisher:"));  // no publisher was created
}

// A process that may use one cpu only (taskset, a cgroup): its background threads share the hot
// thread's cpu; the program runs to the end and says so once.
TEST_CASE("aProcessWithOneCpuRunsAndWarnsThatItsThreadsShareIt", "[e2e][threads]") {
  const std::string taskset = "/usr/bin/taskset";
  if (!std::filesystem::exists(taskset)) {
    WARN("needs " << taskset);
    return;
  }
  const std::string replay = program("TICKRAIL_REPLAY", "apps/replay/tickrail-replay");
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("tickrail-one-cpu-" + std::to_string(getpid())))
                               .string();
  const std::string cpu = std::to_string(tickrail::process_cpus().front());
  std::vector<std::string> args = {taskset, "-c", cpu, replay, "--cpu", cpu, "--count", "100",
                                   "--rate", "10000", "--wait-subscribers", "0", "--quiet",
                                   "--channel", "one-cpu-" + std::to_string(getpid())};
  const std::vector<std::string> config = transport_args(base);
  args.insert(args.begin() + 4, config.begin(), config.end());
  const auto f = tickrail::test::run_program(args, base + ".log");
  std::error_code ec;
  std::filesystem::remove(base + ".toml", ec);
  INFO(f.output);
  CHECK(f.status == 0);
  CHECK_THAT(f.output, Catch::Contains("may use no other cpu: background threads share it"));
}

// The market's state through the programs (docs/state.md): tickrail-replay --book --state
// publishes a steady stream; one tickrail-jitter is there from the start (block), one with
// --policy conflate is stopped with SIGSTOP for 2 s mid-stream, one joins late with --start
// snapshot. All three end with the same view (--state-out), the conflating one having counted
// what it skipped, the late one having started from a snapshot.
TEST_CASE("replayStateToJittersLateJoinAndConflateEndWithTheSameView", "[e2e][state]") {
  const char* t = std::getenv("TICKRAIL_E2E_TRANSPORT");
  INFO("shared memory only: its load is too much for the rig, which runs ~[state] (RC's table: tests/rdma/rc_state_test.cpp)");
  REQUIRE((t == nullptr || *t == '\0' || std::string(t) == "shm"));
  const std::string replay = program("TICKRAIL_REPLAY", "apps/replay/tickrail-replay");
  const std::string jitter = program("TICKRAIL_JITTER", "apps/jitter/tickrail-jitter");
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("tickrail-e2e-state-" + std::to_string(getpid())))
                               .string();
  const std::string channel = "e2e-state-" + std::to_string(getpid());
  auto jitter_args = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> a = {jitter, "--channel", channel, "--attach-timeout-ms", "60000", "--quiet",
                                  "--json", base + "-" + name + ".json", "--state-out",
                                  base + "-" + name + "-state.json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  std::vector<std::string> keeper_args = jitter_args("keeper", {});
  keeper_args.erase(std::find(keeper_args.begin(), keeper_args.end(), "--quiet"));  // its live line
  const pid_t keeper = spawn(keeper_args, base + "-keeper.log");
  const pid_t slow = spawn(jitter_args("slow", {"--policy", "conflate"}), base + "-slow.log");
  // 4,000,000 input messages (about 1,080,000 ticks with --book) at 200,000 ticks a second: 5 s
  // of stream, with every ring (16,384) lapped many times
  // over by a 2 s stop.
  const pid_t r = spawn({replay, "--channel", channel, "--quiet", "--book", "--state", "--instruments", "50",
                         "--rate", "200000", "--count", "4000000", "--wait-subscribers", "2",
                         "--wait-timeout-ms", "60000", "--json", base + "-replay.json"},
                        base + "-replay.log");
  // Once the stream flows (the keeper's live line counts ticks), stop the slow one for 2 s, and
  // let the late one join meanwhile.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::regex flowing("total [1-9]");
  while (std::chrono::steady_clock::now() < deadline && !std::regex_search(slurp(base + "-keeper.log"), flowing)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(::kill(slow, SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const pid_t late = spawn(jitter_args("late", {"--start", "snapshot"}), base + "-late.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  REQUIRE(::kill(slow, SIGCONT) == 0);

  const int rc_replay = wait_bounded(r, std::chrono::seconds(240));
  const int rc_keeper = wait_bounded(keeper, std::chrono::seconds(60));
  const int rc_slow = wait_bounded(slow, std::chrono::seconds(60));
  const int rc_late = wait_bounded(late, std::chrono::seconds(60));
  INFO("replay:\n" << slurp(base + "-replay.log") << "\nkeeper:\n" << slurp(base + "-keeper.log")
                   << "\nslow:\n" << slurp(base + "-slow.log") << "\nlate:\n" << slurp(base + "-late.log"));
  REQUIRE(rc_replay == 0);
  REQUIRE(rc_keeper == 0);
  REQUIRE(rc_slow == 0);
  REQUIRE(rc_late == 0);
  const auto report = [&](const std::string& name) { return nlohmann::json::parse(slurp(base + "-" + name + ".json")); };
  const auto state = [&](const std::string& name) {
    return nlohmann::json::parse(slurp(base + "-" + name + "-state.json"));
  };
  const nlohmann::json rep = report("replay"), k = report("keeper"), s = report("slow"), l = report("late");
  const std::uint64_t published = rep["ticks_published"];
  CHECK(k["lost"] == 0);
  CHECK(k["count"] == published);
  // The stopped one was lapped, caught up through the table, and counted exactly what it skipped.
  CHECK(s["table"]["conflations"] >= 1);
  CHECK(s["table"]["conflated_entries"] > 0);
  CHECK(s["ring_lost"] > 0);
  CHECK(s["count"].get<std::uint64_t>() + s["ring_lost"].get<std::uint64_t>() == published);
  // The late one started from a snapshot, then went on live from the tick after it.
  CHECK(l["table"]["snapshot"] == true);
  CHECK(l["table"]["snapshot_entries"] > 0);
  CHECK(l["start_seq"] > 1);
  CHECK(l["lost"] == 0);
  CHECK(l["count"].get<std::uint64_t>() == published + 1 - l["first_seq"].get<std::uint64_t>());
  tickrail::test::require_json_documented(l, "### JSON of tickrail-jitter");
  // The three views are one.
  const nlohmann::json ks = state("keeper");
  CHECK(ks["instruments"].size() > 0);
  CHECK(ks["position"] == published + 1);
  CHECK(state("slow") == ks);
  CHECK(state("late") == ks);
  CHECK_THAT(slurp(base + "-late.log"), Catch::Contains("snapshot: "));
  for (const char* name : {"replay", "keeper", "slow", "late"}) {
    std::error_code ec;
    for (const std::string suffix : {".json", ".log", "-state.json"}) std::filesystem::remove(base + "-" + name + suffix, ec);
  }
}

// A snapshot that cannot complete: the publisher's writer stopped in the middle of an entry (it
// stays busy, as after a kill -9 there), so the table delivery is given up after
// publisher_timeout. tickrail-jitter must not pass the live stream off as a view from the
// snapshot: its report and JSON say the snapshot is not complete, and it exits 1.
TEST_CASE("jitterSaysItsSnapshotIsNotCompleteAndExits1", "[e2e][state]") {
  const char* t = std::getenv("TICKRAIL_E2E_TRANSPORT");
  INFO("shared memory only: the entry is made busy in the publisher's own memory");
  REQUIRE((t == nullptr || *t == '\0' || std::string(t) == "shm"));
  const std::string jitter = program("TICKRAIL_JITTER", "apps/jitter/tickrail-jitter");
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("tickrail-e2e-stuck-" + std::to_string(getpid())))
                               .string();
  tickrail::PublisherConfig pc;
  pc.channel = "e2e-stuck-" + std::to_string(getpid());
  pc.state.enabled = true;
  pc.state.capacity = 16;
  tickrail::shm::ShmPublisher pub(pc, tickrail::detail::Placement());
  tickrail::Tick q{};
  q.kind = tickrail::TickKind::Quote;
  q.instrument = 1;
  REQUIRE(pub.publish({&q, 1}).status == tickrail::PublishStatus::no_subscribers);  // in the table all the same
  tickrail::Slot& stuck = pub.table()->entries()[2 * tickrail::kStateClasses];
  std::atomic_ref<std::uint64_t>(stuck.words[tickrail::kSeqWord]).store(tickrail::detail::kEntryBusy);
  std::ofstream(base + ".toml") << "[subscriber]\npublisher_timeout_ms = 300\n";
  const pid_t j = spawn({jitter, "-c", base + ".toml", "--channel", pc.channel, "--start", "snapshot", "--quiet",
                         "--attach-timeout-ms", "10000", "--json", base + ".json", "--state-out", base + "-state.json"},
                        base + ".log");
  // A live stream until the subscriber has attached (bounded), then for 1.5 s more (the
  // delivery's budget is 0.3 s), then the channel closes.
  const auto attach_by = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto until = attach_by;
  bool attached = false;
  while (std::chrono::steady_clock::now() < until) {
    (void)pub.publish({&q, 1});
    if (!attached && !pub.subscribers().empty()) {
      attached = true;
      until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(attached);
  pub.close();
  const int rc = wait_bounded(j, std::chrono::seconds(30));
  const std::string log = slurp(base + ".log");
  INFO(log);
  CHECK(rc == 1);
  CHECK_THAT(log, Catch::Contains("snapshot: NOT complete (0 entries delivered): given up after publisher_timeout"));
  CHECK_THAT(log, Catch::Contains("error: channel '" + pc.channel + "': the snapshot of the publisher's last-value table is not complete"));
  const nlohmann::json r = nlohmann::json::parse(slurp(base + ".json"));
  CHECK(r["table"]["snapshot"] == true);
  CHECK(r["table"]["snapshot_complete"] == false);
  CHECK(r["count"].get<std::uint64_t>() > 0);  // the live stream went on, and was measured
  tickrail::test::require_json_documented(r, "### JSON of tickrail-jitter");
  for (const std::string suffix : {".toml", ".json", ".log", "-state.json"}) {
    std::error_code ec;
    std::filesystem::remove(base + suffix, ec);
  }
}
