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
#include <optional>
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
  // `by_default`: decided by the library, not by housekeeping_cpus; a thread started there moves
  // when another thread of the process becomes hot (HotCpus).
  explicit Placement(std::vector<int> list, bool by_default = false)
      : cpus_(std::move(list)), by_default_(by_default) {}

  // An endpoint's placement, from its housekeeping_cpus (the key's text; empty: the default).
  // A list naming a cpu this process may not use throws Error(config_error) naming the key, the
  // value and the cpus it may use. The default, decided from the calling thread's affinity and
  // the process's hot cpus (HotCpus): when it is pinned to some of the process's cpus, they
  // become hot; the result is the process's cpus off every hot one; when that leaves none, off the
  // calling thread's own; when it is not pinned and no cpu is hot, its own mask; when nothing is
  // left (one cpu), its own mask and a warning, logged once per process. Moves the process's
  // threads (log writer, stats) to the result, off the hot cpus. `who` names the endpoint.
  [[nodiscard]] static Placement for_endpoint(std::string_view housekeeping_cpus,
                                              std::string_view who);

  // Sorted cpus; empty: inherit.
  [[nodiscard]] const std::vector<int>& cpus() const noexcept { return cpus_; }
  [[nodiscard]] bool by_default() const noexcept { return by_default_; }
  // Sets `thread`'s affinity; false (errno-style code in `err`) when the kernel refused.
  bool apply(pthread_t thread, int& err) const noexcept;

 private:
  std::vector<int> cpus_;
  bool by_default_ = false;
};

// The default placement's cpus for a thread whose affinity is `mine`, in a process that may use
// `process`: process - mine when mine is a strict subset, else empty (inherit). Exposed for tests.
[[nodiscard]] std::vector<int> cpus_off(const std::vector<int>& process, const std::vector<int>& mine);
// The default placement's cpus, given the process's hot cpus and cpus_off() of the creating
// thread (`rest`): process - hot when that leaves some, else `rest`. Exposed for tests.
[[nodiscard]] std::vector<int> default_cpus(const std::vector<int>& process, const std::vector<int>& hot,
                                            const std::vector<int>& rest);

// The process's hot cpus are those of its pinned threads: a pinned thread that created an
// endpoint (hot for good), and, while one of these lives, a thread that claimed its cpus (a
// ThreadedPublisher's publishing thread). When more cpus become hot, every background thread
// placed by default, and the process's threads, move off them while another cpu is left.
class HotCpus {
 public:
  explicit HotCpus(std::vector<int> cpus);  // the cpus outside the process's are ignored
  ~HotCpus();
  HotCpus(const HotCpus&) = delete;
  HotCpus& operator=(const HotCpus&) = delete;

 private:
  std::vector<int> cpus_;
};

// Starts body(stop_token) on a new std::jthread named `name` (at most 15 characters) at
// `where`; returns once the thread is named and placed, before the body runs.
[[nodiscard]] std::jthread start_thread(const char* name, const Placement& where,
                                        std::function<void(std::stop_token)> body);

// A file descriptor that becomes readable once `stop` is requested: a background thread polls it
// beside its own, so that it can wait for its events without a period (no wake-ups while there is
// nothing to do) and still stop at once. fd() is -1 when no eventfd could be made: poll() then
// ignores it, and the thread's own bound on its wait is how soon it sees the stop.
class StopSignal {
 public:
  explicit StopSignal(const std::stop_token& stop);
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  struct Notify {
    int fd;
    void operator()() const noexcept;
  };
  int fd_;
  std::optional<std::stop_callback<Notify>> on_stop_;  // gone before fd_ is closed
};

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
