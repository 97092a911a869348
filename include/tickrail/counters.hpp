// The counters of publishers and subscribers, said once.
//
// Each row of the two tables below is one counter: its name (the member of PublisherCounters or
// SubscriberCounters, the key in tickrail-stat's table and JSON, the stem of its Prometheus
// metric), where it lives, whether it only grows, and what it means. Everything else is derived
// from the rows: the structs here, the counter indices of the process's live counters (whose file
// layout is the library's own), their names, help texts and the copy into the live counters (the
// idea of Aeron's system counters: one table, and a static_assert on its size).
//
// Columns: X(name, where, kind, help)
//   where  api:    a member of the struct, copied into the live counters
//          live:   in the live counters only, filled by the Subscriber itself
//          thread: in the live counters only, written by one of the library's background
//                  threads (docs/apps.md, "Threads") into words apart from the hot ones, so that its
//                  wake-ups never touch the lines the publishing or polling thread writes
//   kind   counter: only grows (Prometheus *_total); gauge: goes up and down
//
// Rows are only ever appended: a counter's index in the live counters file never changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "tickrail/config.hpp"
#include "tickrail/ring.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#else
#include <time.h>
#include "tickrail/export.hpp"
#endif

// clang-format off
#define TICKRAIL_PUBLISHER_COUNTERS(X)                                                             \
  X(published, api, counter, "Ticks sequenced by the publisher.")                                 \
  X(back_pressured, api, counter,                                                                  \
    "Publish calls that could not deliver every tick (a full subscriber ring held the publisher back).") \
  X(unheard, api, counter, "Ticks sequenced while no subscriber was attached.")                    \
  X(evictions, api, counter, "Subscribers evicted by the disconnect slow-consumer policy.")        \
  X(reclaimed, api, counter, "Slots of dead subscribers reclaimed.")                              \
  X(completion_errors, api, counter, "RDMA work completions with an error status.")               \
  X(background_wakeups, thread, counter,                                                           \
    "Wake-ups of the publisher's background thread (tr-shm-cond, tr-rc-cm or tr-ud-recov).")       \
  X(stats_wakeups, thread, counter,                                                                \
    "Wake-ups of the process's stats thread (tr-stats), which refreshes this publisher's rows.")   \
  X(state_entries, api, gauge, "Entries of the last-value table written at least once.")          \
  X(state_beyond, api, counter,                                                                    \
    "Ticks of a class the last-value table keeps, for an instrument beyond its capacity.")

// received + lost always equals the ticks published from the subscriber's first sequence up to
// its position (Subscriber::next_sequence()), including ticks lapped before its first receipt.
// Ring transports: laps = ceil(lost / ring capacity), the times the publisher overtook it by a
// whole ring (the publisher is then lost + up to a ring of unread ticks ahead); a subscriber that
// stays lapped resumes many times per lap, each time after a run of lost ticks: the skips.
// UD has no ring to lap (laps stay 0): each run of ticks lost for good (its recovery history
// overtaken, or no recovery) is a skip.
#define TICKRAIL_SUBSCRIBER_COUNTERS(X)                                                            \
  X(received, api, counter, "Ticks delivered to the subscriber's handler.")                        \
  X(lost, api, counter, "Ticks lost for good (lapped by the publisher, unrecoverable gaps).")      \
  X(laps, api, counter, "Times the publisher lapped the subscriber by a whole ring.")              \
  X(position, live, gauge, "Next sequence number the subscriber expects.")                         \
  X(gaps, api, counter, "Sequence gaps detected (ud).")                                            \
  X(recovered, api, counter, "Ticks recovered after a gap (ud).")                                  \
  X(foreign, api, counter, "Datagrams from another channel or session (ud).")                      \
  X(malformed, api, counter, "Datagrams that did not decode (ud).")                                \
  X(completion_errors, api, counter, "RDMA work completions with an error status.")                \
  X(max_poll_gap_cycles, live, gauge, "Longest interval between two polls, in TSC cycles.")        \
  X(skips, api, counter,                                                                           \
    "Runs of lost ticks skipped (resuming after being lapped; ud: runs lost for good).")          \
  X(background_wakeups, thread, counter,                                                           \
    "Wake-ups of the subscriber's background thread (tr-rc-cm or tr-ud-cond; shm has none).")      \
  X(from_table, api, counter,                                                                      \
    "Ticks delivered from the publisher's last-value table (a snapshot or a conflation), not live.") \
  X(conflations, api, counter,                                                                     \
    "Times the subscriber (policy conflate) was lapped and caught up through the last-value table.") \
  X(table_abandoned, api, counter,                                                                 \
    "Snapshots or conflations given up after publisher_timeout without progress (publisher dead or lying).")
