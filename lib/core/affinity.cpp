#include "tickrail/affinity.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>

#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"

namespace tickrail {
namespace {

std::string under(const std::string& root, std::string_view rel) {
  std::string p = root.empty() ? std::string("/") : root;
  if (p.back() != '/') p += '/';
  p += rel;
  return p;
}

std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
    line.pop_back();
  }
  return line;
}

bool contains(const std::vector<int>& v, int cpu) {
  return std::binary_search(v.begin(), v.end(), cpu);
}

std::string or_none(const std::string& list) { return list.empty() ? "none" : list; }

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text) {
  const auto fail = [&](const std::string& why) -> Error {
    return Error(Errc::parse_error, "cpu list '" + std::string(text) + "': " + why);
  };
  std::string_view s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  std::vector<int> cpus;
  if (s.empty()) return cpus;
  constexpr int kMaxCpu = 1 << 16;
  const auto number = [&](std::string_view n) {
    int v = 0;
    const auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (n.empty() || ec != std::errc() || p != n.data() + n.size() || v < 0 || v >= kMaxCpu) {
      throw fail("'" + std::string(n) + "' is not a cpu number");
    }
    return v;
  };
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = std::min(s.find(',', pos), s.size());
    const std::string_view item = s.substr(pos, comma - pos);
    if (item.empty()) throw fail("empty item at offset " + std::to_string(pos));
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      cpus.push_back(number(item));
    } else {
      const int lo = number(item.substr(0, dash));
      const int hi = number(item.substr(dash + 1));
      if (hi < lo) throw fail("range '" + std::string(item) + "' runs backwards");
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    pos = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> isolated_cpus(const std::string& sysfs_root) {
  const auto line = read_line(under(sysfs_root, "sys/devices/system/cpu/isolated"));
  return line ? parse_cpu_list(*line) : std::vector<int>{};
}

std::vector<int> online_cpus(const std::string& sysfs_root) {
  const auto line = read_line(under(sysfs_root, "sys/devices/system/cpu/online"));
  return line ? parse_cpu_list(*line) : std::vector<int>{};
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

namespace {
// Captured before main(): what the process was started with (taskset, cgroup cpuset).
const std::vector<int>& start_cpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> c = allowed_cpus();
    if (c.empty()) {
      try {
        c = online_cpus();
      } catch (const Error&) {
        // Neither: no cpu is known, and nothing is placed.
      }
    }
    return c;
  }();
  return cpus;
}
[[maybe_unused]] const bool g_captured = (start_cpus(), true);
}  // namespace

std::vector<int> process_cpus() {
  std::vector<int> cpus = start_cpus();
  try {
    const std::vector<int> online = online_cpus();
    if (!online.empty()) std::erase_if(cpus, [&](int c) { return !contains(online, c); });
  } catch (const Error&) {
    // Unreadable sysfs: the set the process started with.
  }
  return cpus;
}

std::string unusable_cpus(const std::vector<int>& cpus) {
  const std::vector<int> process = process_cpus();
  std::vector<int> online;
  try {
    online = online_cpus();
  } catch (const Error&) {
    // Unreadable sysfs: every cpu outside the process's set is reported as not allowed.
  }
  for (int c : cpus) {
    if (contains(process, c)) continue;
    const std::string may = "this process may use " + format_cpu_list(process);
    if (!online.empty() && !contains(online, c)) {
      return "cpu " + std::to_string(c) + " does not exist or is offline (" + may + ")";
    }
    return "cpu " + std::to_string(c) + " is outside this process's cpus (" + may +
           "; see taskset and cgroup cpuset)";
  }
  return {};
}

std::string cpus_besides(const std::vector<int>& hot) {
  std::vector<int> rest = process_cpus();
  std::erase_if(rest, [&](int c) { return std::find(hot.begin(), hot.end(), c) != hot.end(); });
  return format_cpu_list(rest);
}

std::string cpu_governor(int cpu, const std::string& sysfs_root) {
  if (cpu < 0) return {};
  const auto line = read_line(under(
      sysfs_root, "sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/scaling_governor"));
  return line.value_or(std::string());
}

PinResult pin_current_thread(int cpu) {
  PinResult r;
  r.cpu = cpu;
  const std::string what = "pin thread to cpu " + std::to_string(cpu);
  std::vector<int> online;
  try {
    online = online_cpus();
  } catch (const Error&) {
    // A sysfs we cannot read only weakens the message below.
  }
  if (cpu < 0 || cpu >= CPU_SETSIZE) {
    r.message = what + ": no such cpu (online cpus: " + or_none(format_cpu_list(online)) + ")";
    return r;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) {
    if (!online.empty() && !contains(online, cpu)) {
      r.message = what + ": cpu " + std::to_string(cpu) + " does not exist or is offline (online cpus: " +
                  format_cpu_list(online) + ")";
    } else {
      r.message = what + ": " + std::strerror(rc) +
                  ": not in this process's cpuset (this thread may run on: " +
                  or_none(format_cpu_list(allowed_cpus())) + "; see taskset and cgroup cpuset)";
    }
    return r;
  }
  r.ok = true;
  std::vector<int> isolated;
  try {
    isolated = isolated_cpus();
  } catch (const Error& e) {
    r.message = std::string("cannot tell whether cpu is isolated: ") + e.what();
    return r;
  }
  r.isolated = contains(isolated, cpu);
  if (!r.isolated) {
    const std::string c = std::to_string(cpu);
    r.message = "cpu " + c + " is not isolated (isolated cpus: " +
                or_none(format_cpu_list(isolated)) +
                "): other tasks and interrupts will share it; boot with isolcpus=" + c +
                " nohz_full=" + c + " rcu_nocbs=" + c;
  }
  return r;
}

std::vector<std::string> host_warnings(int cpu, const std::string& sysfs_root) {
  std::vector<std::string> w;
  if (cpu < 0) {
    w.push_back("the measuring thread is not pinned to a cpu: the scheduler may move it");
  } else {
    const std::string c = std::to_string(cpu);
    std::vector<int> isolated;
    try {
      isolated = isolated_cpus(sysfs_root);
    } catch (const Error& e) {
      w.push_back(std::string("cannot tell whether cpu ") + c + " is isolated: " + e.what());
    }
    if (!contains(isolated, cpu)) {
      w.push_back("cpu " + c + " is not isolated (isolated cpus: " +
                  or_none(format_cpu_list(isolated)) + "); boot with isolcpus=" + c +
                  " nohz_full=" + c + " rcu_nocbs=" + c);
    }
    const std::string gov = cpu_governor(cpu, sysfs_root);
    if (!gov.empty() && gov != "performance") {
      w.push_back("cpu " + c + " frequency governor is '" + gov +
                  "', not 'performance': clock changes add latency (cpupower frequency-set -g "
                  "performance)");
    }
  }
  const TscFlags tsc = read_tsc_flags(sysfs_root);
  if (!tsc.invariant()) {
    w.push_back(std::string("the TSC is not invariant (CPUID invariant bit ") +
                (tsc.cpuid_invariant ? "set" : "clear") + ", constant_tsc " +
                (tsc.constant_tsc ? "yes" : "no") + ", nonstop_tsc " +
                (tsc.nonstop_tsc ? "yes" : "no") +
                "): one-way latencies from publish timestamps are not trustworthy; use ping-pong");
  }
  return w;
}

}  // namespace tickrail
