// tickrail-replay, the real program, on inputs a user trips over: a gzip file cut short, an
// endless stream of junk read with --skip-bad, an endless CSV through a pipe, and a feed whose
// timestamps have an hour-long gap (pacing must sleep through it, --max-gap compresses it).
//
// The program is found in the build tree (the test runs from the build root) or through
// $TICKRAIL_REPLAY. Every wait is bounded; what is checked is what ended and what was published.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "program.hpp"
#include "tickrail/tools/feed/itch_writer.hpp"

using namespace tickrail;
using feed::ItchWriter;

namespace {

std::string program() {
  if (const char* p = std::getenv("TICKRAIL_REPLAY"); p != nullptr && *p != '\0') return p;
  return (std::filesystem::current_path() / "apps/replay/tickrail-replay").string();
}

std::string temp(const std::string& what) {
  static int n = 0;
  return (std::filesystem::temp_directory_path() /
          ("tickrail-replay-input-" + std::to_string(getpid()) + "-" + std::to_string(n++) + what))
      .string();
}

struct Removed {
  std::vector<std::string> paths;
  ~Removed() {
    for (const std::string& p : paths) {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  }
};

pid_t spawn(std::vector<std::string> args, const std::string& log) {
  args.insert(args.begin(), program());
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

struct Ended {
  int status = -1;       // exit status; 128 + signal; -1: still running at the deadline (killed)
  double cpu_s = 0;      // CPU time the program used
  long max_rss_kib = 0;  // its peak resident memory
};

Ended wait_bounded(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Ended e;
  for (;;) {
    int status = 0;
    rusage u{};
    const pid_t r = wait4(pid, &status, WNOHANG, &u);
    if (r == pid) {
      e.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      e.cpu_s = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
      e.max_rss_kib = u.ru_maxrss;
      return e;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> quiet_publisher(const std::string& tag) {
  return {"--channel", "replay-input-" + tag + "-" + std::to_string(getpid()), "--quiet",
          "--wait-subscribers", "0"};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("replayOfACutGzipPublishesEveryCompleteMessageThenNamesTheCut", "[replay][input]") {
  REQUIRE(std::filesystem::exists(program()));
  Removed rm;
  // 300,000 order deletes (6.3 MB uncompressed), gzip'd, cut at 60% of the compressed size.
  ItchWriter w;
  constexpr std::uint64_t kMessages = 300'000;
  for (std::uint64_t i = 1; i <= kMessages; ++i) w.order_delete(1, i, i * 7919 % 1'000'003);
  const std::string whole = temp(".itch.gz"), cut = temp("-cut.itch.gz"), json = temp(".json"),
                    log = temp(".log");
  rm.paths = {whole, cut, json, log};
  gzFile g = gzopen(whole.c_str(), "wb6");
  REQUIRE(g != nullptr);
  REQUIRE(gzwrite(g, w.bytes().data(), static_cast<unsigned>(w.bytes().size())) ==
          static_cast<int>(w.bytes().size()));
  REQUIRE(gzclose(g) == Z_OK);
  std::filesystem::copy_file(whole, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(whole) * 6 / 10);
  // What zlib inflates of the cut file; its complete messages are good data.
  std::vector<std::uint8_t> inflated(w.bytes().size());
  g = gzopen(cut.c_str(), "rb");
  std::size_t have = 0;
  for (int got = 0; (got = gzread(g, inflated.data() + have, static_cast<unsigned>(inflated.size() - have))) > 0;) {
    have += static_cast<std::size_t>(got);
  }
  gzclose(g);
  const std::uint64_t complete = have / (2 + 19);
  REQUIRE(complete > 0);
  REQUIRE(complete < kMessages);

  const Ended e = wait_bounded(
      spawn(with({cut, "--max", "--json", json}, quiet_publisher("gz")), log), std::chrono::seconds(120));
  const std::string out = slurp(log);
  INFO(out);
  CHECK(e.status != 0);  // a failure of the input, reported as such
  CHECK(e.status == 1);   // exit status 1: the run failed (docs/apps.md "Exit status")
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  CHECK(j["ticks_published"] == complete);
  CHECK(j["ticks_read"] == complete);
  CHECK_THAT(out, Catch::Contains("gzip stream ends early after uncompressed byte offset " +
                                  std::to_string(have) + ": unexpected end of file"));
}

TEST_CASE("replayOfEndlessJunkWithSkipBadEndsOnSigterm", "[replay][input]") {
  REQUIRE(std::filesystem::exists(program()));
  Removed rm;
  const std::string log = temp(".log"), json = temp(".json");
  rm.paths = {log, json};
  const pid_t pid = spawn(with({"/dev/zero", "--skip-bad", "--max", "--json", json}, quiet_publisher("zero")), log);
  REQUIRE(tickrail::test::wait_catching(pid, SIGTERM, std::chrono::seconds(60)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // well inside the endless input
  kill(pid, SIGTERM);
  const Ended e = wait_bounded(pid, std::chrono::seconds(30));
  const std::string out = slurp(log);
  INFO(out);
  REQUIRE(e.status != -1);  // it ended, by itself, after the signal
  CHECK(e.status == 130);    // its own exit, with its summary, not killed by the signal
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  CHECK(j["stopped_early"] == true);
  CHECK(j["bad_input"]["bad_length"].get<std::uint64_t>() > 0);
  CHECK(j["ticks_published"] == 0);
}

TEST_CASE("replayStreamsAnEndlessCsvInBoundedMemory", "[replay][input]") {
  REQUIRE(std::filesystem::exists(program()));
  Removed rm;
  const std::string fifo = temp(".csv"), log = temp(".log"), json = temp(".json");
  rm.paths = {fifo, log, json};
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const pid_t pid = spawn(with({fifo, "--format", "csv", "--max", "--json", json}, quiet_publisher("csv")), log);
  // The writer: 192 MiB of ticks through the pipe, far more than the program may hold, then the
  // end. A program that loads the whole input holds all of it before publishing anything.
  std::signal(SIGPIPE, SIG_IGN);  // a program that dies must fail the test, not end it
  // Opened without blocking (no reader yet: ENXIO), retried until the program opens its end.
  int fd = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK)) < 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(fd >= 0);
  REQUIRE(::fcntl(fd, F_SETFL, 0) == 0);  // blocking writes from here
  std::string chunk;
  std::uint64_t lines = 0;
  for (int i = 0; i < 8192; ++i) chunk += "add," + std::to_string(100 + i % 900) + ",1\n";
  const std::string header = "kind,qty,instrument\n";
  REQUIRE(::write(fd, header.data(), header.size()) == static_cast<ssize_t>(header.size()));
  std::uint64_t written = 0;
  bool ok = true;
  while (written < (192ull << 20) && ok) {
    std::size_t off = 0;
    while (off < chunk.size()) {
      const ssize_t n = ::write(fd, chunk.data() + off, chunk.size() - off);
      if (n <= 0) {
        ok = false;
        break;
      }
      off += static_cast<std::size_t>(n);
    }
    written += chunk.size();
    lines += 8192;
  }
  ::close(fd);
  const Ended e = wait_bounded(pid, std::chrono::seconds(300));
  const std::string out = slurp(log);
  INFO(out);
  REQUIRE(ok);
  REQUIRE(e.status == 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  CHECK(j["ticks_published"] == lines);
  // Bounded memory: the program's peak stays far below what went through the pipe.
  // Under ASan the program also carries shadow memory and a quarantine of freed blocks; the bound
  // stays below the 192 MiB that went through, which a reader holding its input would exceed.
#if defined(__SANITIZE_ADDRESS__)
  constexpr long kMaxRssKib = 160 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  constexpr long kMaxRssKib = 160 * 1024;
#else
  constexpr long kMaxRssKib = 96 * 1024;
#endif
#else
  constexpr long kMaxRssKib = 96 * 1024;
#endif
  CHECK(e.max_rss_kib < kMaxRssKib);
}

namespace {

// ITCH add orders around an hour without messages: the pre-market gap of a real day.
std::vector<std::uint8_t> feed_with_an_hour_gap() {
  ItchWriter w;
  std::uint64_t ts = 34'200'000'000'000ull;
  std::uint64_t ref = 1;
  for (int i = 0; i < 10; ++i) w.add_order(1, ts += 1'000'000, ref++, Side::Buy, 100, "AAPL", 1'000'000);
  ts += 3'600'000'000'000ull;
  for (int i = 0; i < 10; ++i) w.add_order(1, ts += 1'000'000, ref++, Side::Sell, 100, "AAPL", 1'000'100);
  return w.bytes();
}

}  // namespace

TEST_CASE("replayWithMaxGapCompressesAnHourOfSilence", "[replay][pacing]") {
  REQUIRE(std::filesystem::exists(program()));
  Removed rm;
  const std::string itch = temp(".itch"), log = temp(".log"), json = temp(".json");
  rm.paths = {itch, log, json};
  const auto bytes = feed_with_an_hour_gap();
  std::ofstream(itch, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  // Bounded: an hour's wait would be killed at the deadline (status -1).
  const Ended e = wait_bounded(spawn(with({itch, "--max-gap", "10ms", "--json", json}, quiet_publisher("maxgap")), log),
                               std::chrono::seconds(120));
  INFO(slurp(log));
  REQUIRE(e.status == 0);
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  CHECK(j["ticks_published"] == 20);
  CHECK(j["stopped_early"] == false);
}

TEST_CASE("replayWaitingThroughAFeedGapSleepsAndEndsOnSigterm", "[replay][pacing]") {
  REQUIRE(std::filesystem::exists(program()));
  Removed rm;
  const std::string itch = temp(".itch"), log = temp(".log"), json = temp(".json");
  rm.paths = {itch, log, json};
  const auto bytes = feed_with_an_hour_gap();
  std::ofstream(itch, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  // Not --quiet: into a file, the replay says once why it waits.
  const pid_t pid = spawn({itch, "--json", json, "--channel", "replay-input-gapwait-" + std::to_string(getpid()),
                           "--wait-subscribers", "0"}, log);
  REQUIRE(tickrail::test::wait_catching(pid, SIGTERM, std::chrono::seconds(60)));
  std::this_thread::sleep_for(std::chrono::seconds(2));  // inside the hour's wait
  kill(pid, SIGTERM);
  const Ended e = wait_bounded(pid, std::chrono::seconds(30));
  const std::string out = slurp(log);
  INFO(out);
  CHECK_THAT(out, (Catch::Contains("waiting 59m") || Catch::Contains("waiting 1h00m")) && Catch::Contains("for feed time 10:30:00.011 (gap in the feed); --max-gap to compress"));
  REQUIRE(e.status != -1);
  CHECK(e.status == 130);
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  CHECK(j["stopped_early"] == true);
  CHECK(j["ticks_published"] == 10);  // the ticks before the gap, none after
  // Sleeping, not spinning: a small part of its two seconds on a core.
  CHECK(e.cpu_s < 0.5);
}
