#include <catch2/catch.hpp>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"

using namespace tickrail;
namespace fs = std::filesystem;

namespace {

// A fake sysfs/procfs tree: sys/devices/system/cpu/{isolated,online,cpuN/cpufreq} and
// proc/cpuinfo.
struct FakeRoot {
  fs::path root;
  FakeRoot() {
    std::string tmpl = (fs::temp_directory_path() / "tickrail-affinity-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    fs::create_directories(root / "sys/devices/system/cpu");
    fs::create_directories(root / "proc");
  }
  ~FakeRoot() { fs::remove_all(root); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  void governor(int cpu, const std::string& g) const {
    write("sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/scaling_governor", g + "\n");
  }
  [[nodiscard]] std::string str() const { return root.string(); }
};

bool mentions(const std::vector<std::string>& warnings, const std::string& text) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("cpuListParsesTheKernelFormat") {
  REQUIRE(parse_cpu_list("1-3,5") == std::vector<int>{1, 2, 3, 5});
  REQUIRE(parse_cpu_list("0\n") == std::vector<int>{0});
  REQUIRE(parse_cpu_list("").empty());
  REQUIRE(parse_cpu_list("\n").empty());
  REQUIRE(parse_cpu_list("5,1-2,2") == std::vector<int>{1, 2, 5});
  REQUIRE(parse_cpu_list("0-1,64-65") == std::vector<int>{0, 1, 64, 65});
  for (const char* bad : {"1-", "a", "3-1", "1,,2", "-1", "1,", "2 3", "99999999999"}) {
    try {
      (void)parse_cpu_list(bad);
      FAIL("accepted '" << bad << "'");
    } catch (const Error& e) {
      REQUIRE(e.code() == Errc::parse_error);
      REQUIRE(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
    }
  }
}

TEST_CASE("cpuListFormatsRanges") {
  REQUIRE(format_cpu_list({1, 2, 3, 5}) == "1-3,5");
  REQUIRE(format_cpu_list({}).empty());
  REQUIRE(format_cpu_list({7}) == "7");
  REQUIRE(format_cpu_list({3, 1, 2, 2, 9, 10}) == "1-3,9-10");
  REQUIRE(parse_cpu_list(format_cpu_list({0, 2, 4, 5, 6, 31})) == std::vector<int>{0, 2, 4, 5, 6, 31});
}

TEST_CASE("isolatedCpusAreReadFromSysfs") {
  const FakeRoot r;
  REQUIRE(isolated_cpus(r.str()).empty());  // absent file: none
  r.write("sys/devices/system/cpu/isolated", "\n");
  REQUIRE(isolated_cpus(r.str()).empty());
  r.write("sys/devices/system/cpu/isolated", "1-3,5\n");
  REQUIRE(isolated_cpus(r.str()) == std::vector<int>{1, 2, 3, 5});
  r.write("sys/devices/system/cpu/online", "0-7\n");
  REQUIRE(online_cpus(r.str()).size() == 8);
}

TEST_CASE("cpuGovernorIsReadOrEmpty") {
  const FakeRoot r;
  r.governor(1, "powersave");
  REQUIRE(cpu_governor(1, r.str()) == "powersave");
  REQUIRE(cpu_governor(0, r.str()).empty());
  REQUIRE(cpu_governor(-1, r.str()).empty());
}

TEST_CASE("hostWarningsNameWhatDisturbsTheCore") {
  const FakeRoot r;
  r.write("sys/devices/system/cpu/isolated", "1\n");
  r.governor(1, "performance");
  r.governor(2, "powersave");
  r.write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n");
  REQUIRE(host_warnings(1, r.str()).empty());

  const auto w2 = host_warnings(2, r.str());
  REQUIRE(w2.size() == 2);
  REQUIRE(mentions(w2, "cpu 2 is not isolated (isolated cpus: 1)"));
  REQUIRE(mentions(w2, "isolcpus=2"));
  REQUIRE(mentions(w2, "'powersave'"));

  REQUIRE(mentions(host_warnings(-1, r.str()), "not pinned"));

  r.write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu tsc\n");
  const bool cpuid_invariant = read_tsc_flags(r.str()).cpuid_invariant;
  REQUIRE(mentions(host_warnings(1, r.str()), "TSC is not invariant") == !cpuid_invariant);
}

TEST_CASE("pinningToAnAllowedCpuSucceedsAndWarnsWhenNotIsolated") {
  const std::vector<int> allowed = allowed_cpus();
  REQUIRE_FALSE(allowed.empty());
  const int cpu = allowed.back();
  PinResult r;
  int ran_on = -1;
  std::vector<int> after;
  std::thread t([&] {
    r = pin_current_thread(cpu);
    ran_on = sched_getcpu();
    after = allowed_cpus();
  });
  t.join();
  INFO(r.message);
  REQUIRE(r.ok);
  REQUIRE(r.cpu == cpu);
  REQUIRE(ran_on == cpu);
  REQUIRE(after == std::vector<int>{cpu});
  const auto iso = isolated_cpus();
  const bool isolated = std::find(iso.begin(), iso.end(), cpu) != iso.end();
  REQUIRE(r.isolated == isolated);
  if (!isolated) {
    REQUIRE(r.message.find("cpu " + std::to_string(cpu) + " is not isolated") != std::string::npos);
  } else {
    REQUIRE(r.message.empty());
  }
}

TEST_CASE("pinningToAMissingCpuFailsWithAClearMessage") {
  for (const int cpu : {-1, 1023, 100000}) {
    PinResult r;
    std::thread t([&] { r = pin_current_thread(cpu); });
    t.join();
    INFO(r.message);
    REQUIRE_FALSE(r.ok);
    REQUIRE_FALSE(r);
    REQUIRE(r.message.find("cpu " + std::to_string(cpu)) != std::string::npos);
    REQUIRE(r.message.find("online cpus: ") != std::string::npos);
  }
}
