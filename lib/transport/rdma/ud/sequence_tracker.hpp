// Per-session sequence tracking over a bounded reorder window: what a UD subscriber delivers,
// holds, recovers and gives up, knowing nothing of verbs (tested without a device).
//
// The stream is the publisher's sequence 1, 2, 3...; the tracker delivers it in order from
// `next()`. Ticks ahead of next() wait in a window of `capacity` slots (a power of two; tick s in
// slot s & (capacity - 1), present when the slot's sequence word equals s). `highest()` is one
// past the highest sequence known to exist (from data, or from a heartbeat's latest). Every
// sequence below highest() is, exactly once, either delivered or counted lost:
//   - a hole [next(), ...) is filled by multicast (late: "reordered") or by recovery
//     (recovered()), which may also report ticks overwritten in the publisher's history: those
//     are marked lost and counted when delivery reaches them;
//   - a tick beyond the window is not stored ("overrun"): it stays a hole, left to recovery;
//   - give_up(upto) declares every hole below `upto` lost (no recovery possible);
//   - cover(upto, read_until): the FailoverSubscriber delivered the stream below `upto` (the other
//     line brought it, or it gave a hole up): holes below it are passed without a read and
//     without a loss ("covered"). Present ticks
//     below it are still delivered (the other line's duplicates). From the first cover on, a read
//     is one run of missing ticks only, and stops at `read_until`: the other line brought what
//     lies beyond it.
// A lost run is counted once in loss_events (the "skips" of SubscriberCounters).
//
// Single thread; no allocation (the window belongs to the caller), no system call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tickrail/tick.hpp"

namespace tickrail::rdma::ud {

struct TrackerCounters {
  std::uint64_t delivered = 0;    // ticks handed to the application
  std::uint64_t lost = 0;         // ticks skipped for good
  std::uint64_t loss_events = 0;  // runs of lost ticks
  std::uint64_t gaps = 0;         // times a datagram or heartbeat showed ticks we had not seen
  std::uint64_t duplicates = 0;   // ticks received again (already held or delivered)
  std::uint64_t reordered = 0;    // ticks that filled a hole by multicast, arriving late
  std::uint64_t recovered = 0;    // ticks that filled a hole by recovery
  std::uint64_t overrun = 0;      // ticks not stored: beyond the window (left to recovery)
  std::uint64_t covered = 0;      // holes passed because the failover delivered past them (cover)
};

struct Hole {
  std::uint64_t lo = 0;  // first missing sequence
  std::uint64_t hi = 0;  // one past the last sequence to fetch (may include present ones)
  [[nodiscard]] bool empty() const noexcept { return hi <= lo; }
  [[nodiscard]] std::uint64_t size() const noexcept { return hi > lo ? hi - lo : 0; }
};

class SequenceTracker {
 public:
  static constexpr std::uint64_t kLostMark = std::uint64_t{1} << 63;

  SequenceTracker() noexcept = default;
  // `window` holds `capacity` ticks (a power of two), zeroed.
  SequenceTracker(Tick* window, std::uint32_t capacity) noexcept
      : window_(window), mask_(capacity - 1), capacity_(capacity) {}

  [[nodiscard]] bool started() const noexcept { return next_ != 0; }
  // The first sequence to deliver (live join: the first seen; late join: K before it), and
  // one past the highest known to exist (late join: the first seen, making [first, known) a
  // hole to recover rather than a gap).
  void start(std::uint64_t first, std::uint64_t known = 0) noexcept {
    next_ = first != 0 ? first : 1;
    if (highest_ < next_) highest_ = next_;
    if (highest_ < known) highest_ = known;
  }

  [[nodiscard]] std::uint64_t next() const noexcept { return next_; }
  [[nodiscard]] std::uint64_t highest() const noexcept { return highest_; }
  [[nodiscard]] std::uint32_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] const TrackerCounters& counters() const noexcept { return c_; }
  // Holes or held ticks between next() and highest().
  [[nodiscard]] bool behind() const noexcept { return next_ < highest_; }

  // A datagram or heartbeat says ticks [first, end) exist. Counts a gap when it opens one.
  // Returns true when the datagram is late: it starts below what was already known to exist.
  bool observe(std::uint64_t first, std::uint64_t end) noexcept {
    const bool late = first < highest_;
    if (first > highest_ && end > highest_) ++c_.gaps;
    if (end > highest_) highest_ = end;
    return late;
  }

  // Fast path: the datagram starting at `first` continues the stream with nothing held, so its
  // ticks can be delivered straight from the receive buffer (then call delivered_direct).
  [[nodiscard]] bool in_order(std::uint64_t first) const noexcept {
    return first == next_ && held_ == 0;
  }
  void delivered_direct(std::uint32_t n) noexcept {
    next_ += n;
    c_.delivered += n;
    lost_run_ = false;
  }

  enum class Source : std::uint8_t { live, late, recovery };
  enum class Stored : std::uint8_t { stored, duplicate, overrun };
  // Holds tick `t` (its seq field is its sequence): from a datagram (late when observe() said
  // so) or from recovery.
  Stored store(const Tick& t, Source source) noexcept {
    const std::uint64_t s = t.seq;
    if (s < next_) {
      ++c_.duplicates;
      return Stored::duplicate;
    }
    if (s - next_ >= capacity_) {
      ++c_.overrun;
      return Stored::overrun;
    }
    Tick& slot = window_[s & mask_];
    if (slot.seq == s) {
      ++c_.duplicates;
      return Stored::duplicate;
    }
    std::memcpy(&slot, &t, sizeof t);
    slot.flags = static_cast<std::uint16_t>(slot.flags & ~kTickFromTable);  // live, whatever was sent
    ++held_;
    if (source == Source::recovery) {
      ++c_.recovered;
    } else if (source == Source::late) {
      ++c_.reordered;
    }
    return Stored::stored;
  }

