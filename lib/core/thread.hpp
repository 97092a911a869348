// The library's own threads: every one starts here, named and placed (docs/apps.md, "Threads").
//
// A name is what `top -H`, `ps -L` and /proc/<pid>/task/*/comm show: "tr-" and the job, at most
// 15 characters (pthread_setname_np's limit). A placement is the set of cpus an endpoint's
// background threads run on, decided once when the endpoint is created (the housekeeping_cpus
// key, or by default the cpus the creating thread is not pinned to). Control plane only.
#pragma once

#include <pthread.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tickrail/counters.hpp"

namespace tickrail::detail {

// Where background threads run.
class Placement {
 public:
  Placement() = default;  // where the creating thread may run: the mask a new thread inherits
  explicit Placement(std::vector<int> list) : cpus_(std::move(list)) {}

  // An endpoint's placement, from its housekeeping_cpus (the key's text; empty: the default).
  // A list naming a cpu this process may not use throws Error(config_error) naming the key, the
  // value and the cpus it may use. The default, decided from the calling thread's affinity: when
  // it is pinned to some of the process's cpus, the others; when it is not pinned, its own mask;
  // when nothing is left (one cpu), its own mask and a warning, logged once per process. Moves
  // the process's threads (log writer, stats) to the result. `who` names the endpoint in messages.
  [[nodiscard]] static Placement for_endpoint(std::string_view housekeeping_cpus,
                                              std::string_view who);

  // Sorted cpus; empty: inherit.
  [[nodiscard]] const std::vector<int>& cpus() const noexcept { return cpus_; }
  // Sets `thread`'s affinity; false (errno-style code in `err`) when the kernel refused.
  bool apply(pthread_t thread, int& err) const noexcept;

 private:
  std::vector<int> cpus_;
};

// The default placement's cpus for a thread whose affinity is `mine`, in a process that may use
// `process`: process - mine when mine is a strict subset, else empty (inherit). Exposed for tests.
[[nodiscard]] std::vector<int> cpus_off(const std::vector<int>& process, const std::vector<int>& mine);

// Starts body(stop_token) on a new std::jthread named `name` (at most 15 characters) at
// `where`; returns once the thread is named and placed, before the body runs.
[[nodiscard]] std::jthread start_thread(const char* name, const Placement& where,
                                        std::function<void(std::stop_token)> body);

// Names the calling thread (at most 15 characters; longer names are cut).
void name_current_thread(const char* name) noexcept;

// A process-wide thread (the log writer, the stats thread): registered while it runs, so that
// each new endpoint's placement moves it too. The thread itself constructs one, first thing.
class ProcessThread {
 public:
  explicit ProcessThread(const char* name) noexcept;
  ~ProcessThread();
  ProcessThread(const ProcessThread&) = delete;
  ProcessThread& operator=(const ProcessThread&) = delete;
};
// Registers and unregisters the calling thread, for threads whose start and end are callbacks
// (spdlog's pool). Names it and places it at the last endpoint's placement.
void enter_process_thread(const char* name) noexcept;
void leave_process_thread() noexcept;

// Counts one background thread's wake-ups into a word of its endpoint's live counters, once the
// endpoint has one. The thread calls tick() once per loop iteration; the endpoint attaches the
// word after registering its counters and detaches it before releasing them. A mutex, not an
// atomic pointer: after detach() returns, the thread no longer writes to the word.
class WakeCounter {
 public:
  void tick() noexcept {
    std::lock_guard lock(mutex_);
    ++count_;
    if (word_ != nullptr) word_->store(count_, std::memory_order_relaxed);
  }
  void attach(stats::Word* word) noexcept {
    std::lock_guard lock(mutex_);
    word_ = word;
    if (word_ != nullptr) word_->store(count_, std::memory_order_relaxed);
  }
  void detach() noexcept { attach(nullptr); }
  [[nodiscard]] std::uint64_t count() const noexcept {
    std::lock_guard lock(mutex_);
    return count_;
  }

 private:
  mutable std::mutex mutex_;
  stats::Word* word_ = nullptr;
  std::uint64_t count_ = 0;
};

}  // namespace tickrail::detail