// clang-format on

#define TICKRAIL_DETAIL_MEMBER_api(name) std::uint64_t name = 0;
#define TICKRAIL_DETAIL_MEMBER_live(name)
#define TICKRAIL_DETAIL_MEMBER_thread(name)
#define TICKRAIL_DETAIL_MEMBER(name, where, kind, help) TICKRAIL_DETAIL_MEMBER_##where(name)
#define TICKRAIL_DETAIL_INDEX(name, where, kind, help) name,

namespace tickrail {

struct TICKRAIL_API PublisherCounters {
  TICKRAIL_PUBLISHER_COUNTERS(TICKRAIL_DETAIL_MEMBER)
};

struct TICKRAIL_API SubscriberCounters {
  TICKRAIL_SUBSCRIBER_COUNTERS(TICKRAIL_DETAIL_MEMBER)
};

// One subscriber as its publisher sees it (Publisher::subscribers(), and a row of the live
// counters).
struct TICKRAIL_API SubscriberStatus {
  std::uint32_t slot = 0;
  int pid = 0;                 // shm: the subscriber's process
  std::string peer;            // rdma: the subscriber's address
  SlowConsumerPolicy policy{};
  std::string state;           // "requested", "active", "evicted", ...
  std::uint64_t position = 0;  // next sequence it expects (its credit)
  std::uint64_t lag = 0;       // ticks published that it has not consumed
  std::uint64_t back_pressure = 0;  // times its full ring held the publisher back (0: not known)
};

// ---- live counters: what Publisher and Subscriber keep inline --------------------------------
// The file, its layout and its readers are internal to the library and its tools.
namespace stats {

// Counter indices in an endpoint's live counters: the rows of the tables, in order.
enum class PubCounter : std::uint32_t { TICKRAIL_PUBLISHER_COUNTERS(TICKRAIL_DETAIL_INDEX) count_ };
enum class SubCounter : std::uint32_t { TICKRAIL_SUBSCRIBER_COUNTERS(TICKRAIL_DETAIL_INDEX) count_ };
// Counter words per endpoint in the live counters file.
inline constexpr std::uint32_t kCounters = 16;
static_assert(static_cast<std::uint32_t>(PubCounter::count_) <= kCounters);
static_assert(static_cast<std::uint32_t>(SubCounter::count_) <= kCounters);

struct Block;                                // the file's layout (lib/core/stats.hpp)
enum class EndpointState : std::uint32_t;   // open, connecting, active, ... (lib/core/stats.hpp)
struct RegistrationAccess;                   // the registry that hands out blocks
using Word = std::atomic<std::uint64_t>;

// Cycle counter for the poll-gap measurement: RDTSC without fences (the order of the read
// relative to the poll does not matter for an interval of this size).
[[nodiscard]] inline std::uint64_t cycles() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
#endif
}

// Ownership of one endpoint's block of live counters. Move-only; destroying it releases the
// block (and the file with the last block). Empty when counters are off.
class TICKRAIL_API Registration {
 public:
  Registration() noexcept = default;
  ~Registration() { reset(); }
  Registration(Registration&& o) noexcept
      : block_(o.block_), counters_(o.counters_), epoch_(o.epoch_) {
    o.block_ = nullptr;
    o.counters_ = nullptr;
  }
  Registration& operator=(Registration&& o) noexcept {
    if (this != &o) {
      reset();
      block_ = o.block_;
      counters_ = o.counters_;
      epoch_ = o.epoch_;
      o.block_ = nullptr;
      o.counters_ = nullptr;
    }
    return *this;
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  [[nodiscard]] Block* block() const noexcept { return block_; }
  explicit operator bool() const noexcept { return block_ != nullptr; }
  // Hot path: a relaxed store (a plain move on x86) into lines only this endpoint's thread
  // writes. Only on a registration that holds a block.
  void put(PubCounter c, std::uint64_t v) const noexcept {
    counters_[static_cast<std::uint32_t>(c)].store(v, std::memory_order_relaxed);
  }
  void put(SubCounter c, std::uint64_t v) const noexcept {
    counters_[static_cast<std::uint32_t>(c)].store(v, std::memory_order_relaxed);
  }
  // Any thread; no-op when empty.
  void set_state(EndpointState s) const noexcept;
  void reset() noexcept;

 private:
  friend struct RegistrationAccess;
  Registration(Block* b, Word* counters, std::uint64_t epoch) noexcept
      : block_(b), counters_(counters), epoch_(epoch) {}
  Block* block_ = nullptr;
  Word* counters_ = nullptr;  // block_'s counter words
  std::uint64_t epoch_ = 0;   // the registry's epoch: a forked child does not release our blocks
};

// The polling side of a Subscriber: its block, and the longest interval between two polls.
// One thread.
//
// The interval is read with RDTSC, which costs ~25 cycles (about 12 ns on the EPYC VMs this was
// measured on) against well under a nanosecond for an empty poll of a ring: read on every poll,
// it would lengthen a spinning loop's period several times over and delay the detection of the
// next tick. So a spinning loop reads it on every kStampEvery-th poll, and on the poll right
// after one that delivered ticks (whose handler may have run long). A gap is thus measured
// from a stamp at most kStampEvery - 1 empty polls earlier: the maximum may overstate the true
// one by that many empty polls (tens of ns), never understate it.
class TICKRAIL_API PollProbe {
 public:
  static constexpr std::uint32_t kStampEvery = 16;