  // Delivers up to `limit` ticks in order to handler(const Tick&); skips (and counts) lost
  // ones. Returns how many were delivered.
  template <class Handler>
  std::size_t deliver(Handler&& handler, std::size_t limit) noexcept {
    std::size_t n = 0;
    while (n < limit && next_ < highest_) {
      Tick& slot = window_[next_ & mask_];
      if (slot.seq == next_) {
        alignas(kCacheLine) Tick t;
        std::memcpy(&t, &slot, sizeof t);
        slot.seq = 0;
        --held_;
        ++next_;
        ++n;
        lost_run_ = false;
        passing_ = false;
        handler(static_cast<const Tick&>(t));
      } else if (next_ < covered_until_) {
        if (held_ == 0) {
          // Nothing held: the covered run is passed in one step, however long.
          const std::uint64_t to = std::min(covered_until_, highest_);
          c_.covered += to - next_;
          next_ = to;
        } else {
          if (slot.seq == (next_ | kLostMark)) slot.seq = 0;
          ++next_;
          ++c_.covered;
        }
        lost_run_ = false;
      } else if (slot.seq == (next_ | kLostMark) || next_ < abandon_until_) {
        if (stop_at_loss_ && !passing_) [[unlikely]] {
          lapped_ = true;
          break;
        }
        if (slot.seq == (next_ | kLostMark)) slot.seq = 0;
        ++next_;
        ++c_.lost;
        if (!lost_run_) ++c_.loss_events;
        lost_run_ = true;
      } else {
        break;
      }
    }
    c_.delivered += n;
    return n;
  }

  // The first run to recover: from the first missing sequence at or after next() and the
  // covered range, at most
  // `max_len` long, within the window and below highest(), trimmed of present ticks at its end.
  [[nodiscard]] Hole first_hole(std::uint64_t max_len) const noexcept;

  // The result of recovering [lo, lo + n): `ticks[i]` is what the publisher's history held for
  // lo + i. A tick with that sequence fills its hole; a newer one (or a slot being rewritten:
  // sequence 0) means lo + i is gone: marked lost. Returns how many were stored.
  std::uint64_t recovered(const Tick* ticks, std::uint64_t lo, std::uint64_t n) noexcept;

  // No recovery is possible: every hole below `upto` is lost (counted as delivery reaches it).
  void give_up(std::uint64_t upto) noexcept {
    if (upto > abandon_until_) abandon_until_ = upto;
  }

  // A conflating subscriber stops where a tick is lost for good instead of passing it: lapped()
  // says so until it moves on with skip_to().
  void stop_at_loss(bool on) noexcept { stop_at_loss_ = on; }
  [[nodiscard]] bool lapped() const noexcept { return lapped_; }
  // The table cannot be read now: this run of lost ticks is passed and counted, as without
  // stop_at_loss (the next run stops again).
  void pass_loss() noexcept {
    lapped_ = false;
    passing_ = true;
  }
  // Moves ahead to `seq`: what it skips, held or not, counts as lost (one run).
  void skip_to(std::uint64_t seq) noexcept {
    lapped_ = false;
    if (seq <= next_) return;
    // Every held tick is within a window of next_: clearing that far clears them all.
    const std::uint64_t end = std::min<std::uint64_t>(seq, next_ + capacity_);
    for (std::uint64_t s = next_; s < end; ++s) {
      Tick& slot = window_[s & mask_];
      if (slot.seq == s) {
        slot.seq = 0;
        --held_;
      } else if (slot.seq == (s | kLostMark)) {
        slot.seq = 0;
      }
    }
    c_.lost += seq - next_;
    if (!lost_run_) ++c_.loss_events;
    lost_run_ = true;
    next_ = seq;
    if (highest_ < seq) highest_ = seq;
  }
  // Ticks delivered to a table delivery's roll forward did not reach the app: not delivered;
  // with `lost`, lost.
  void discount(std::uint64_t n, bool lost) noexcept {
    c_.delivered -= n;
    if (lost) c_.lost += n;
  }

  // Another line delivered every sequence below `upto`, and brought `read_until` (~0: nothing
  // known): holes below `upto` need no recovery and are no loss; a hole at or after it is read
  // only up to `read_until`. Only sequences known to exist (below highest()) are passed.
  void cover(std::uint64_t upto, std::uint64_t read_until = ~std::uint64_t{0}) noexcept {
    if (upto > covered_until_) covered_until_ = upto;
    read_until_ = read_until;
    covering_ = true;
  }

 private:
  Tick* window_ = nullptr;
  std::uint64_t mask_ = 0;
  std::uint32_t capacity_ = 0;
  std::uint32_t held_ = 0;     // ticks present in the window
  std::uint64_t next_ = 0;     // 0: not started
  std::uint64_t highest_ = 0;  // one past the highest sequence known to exist
  bool stop_at_loss_ = false;
  bool lapped_ = false;
  bool passing_ = false;  // pass_loss(): until the next tick delivered
  std::uint64_t abandon_until_ = 0;  // holes below this are lost (give_up)
  std::uint64_t covered_until_ = 0;  // holes below this were delivered by another line (cover)
  std::uint64_t read_until_ = ~std::uint64_t{0};  // the other line brought this (cover)
  bool covering_ = false;  // cover() was called: reads are one missing run each
  bool lost_run_ = false;
  TrackerCounters c_{};
};

}  // namespace tickrail::rdma::ud
