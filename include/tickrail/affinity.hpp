// CPU pinning and host checks for latency-sensitive threads. Control plane: call at startup.
//
// `sysfs_root` arguments name the directory that holds sys/ and proc/ ("/" on a real host), so
// tests can point them at a prepared tree.
#pragma once

#include <string>
#include <string_view>
#include <vector>
#include "tickrail/export.hpp"

namespace tickrail {

struct TICKRAIL_API PinResult {
  bool ok = false;        // the thread now runs only on `cpu`
  int cpu = -1;
  bool isolated = false;  // cpu is listed in /sys/devices/system/cpu/isolated
  std::string message;    // when ok: a warning (empty if none); otherwise: why it failed
  explicit operator bool() const noexcept { return ok; }
};

// Pins the calling thread to `cpu`. A cpu that is not isolated is not a failure: the result is
// ok, isolated == false and a warning says how to isolate it. A cpu that does not exist, is
// offline or is outside this process's allowed set fails (ok == false) with a message naming
// the cpu and the cpus that are allowed. Never throws for either.
[[nodiscard]] TICKRAIL_API PinResult pin_current_thread(int cpu);

// Parses the kernel's cpulist format: "1-3,5", "0", "" (none), trailing newline allowed.
// Returns sorted, unique cpus. Throws Error(Errc::parse_error) quoting the text.
[[nodiscard]] TICKRAIL_API std::vector<int> parse_cpu_list(std::string_view text);
// The inverse: {1,2,3,5} -> "1-3,5"; {} -> "".
[[nodiscard]] TICKRAIL_API std::string format_cpu_list(const std::vector<int>& cpus);

// /sys/devices/system/cpu/isolated (empty when absent or empty).
[[nodiscard]] TICKRAIL_API std::vector<int> isolated_cpus(const std::string& sysfs_root = "/");
// /sys/devices/system/cpu/online (empty when absent).
[[nodiscard]] TICKRAIL_API std::vector<int> online_cpus(const std::string& sysfs_root = "/");
// The calling thread's affinity mask (sched_getaffinity).
[[nodiscard]] TICKRAIL_API std::vector<int> allowed_cpus();
// The cpus this process may use: the affinity of the thread that loaded the library, read
// before main() (a program that pins its main thread later does not shrink it), less the cpus
// offline now.
[[nodiscard]] TICKRAIL_API std::vector<int> process_cpus();
// Why this process cannot use every cpu of `cpus` ("" when it can): the first that is offline
// or outside process_cpus(), and the cpus it may use.
[[nodiscard]] TICKRAIL_API std::string unusable_cpus(const std::vector<int>& cpus);
// process_cpus() less `hot`, as a cpu list ("" when none is left): the housekeeping_cpus of a
// program that runs hot threads on several cores.
[[nodiscard]] TICKRAIL_API std::string cpus_besides(const std::vector<int>& hot);

// cpufreq scaling_governor of `cpu`, e.g. "performance"; empty when the host has no cpufreq
// (virtual machines, fixed-frequency hosts).
[[nodiscard]] TICKRAIL_API std::string cpu_governor(int cpu, const std::string& sysfs_root = "/");

// What stands between `cpu` and quiet measurements, one sentence each (empty when nothing):
// not pinned (cpu < 0), not isolated, frequency governor not "performance", TSC not
// invariant (<root>/proc/cpuinfo flags and CPUID).
[[nodiscard]] TICKRAIL_API std::vector<std::string> host_warnings(int cpu, const std::string& sysfs_root = "/");

}  // namespace tickrail
