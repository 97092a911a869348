// Lets close(), from any thread, take a data path over from the one thread that runs it, for
// one plain store and one load per data-path call (Aeron's offer reads one flag; the locked
// exchange this replaces cost a full fence on every publish).
//
// The ordering is Dekker's: the data path stores busy_ = true and then loads closing_; close()
// stores closing_ = true and then loads busy_. At least one of them must see the other's store,
// or both would go ahead. That needs a full fence between the store and the load on both sides;
// here the data path has only a compiler fence, and close() runs membarrier(2), which makes
// every running thread of the process pass a full fence. Where the publishing thread's fence
// falls decides the case:
//   - before its store of busy_: its load of closing_ comes after the fence and sees true;
//     enter() fails and the data path touches nothing;
//   - after its store: close() sees busy_ == true and waits for leave(), whose release store
//     orders every data-path access before close()'s acquire load that sees it false.
// Where the kernel has no membarrier (or a sandbox forbids it), enter() pays a full fence
// instead: chosen once per process, the data path tests a constant flag.
//
// Only one thread may enter() at a time (the data path's own rule); close() is idempotent.
#pragma once

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace tickrail::rdma {

class CloseGuard {
 public:
  // Control plane (a system call the first time in a process).
  CloseGuard() noexcept : full_fence_(process_barrier() == Barrier::none) {}
  CloseGuard(const CloseGuard&) = delete;
  CloseGuard& operator=(const CloseGuard&) = delete;

  // Data path: true to go ahead (call leave() when done), false once close() has begun (then
  // touch nothing and do not call leave()).
  [[nodiscard]] bool enter() noexcept {
    busy_.store(true, std::memory_order_relaxed);
    if (full_fence_) [[unlikely]] {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_signal_fence(std::memory_order_seq_cst);  // close()'s membarrier does the rest
    }
    if (closing_.load(std::memory_order_relaxed)) [[unlikely]] {
      busy_.store(false, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void leave() noexcept { busy_.store(false, std::memory_order_release); }

  // Any thread. The first call returns true once no data-path call is running: from then on the
  // data path belongs to the caller, and enter() fails for good. Later calls return false at once.
  [[nodiscard]] bool close() noexcept {
    if (closing_.exchange(true, std::memory_order_seq_cst)) return false;
    switch (process_barrier()) {
      case Barrier::private_expedited:
        // Registered at construction, so it cannot fail but for a kernel bug: then the slow one.
        if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) break;
        [[fallthrough]];
      case Barrier::global:
        (void)membarrier(MEMBARRIER_CMD_GLOBAL);
        break;
      case Barrier::none:
        break;  // enter() fences itself
    }
    // A data-path call never blocks, so this wait is short.
    while (busy_.load(std::memory_order_acquire)) std::this_thread::yield();
    return true;
  }

  // Any thread: close() has begun.
  [[nodiscard]] bool closing() const noexcept { return closing_.load(std::memory_order_acquire); }

 private:
  enum class Barrier { private_expedited, global, none };

  static long membarrier(int cmd) noexcept { return ::syscall(__NR_membarrier, cmd, 0u, 0); }

  // Asked once per process: the expedited barrier (registered here, as it must be before use),
  // the slow global one, or none.
  static Barrier process_barrier() noexcept {
    static const Barrier b = [] {
      const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
      if (cmds < 0) return Barrier::none;
      if ((cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
          membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
        return Barrier::private_expedited;
      }
      if ((cmds & MEMBARRIER_CMD_GLOBAL) != 0) return Barrier::global;
      return Barrier::none;
    }();
    return b;
  }

  const bool full_fence_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> closing_{false};
};

}  // namespace tickrail::rdma
