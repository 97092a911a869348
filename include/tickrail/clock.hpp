// Clock: a calibrated TSC timestamp for the hot path, with a CLOCK_MONOTONIC_RAW fallback.
//
// Clock::now() returns "clock cycles": TSC cycles when the TSC is usable, nanoseconds of
// CLOCK_MONOTONIC_RAW otherwise (one cycle a nanosecond). Convert differences with to_ns().
// Tick::send_ts carries these cycles, so two processes on one host compare timestamps only when
// both use the TSC (an invariant TSC is one counter for the whole host).
//
// Choice of instruction: LFENCE; RDTSC. RDTSC alone may execute before earlier loads complete,
// so a receive timestamp could be taken before the tick it stamps was read (early by a whole
// cache-line transfer, the very thing measured); the leading LFENCE waits for every earlier
// instruction. No trailing fence: later instructions may start before the read, which is
// harmless for a send stamp (the stamp is stored into the tick, and x86 makes that store visible
// before the commit word) and for the end of an interval. now_fenced() adds the trailing LFENCE
// for the start of a timed region. RDTSCP was not chosen: it orders only earlier instructions
// too, reads IA32_TSC_AUX we do not need, and measured slower. Measured on a 2.1 GHz EPYC VM:
// RDTSC ~12-18 ns, LFENCE;RDTSC ~24 ns, with the trailing LFENCE ~28-33 ns, RDTSCP ~28-33 ns.
//
// The TSC is used when it is invariant (CPUID 80000007H EDX bit 8, or the kernel's constant_tsc
// and nonstop_tsc flags) and its calibration against CLOCK_MONOTONIC_RAW is consistent.
// TICKRAIL_CLOCK=monotonic forces the fallback; TICKRAIL_CLOCK=tsc uses the TSC even when it is
// not reported invariant (virtual machines that hide the CPUID bit).
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#include "tickrail/export.hpp"
#define TICKRAIL_HAVE_TSC 1
#else
#define TICKRAIL_HAVE_TSC 0
#endif

namespace tickrail {

enum class ClockSource : std::uint8_t {
  uncalibrated = 0,  // Clock::instance() has not run yet
  tsc = 1,
  monotonic_raw = 2,
};

[[nodiscard]] TICKRAIL_API const char* to_string(ClockSource s) noexcept;

namespace detail {

// Set once by calibration; now() reads it relaxed (a plain load on x86).
inline std::atomic<ClockSource> clock_source{ClockSource::uncalibrated};

[[nodiscard]] inline std::uint64_t monotonic_raw_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);  // vDSO: no system call
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

[[nodiscard]] inline std::uint64_t read_tsc() noexcept {
#if TICKRAIL_HAVE_TSC
  _mm_lfence();
  return __rdtsc();
#else
  return monotonic_raw_ns();
#endif
}

[[nodiscard]] inline std::uint64_t read_tsc_fenced() noexcept {
#if TICKRAIL_HAVE_TSC
  _mm_lfence();
  const std::uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
#else
  return monotonic_raw_ns();
#endif
}

// Cold path of now(): calibrates (Clock::instance()) then reads.
[[nodiscard]] TICKRAIL_API std::uint64_t clock_now_first() noexcept;

}  // namespace detail

// What the CPU and the kernel say about the TSC.
struct TICKRAIL_API TscFlags {
  bool cpuid_invariant = false;  // CPUID 80000007H EDX bit 8
  bool constant_tsc = false;     // /proc/cpuinfo flags
  bool nonstop_tsc = false;
  [[nodiscard]] bool invariant() const noexcept {
    return cpuid_invariant || (constant_tsc && nonstop_tsc);
  }
};

// CPUID of this CPU, flags from <root>/proc/cpuinfo ("/" on a real host; a test tree otherwise).
[[nodiscard]] TICKRAIL_API TscFlags read_tsc_flags(const std::string& root = "/");

class TICKRAIL_API Clock {
 public:
  // Calibrates on first call (about 150 ms), thread-safe; never throws.
  static const Clock& instance();

  // Hot path: clock cycles (see above). Calls instance() itself the first time, so cycles are
  // always in one unit; call instance() at startup to keep the calibration off the hot path.
  [[nodiscard]] static std::uint64_t now() noexcept {
    const ClockSource s = detail::clock_source.load(std::memory_order_relaxed);
    if (s == ClockSource::tsc) [[likely]] return detail::read_tsc();
    if (s == ClockSource::monotonic_raw) return detail::monotonic_raw_ns();
    return detail::clock_now_first();
  }
  // now() that also keeps later instructions from starting before the read: for the start of
  // a timed region (~5 ns more).
  [[nodiscard]] static std::uint64_t now_fenced() noexcept {
    const ClockSource s = detail::clock_source.load(std::memory_order_relaxed);
    if (s == ClockSource::tsc) [[likely]] return detail::read_tsc_fenced();
    if (s == ClockSource::monotonic_raw) return detail::monotonic_raw_ns();
    return detail::clock_now_first();
  }

  [[nodiscard]] double ns_per_cycle() const noexcept { return ns_per_cycle_; }
  [[nodiscard]] double cycles_per_ns() const noexcept { return 1.0 / ns_per_cycle_; }
  [[nodiscard]] double to_ns(std::uint64_t cycles) const noexcept {
    return static_cast<double>(cycles) * ns_per_cycle_;
  }
  // Rounded to the nearest cycle; negative ns give 0.
  [[nodiscard]] std::uint64_t ns_to_cycles(double ns) const noexcept;

  [[nodiscard]] ClockSource source() const noexcept { return source_; }
  [[nodiscard]] bool using_tsc() const noexcept { return source_ == ClockSource::tsc; }
  [[nodiscard]] bool tsc_invariant() const noexcept { return flags_.invariant(); }
  [[nodiscard]] const TscFlags& tsc_flags() const noexcept { return flags_; }
  // TSC frequencies measured by each calibration window, in GHz (empty when not measured).
  [[nodiscard]] const std::vector<double>& calibration_ghz() const noexcept { return samples_ghz_; }
  // e.g. "TSC 2.994 GHz, invariant" or "CLOCK_MONOTONIC_RAW (forced by TICKRAIL_CLOCK=monotonic)".
  [[nodiscard]] std::string describe() const;

 private:
  Clock();

  double ns_per_cycle_ = 1.0;
  ClockSource source_ = ClockSource::monotonic_raw;
  TscFlags flags_;
  std::vector<double> samples_ghz_;
  std::string note_;  // why the fallback was taken, or that the TSC was forced
};

}  // namespace tickrail
