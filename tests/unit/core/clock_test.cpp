#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tickrail/clock.hpp"

extern char** environ;

using namespace tickrail;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "tickrail-clock-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

// Runs this test binary again with one extra environment variable, running only `test_name`
// (a hidden test), and returns what it wrote to the file named by TICKRAIL_TEST_OUT.
std::string run_child(const std::string& env_assignment, const std::string& test_name) {
  const fs::path dir = temp_dir();
  const fs::path out = dir / "out.txt";
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string s(*e);
    if (s.rfind("TICKRAIL_CLOCK=", 0) != 0) env_strings.push_back(s);
  }
  env_strings.push_back(env_assignment);
  env_strings.push_back("TICKRAIL_TEST_OUT=" + out.string());
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string name = test_name;
  char* argv[] = {exe.data(), name.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) == 0);
  // Bounded wait: calibration takes ~150 ms; give it a minute on a loaded host.
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL("child test did not finish within 60 s");
  }
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(out);
  std::string text;
  for (std::string line; std::getline(in, line);) text += line + '\n';
  fs::remove_all(dir);
  return text;
}

void child_report(const std::string& text) {
  const char* path = std::getenv("TICKRAIL_TEST_OUT");
  REQUIRE(path != nullptr);
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("clockIsCalibratedOnceAndDescribesItself") {
  const Clock& c = Clock::instance();
  REQUIRE(&c == &Clock::instance());
  REQUIRE(c.source() != ClockSource::uncalibrated);
  REQUIRE(c.using_tsc() == (c.source() == ClockSource::tsc));
  const std::string d = c.describe();
  INFO(d);
  if (c.using_tsc()) {
    REQUIRE(d.rfind("TSC ", 0) == 0);
    REQUIRE(d.find("GHz") != std::string::npos);
    REQUIRE(c.calibration_ghz().size() == 3);
    std::vector<double> g = c.calibration_ghz();
    std::sort(g.begin(), g.end());
    REQUIRE(c.cycles_per_ns() == Approx(g[1]));
    REQUIRE((g.back() - g.front()) / g[1] <= 0.01);
    REQUIRE(c.cycles_per_ns() > 0.05);
    REQUIRE(c.cycles_per_ns() < 20.0);
  } else {
    REQUIRE(d.rfind("CLOCK_MONOTONIC_RAW", 0) == 0);
    REQUIRE(c.ns_per_cycle() == 1.0);
  }
}

TEST_CASE("clockNowIsMonotonicOnOneThread") {
  std::uint64_t prev = Clock::now();
  for (int i = 0; i < 200'000; ++i) {
    const std::uint64_t t = (i & 1) != 0 ? Clock::now() : Clock::now_fenced();
    REQUIRE(t >= prev);
    prev = t;
  }
}

TEST_CASE("clockMeasuresASleepWithinAGenerousFactor") {
  const Clock& c = Clock::instance();
  const std::uint64_t a = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::uint64_t b = Clock::now();
  const double ms = c.to_ns(b - a) / 1e6;
  INFO("20 ms sleep measured as " << ms << " ms with " << c.describe());
  REQUIRE(ms >= 10.0);
  REQUIRE(ms <= 2000.0);
}

TEST_CASE("clockConvertsBetweenTicksAndNanoseconds") {
  const Clock& c = Clock::instance();
  const std::uint64_t t = c.ns_to_cycles(1'000'000.0);
  REQUIRE(c.to_ns(t) == Approx(1'000'000.0).margin(c.ns_per_cycle()));
  REQUIRE(c.ns_to_cycles(0.0) == 0);
  REQUIRE(c.ns_to_cycles(-5.0) == 0);
  REQUIRE(c.to_ns(0) == 0.0);
}

TEST_CASE("tscFlagsAreReadFromCpuinfo") {
  const fs::path root = temp_dir();
  fs::create_directories(root / "proc");
  std::ofstream(root / "proc/cpuinfo") << "processor\t: 0\nflags\t\t: fpu tsc constant_tsc rdtscp nonstop_tsc\n"
                                       << "processor\t: 1\nflags\t\t: fpu\n";
  TscFlags f = read_tsc_flags(root.string());
  REQUIRE(f.constant_tsc);
  REQUIRE(f.nonstop_tsc);
  REQUIRE(f.invariant());
  std::ofstream(root / "proc/cpuinfo") << "processor\t: 0\nflags\t\t: fpu tsc constant_tsc\n";
  f = read_tsc_flags(root.string());
  REQUIRE(f.constant_tsc);
  REQUIRE_FALSE(f.nonstop_tsc);
  REQUIRE(f.invariant() == f.cpuid_invariant);
  fs::remove_all(root);
}

TEST_CASE("clockHonoursTickrailClockMonotonic") {
  const std::string out = run_child("TICKRAIL_CLOCK=monotonic", "childReportsItsClock");
  INFO(out);
  REQUIRE(out.find("source=monotonic_raw") != std::string::npos);
  REQUIRE(out.find("forced by TICKRAIL_CLOCK=monotonic") != std::string::npos);
  REQUIRE(out.find("bracketed=1") != std::string::npos);
}

TEST_CASE("clockIgnoresAnUnknownTickrailClockValue") {
  const std::string out = run_child("TICKRAIL_CLOCK=sundial", "childReportsItsClock");
  INFO(out);
  REQUIRE(out.find("'sundial'") != std::string::npos);
  REQUIRE(out.find("ignored") != std::string::npos);
  REQUIRE(out.find("source=" + std::string(to_string(Clock::instance().source()))) !=
          std::string::npos);
}

// Run only by the tests above, in a child process with TICKRAIL_CLOCK set.
TEST_CASE("childReportsItsClock", "[.]") {
  // now() before instance(): the first call calibrates, so cycles are never in mixed units.
  const std::uint64_t first = Clock::now();
  const Clock& c = Clock::instance();
  bool bracketed = true;
  if (!c.using_tsc()) {
    REQUIRE(c.ns_per_cycle() == 1.0);
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    const auto before = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
    const std::uint64_t now = Clock::now();
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    const auto after = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
    bracketed = before <= now && now <= after && first <= now;
  }
  child_report(std::string("source=") + to_string(c.source()) + "\nbracketed=" +
               (bracketed ? "1" : "0") + "\ndescribe=" + c.describe() + "\n");
}
