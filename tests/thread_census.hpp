// The threads of a process as an operator sees them: each one's name (/proc/PID/task/TID/comm)
// and the cpus it may run on (Cpus_allowed_list of .../status).
#pragma once

#include <sched.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tickrail/affinity.hpp"

namespace tickrail::test {

// A sanitizer's runtime may run a thread of its own in the process (TSan's background thread):
// it carries the program's name, like a thread nobody named.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kRuntimeThreads = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kRuntimeThreads = true;
#else
inline constexpr bool kRuntimeThreads = false;
#endif
#else
inline constexpr bool kRuntimeThreads = false;
#endif

struct ThreadSeen {
  int tid = 0;
  std::string name;
  std::vector<int> cpus;
};

inline std::vector<ThreadSeen> threads_of(int pid) {
  std::vector<ThreadSeen> out;
  const std::filesystem::path task = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(task, ec)) {
    ThreadSeen t;
    t.tid = std::stoi(e.path().filename().string());
    std::ifstream comm(e.path() / "comm");
    if (!std::getline(comm, t.name)) continue;  // it ended meanwhile
    std::ifstream status(e.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) t.cpus = parse_cpu_list(line.substr(18));
    }
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const ThreadSeen& a, const ThreadSeen& b) { return a.tid < b.tid; });
  return out;
}

inline bool has_cpu(const ThreadSeen& t, int cpu) {
  return std::find(t.cpus.begin(), t.cpus.end(), cpu) != t.cpus.end();
}

inline std::string describe(const std::vector<ThreadSeen>& ts) {
  std::string s;
  for (const ThreadSeen& t : ts) {
    s += std::to_string(t.tid) + " " + t.name + " cpus " + format_cpu_list(t.cpus) + "\n";
  }
  return s;
}

// The library's threads: every one is named "tr-...".
inline bool is_tickrail(const ThreadSeen& t) { return t.name.rfind("tr-", 0) == 0; }

// Whether this process may use cpus 0 and 1, which the placement tests pin to.
inline bool two_cpus() {
  const std::vector<int> cpus = process_cpus();
  return cpus.size() >= 2 && cpus[0] == 0 && cpus[1] == 1;
}

// Pins the calling thread to one cpu for the scope, as a program's --cpu does; then gives its
// mask back.
class PinnedHere {
 public:
  explicit PinnedHere(int cpu) {
    CPU_ZERO(&saved_);
    REQUIRE(sched_getaffinity(0, sizeof saved_, &saved_) == 0);
    REQUIRE(pin_current_thread(cpu).ok);
  }
  ~PinnedHere() { (void)sched_setaffinity(0, sizeof saved_, &saved_); }
  PinnedHere(const PinnedHere&) = delete;
  PinnedHere& operator=(const PinnedHere&) = delete;

 private:
  cpu_set_t saved_;
};

}  // namespace tickrail::test
