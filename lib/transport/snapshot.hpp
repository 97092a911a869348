// SnapshotJoin: a subscriber's start from the publisher's last-value table (start = snapshot).
//
// The table is read entry by entry while the publisher goes on writing it, so the copy is no
// consistent cut. It becomes one at E, the highest sequence number the copy holds: the ring has
// every tick from our first sequence S on (the publisher updates the table after the rings, and
// activated us between two publishes, so every entry read is at least as new as at S - 1), and
// rolling the copy forward with the ring's ticks up to E gives each entry its value at E. The
// app then gets the copy's entries (flagged kTickFromTable, the last also kTickLastOfTable) and
// the live stream from E + 1: nothing reflected in the snapshot again, nothing after it missed.
// Ticks S..E that update no entry are part of the past the snapshot replaces.
//
// Steps run inside Subscriber::poll: copies and stores only, a bounded amount per call.
#pragma once

#include <cstdint>
#include <vector>

#include "core/last_value.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::detail {

class SnapshotJoin {
 public:
  explicit SnapshotJoin(TableGeometry g);  // allocates the private copy

  // One step over the publisher's `table`, our started `ring`, and `published` (a function
  // returning the publisher's next sequence, read after the entries): returns ticks delivered.
  template <class Published>
  std::size_t step(Slot* table, RingReader& ring, Published&& published, TickSink sink,
                   std::size_t limit) noexcept {
    switch (phase_) {
      case Phase::copy:
        if (copy(table, ring)) finish_copy(published());
        return 0;
      case Phase::roll: roll(ring); return 0;
      case Phase::deliver: return deliver(sink, limit);
      case Phase::done: return 0;
    }
    return 0;
  }
  [[nodiscard]] bool done() const noexcept { return phase_ == Phase::done; }
  // Ring ticks consumed to roll the copy forward: not delivered, not received.
  [[nodiscard]] std::uint64_t absorbed() const noexcept { return absorbed_; }
  [[nodiscard]] std::uint64_t delivered() const noexcept { return delivered_; }
  [[nodiscard]] std::uint64_t rejected() const noexcept { return rejected_; }
  // Where the live stream resumes (E + 1), once done.
  [[nodiscard]] std::uint64_t end() const noexcept { return end_ + 1; }
  // Clock cycles from the first step to the last entry delivered.
  [[nodiscard]] std::uint64_t cycles() const noexcept { return done_at_ - started_at_; }

  static constexpr std::size_t kEntriesPerStep = 4096;

 private:
  enum class Phase : std::uint8_t { copy, roll, deliver, done };
  bool copy(Slot* table, RingReader& ring) noexcept;  // true: every entry copied
  void finish_copy(std::uint64_t published) noexcept;
  void roll(RingReader& ring) noexcept;
  std::size_t deliver(TickSink sink, std::size_t limit) noexcept;
  void restart(RingReader& ring) noexcept;
  void finish() noexcept;

  TableGeometry g_;
  std::vector<Tick> copy_;  // seq 0: empty
  Phase phase_ = Phase::copy;
  std::size_t cursor_ = 0;
  std::size_t last_ = 0;     // the last non-empty entry, + 1
  std::uint64_t end_ = 0;    // E
  std::uint64_t lost_at_copy_ = 0;
  std::uint64_t absorbed_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t rejected_ = 0;
  std::uint64_t started_at_ = 0;
  std::uint64_t done_at_ = 0;
};

}  // namespace tickrail::detail
