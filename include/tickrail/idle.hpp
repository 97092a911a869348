// Idle strategies for polling loops (Aeron's IdleStrategy, the Disruptor's WaitStrategy).
//
// A polling loop calls idle(work_count) after each poll with the amount of work it just did:
// with work_count > 0 the strategy returns at once and forgets its back-off; with 0 it idles
// according to its policy. Each object belongs to one thread.
//
//   BusySpin  one PAUSE instruction: lowest wake-up latency, burns the core (isolated cores)
//   Yield     sched_yield(): a system call by design, gives the core to other runnable tasks
//   Backoff   spins, then yields, then sleeps with an exponentially growing nanosleep
#pragma once

#include <sched.h>

#include <cstdint>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "tickrail/export.hpp"
#endif

namespace tickrail {

// One spin-wait hint: lets the sibling hyper-thread run and saves power without yielding.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

class TICKRAIL_API BusySpin {
 public:
  void idle(int work_count) noexcept {
    if (work_count > 0) return;
    cpu_relax();
  }
  void reset() noexcept {}
};

class TICKRAIL_API Yield {
 public:
  void idle(int work_count) noexcept {
    if (work_count > 0) return;
    sched_yield();
  }
  void reset() noexcept {}
};

struct TICKRAIL_API BackoffConfig {
  std::uint32_t max_spins = 10;           // PAUSE iterations before yielding
  std::uint32_t max_yields = 5;           // sched_yield() calls before sleeping
  std::uint64_t min_park_ns = 1'000;      // first sleep; doubles on each idle() after
  std::uint64_t max_park_ns = 1'000'000;  // sleep ceiling
};

class TICKRAIL_API Backoff {
 public:
  enum class State : std::uint8_t { not_idle, spinning, yielding, parking };

  // Throws Error(Errc::invalid_argument) when min_park_ns is 0 or above max_park_ns.
  explicit Backoff(const BackoffConfig& config = {});

  void idle(int work_count) noexcept {
    if (work_count > 0) {
      reset();
      return;
    }
    switch (state_) {
      case State::not_idle:
        state_ = State::spinning;
        spins_ = 1;
        cpu_relax();
        break;
      case State::spinning:
        cpu_relax();
        if (++spins_ > config_.max_spins) {
          state_ = State::yielding;
          yields_ = 0;
        }
        break;
      case State::yielding:
        if (++yields_ > config_.max_yields) {
          state_ = State::parking;
          park_ns_ = config_.min_park_ns;
        } else {
          sched_yield();
        }
        break;
      case State::parking:
        park();
        park_ns_ = park_ns_ >= config_.max_park_ns / 2 ? config_.max_park_ns : park_ns_ * 2;
        break;
    }
  }
  void reset() noexcept {
    state_ = State::not_idle;
    spins_ = 0;
    yields_ = 0;
    park_ns_ = config_.min_park_ns;
  }

  [[nodiscard]] State state() const noexcept { return state_; }
  // The sleep the next parking idle() will take.
  [[nodiscard]] std::uint64_t park_ns() const noexcept { return park_ns_; }
  [[nodiscard]] const BackoffConfig& config() const noexcept { return config_; }

 private:
  void park() const noexcept;  // nanosleep(park_ns_)

  BackoffConfig config_;
  State state_ = State::not_idle;
  std::uint32_t spins_ = 0;
  std::uint32_t yields_ = 0;
  std::uint64_t park_ns_ = 0;
};

enum class IdleKind : std::uint8_t { busy_spin, yield, backoff };

// "busy_spin" (or "busy-spin", "spin"), "yield", "backoff". Throws Error(Errc::config_error)
// naming the value and the accepted names.
[[nodiscard]] TICKRAIL_API IdleKind parse_idle_kind(std::string_view name);
[[nodiscard]] TICKRAIL_API const char* to_string(IdleKind kind) noexcept;

// A strategy chosen at run time (from configuration). The switch is predictable: one kind per
// loop for its whole life.
class TICKRAIL_API IdleStrategy {
 public:
  explicit IdleStrategy(IdleKind kind = IdleKind::busy_spin, const BackoffConfig& backoff = {})
      : kind_(kind), backoff_(backoff) {}

  void idle(int work_count) noexcept {
    switch (kind_) {
      case IdleKind::busy_spin: BusySpin{}.idle(work_count); break;
      case IdleKind::yield: Yield{}.idle(work_count); break;
      case IdleKind::backoff: backoff_.idle(work_count); break;
    }
  }
  void reset() noexcept { backoff_.reset(); }

  [[nodiscard]] IdleKind kind() const noexcept { return kind_; }
  [[nodiscard]] const Backoff& backoff() const noexcept { return backoff_; }

 private:
  IdleKind kind_;
  Backoff backoff_;
};

}  // namespace tickrail
