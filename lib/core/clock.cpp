#include "tickrail/clock.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include "core/enum_names.hpp"

#if TICKRAIL_HAVE_TSC
#include <cpuid.h>
#endif

namespace tickrail {

namespace {
constexpr detail::EnumName<ClockSource> kSourceNames[] = {{ClockSource::uncalibrated, "uncalibrated"},
    {ClockSource::tsc, "tsc"}, {ClockSource::monotonic_raw, "monotonic_raw"}};
}  // namespace

const char* to_string(ClockSource s) noexcept { return detail::name_of(kSourceNames, s); }

TscFlags read_tsc_flags(const std::string& root) {
  TscFlags f;
#if TICKRAIL_HAVE_TSC
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000U, &a, &b, &c, &d) != 0 && a >= 0x80000007U &&
      __get_cpuid(0x80000007U, &a, &b, &c, &d) != 0) {
    f.cpuid_invariant = ((d >> 8) & 1U) != 0;
  }
#endif
  std::string path = root;
  if (path.empty() || path.back() != '/') path += '/';
  path += "proc/cpuinfo";
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') == std::string::npos ? line.size()
                                                                              : line.find(':') + 1));
    std::string w;
    while (words >> w) {
      if (w == "constant_tsc") f.constant_tsc = true;
      if (w == "nonstop_tsc") f.nonstop_tsc = true;
    }
    break;  // the first CPU speaks for all: the kernel clears these flags host-wide
  }
  return f;
}

namespace {

enum class Requested { automatic, tsc, monotonic, unknown };

Requested requested_from_env(std::string& raw) {
  const char* v = std::getenv("TICKRAIL_CLOCK");
  if (v == nullptr || *v == '\0') return Requested::automatic;
  raw = v;
  const std::string_view s(v);
  if (s == "auto") return Requested::automatic;
  if (s == "tsc") return Requested::tsc;
  if (s == "monotonic" || s == "monotonic_raw") return Requested::monotonic;
  return Requested::unknown;
}

#if TICKRAIL_HAVE_TSC
struct Reading {
  std::uint64_t tsc;
  std::uint64_t ns;
};

// The clock read bracketed by the narrowest pair of TSC reads, paired with their midpoint: an
// interrupt or a VM exit between the reads widens the bracket and that try is discarded.
Reading read_pair() {
  Reading best{0, 0};
  std::uint64_t best_width = std::numeric_limits<std::uint64_t>::max();
  for (int i = 0; i < 9; ++i) {
    const std::uint64_t t0 = detail::read_tsc();
    const std::uint64_t ns = detail::monotonic_raw_ns();
    const std::uint64_t t1 = detail::read_tsc();
    if (t1 >= t0 && t1 - t0 < best_width) {
      best_width = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}
#endif

constexpr int kWindows = 3;
constexpr long kWindowNs = 50'000'000;  // 3 x 50 ms: ~1e-6 relative error per window
constexpr double kMaxSpread = 0.01;     // windows that disagree by more: TSC not trusted

}  // namespace

Clock::Clock() {
  flags_ = read_tsc_flags("/");
  std::string raw;
  const Requested req = requested_from_env(raw);
  const auto add_note = [this](const std::string& n) {
    if (!note_.empty()) note_ += "; ";
    note_ += n;
  };
  if (req == Requested::unknown) {
    add_note("TICKRAIL_CLOCK='" + raw + "' is not auto, tsc or monotonic: ignored");
  }

#if TICKRAIL_HAVE_TSC
  const bool want_tsc =
      req == Requested::tsc || ((req == Requested::automatic || req == Requested::unknown) &&
                                flags_.invariant());
  if (req == Requested::monotonic) {
    add_note("forced by TICKRAIL_CLOCK=" + raw);
  } else if (!want_tsc) {
    add_note("TSC not invariant");
  } else {
    for (int w = 0; w < kWindows; ++w) {
      const Reading a = read_pair();
      timespec pause{0, kWindowNs};
      while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
      }
      const Reading b = read_pair();
      if (b.tsc <= a.tsc || b.ns <= a.ns) break;
      samples_ghz_.push_back(static_cast<double>(b.tsc - a.tsc) /
                             static_cast<double>(b.ns - a.ns));
    }
    if (samples_ghz_.size() != static_cast<std::size_t>(kWindows)) {
      add_note("TSC did not advance during calibration");
    } else {
      std::vector<double> sorted = samples_ghz_;
      std::sort(sorted.begin(), sorted.end());
      const double median = sorted[sorted.size() / 2];
      const double spread = (sorted.back() - sorted.front()) / median;
      if (median < 0.05 || median > 20.0) {
        add_note("TSC calibrated to an implausible " + std::to_string(median) + " GHz");
      } else if (spread > kMaxSpread) {
        add_note("TSC calibration windows disagree by " + std::to_string(spread * 100.0) + "%");
      } else {
        ns_per_cycle_ = 1.0 / median;
        source_ = ClockSource::tsc;
        if (req == Requested::tsc && !flags_.invariant()) add_note("forced by TICKRAIL_CLOCK=tsc");
      }
    }
  }
#else
  add_note("no TSC on this architecture");
#endif
  if (source_ != ClockSource::tsc) {
    source_ = ClockSource::monotonic_raw;
    ns_per_cycle_ = 1.0;
    // What each stamp will cost: the vDSO reads tsc or kvm-clock in tens of ns; hpet and
    // acpi_pm make every read a system call (microseconds in a VM).
    constexpr int kReads = 64;
    const std::uint64_t t0 = detail::monotonic_raw_ns();
    for (int i = 0; i < kReads - 1; ++i) (void)detail::monotonic_raw_ns();
    const std::uint64_t per_read = (detail::monotonic_raw_ns() - t0) / kReads;
    std::string src;
    if (std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource"); f) {
      std::getline(f, src);
    }
    add_note((src.empty() ? std::string() : "kernel clocksource " + src + ", ") +
             std::to_string(per_read) + " ns per read" +
             (per_read >= 500 ? ": a system call per stamp (TICKRAIL_CLOCK=tsc if the TSC is known stable)"
                              : ""));
  }
  detail::clock_source.store(source_, std::memory_order_release);
}

const Clock& Clock::instance() {
  static const Clock clock;
  return clock;
}

std::uint64_t detail::clock_now_first() noexcept {
  (void)Clock::instance();
  // instance() has set clock_source; read through the fast path now.
  return detail::clock_source.load(std::memory_order_relaxed) == ClockSource::tsc
             ? read_tsc()
             : monotonic_raw_ns();
}

std::uint64_t Clock::ns_to_cycles(double ns) const noexcept {
  if (!(ns > 0.0)) return 0;
  const double t = std::nearbyint(ns / ns_per_cycle_);
  if (t >= 18446744073709551615.0) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(t);
}

std::string Clock::describe() const {
  char buf[64];
  std::string s;
  if (source_ == ClockSource::tsc) {
    std::snprintf(buf, sizeof buf, "TSC %.3f GHz", cycles_per_ns());
    s = buf;
    s += flags_.invariant() ? ", invariant" : ", NOT invariant";
    if (!note_.empty()) s += " (" + note_ + ")";
  } else {
    s = "CLOCK_MONOTONIC_RAW";
    if (!note_.empty()) s += " (" + note_ + ")";
  }
  return s;
}

}  // namespace tickrail