  PollProbe() noexcept = default;
  explicit PollProbe(Registration r) noexcept : reg_(std::move(r)) {}

  [[nodiscard]] bool on() const noexcept { return reg_.block() != nullptr; }
  [[nodiscard]] Registration& registration() noexcept { return reg_; }
  [[nodiscard]] const Registration& registration() const noexcept { return reg_; }

  // At the start of every poll: a decrement and a branch; RDTSC and a compare when it is time
  // to stamp; a store only when the maximum grows.
  void note_poll() noexcept {
    if (--countdown_ != 0) [[likely]] return;
    countdown_ = kStampEvery;
    const std::uint64_t now = cycles();
    const std::uint64_t prev = last_;
    last_ = now;
    if (now - prev > max_gap_) [[unlikely]] grow(now - prev, prev);
  }
  // After a poll that delivered ticks: stamp at the start of the next one.
  void note_delivered() noexcept { countdown_ = 1; }
  // After a ring poll that delivered ticks: what the reader counted.
  void note_ring(const RingReader& r) noexcept {
    reg_.put(SubCounter::received, r.received());
    reg_.put(SubCounter::lost, r.lost());
    reg_.put(SubCounter::laps, r.laps());
    reg_.put(SubCounter::position, r.next_seq());
    reg_.put(SubCounter::skips, r.skips());
    countdown_ = 1;
  }
  [[nodiscard]] std::uint64_t max_gap_cycles() const noexcept { return max_gap_; }

 private:
  void grow(std::uint64_t gap, std::uint64_t prev) noexcept {
    if (prev == 0) return;  // first stamp: no interval yet
    max_gap_ = gap;
    reg_.put(SubCounter::max_poll_gap_cycles, gap);
  }

  Registration reg_;
  std::uint64_t last_ = 0;
  std::uint64_t max_gap_ = 0;
  std::uint32_t countdown_ = 1;  // the first poll stamps
};

}  // namespace stats
}  // namespace tickrail
