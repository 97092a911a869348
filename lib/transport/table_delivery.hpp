// TableDelivery: a subscriber delivering the publisher's last-value table: at a late join
// (start = snapshot) or after being lapped (policy = conflate).
//
// The table is read entry by entry while the publisher goes on writing it, so the copy is no
// consistent cut. It becomes one at E, the highest sequence number the copy holds: the ring has
// every tick from the reader's position P on (the publisher updates the table after the rings,
// and every entry read is at least as new as at P - 1), and rolling the copy forward with the
// ring's ticks up to E gives each entry its value at E. The app then gets the copy's entries
// (flagged kTickFromTable; never in the same poll as live ticks, and the delivery is over when
// the poll that delivered the last returns) and the live stream from E + 1: nothing reflected in
// the table again, nothing after it missed.
//
// Snapshot: P is the first sequence the publisher activated us at; ticks P..E that update no
// entry are the past the snapshot replaces (neither received nor lost). Conflation: the reader
// was lapped at N; it skips to P, the publisher's position when it looked, and ticks N..E count
// as lost (those of them in an entry reach the app through it); only entries that changed since
// N are delivered, the app has the others already.
//
// The copy waits until the publisher's table holds every tick below the reader's position (its
// table_next word), so that no entry it copies can lag the ring it rolls forward with.
//
// Steps run inside Subscriber::poll: loads and stores only, no allocation, no system call.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/last_value.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::detail {

class TableDelivery {
 public:
  enum class Why : std::uint8_t { snapshot, conflation };

  // Allocates the private copy. `table_next`: the publisher's word saying every tick below it is
  // in the table (it stores it after each table update); `published`: its next sequence (stored
  // before the table update: no entry it wrote can hold a sequence at or above it); `stall_cycles`: how long a delivery may
  // make no progress (an entry left busy, a ring that stops short of E: a publisher dead or
  // lying) before it is abandoned.
  TableDelivery(TableGeometry g, const std::atomic<std::uint64_t>* table_next,
                const std::atomic<std::uint64_t>* published, std::uint64_t stall_cycles);

  // Starts a delivery; `ring` has started.
  void begin(Why why, RingReader& ring) noexcept;
  // One step over the publisher's `table` and our `ring`: returns the ticks delivered.
  std::size_t step(Slot* table, RingReader& ring, TickSink sink, std::size_t limit) noexcept;

  [[nodiscard]] bool busy() const noexcept { return phase_ != Phase::idle; }
  [[nodiscard]] Why why() const noexcept { return why_; }
  [[nodiscard]] std::uint64_t entries_delivered() const noexcept { return entries_delivered_; }
  [[nodiscard]] std::uint64_t conflations() const noexcept { return conflations_; }
  [[nodiscard]] std::uint64_t abandoned() const noexcept { return abandoned_; }

  static constexpr std::size_t kEntriesPerStep = 4096;

 private:
  enum class Phase : std::uint8_t { idle, copy, roll, deliver };
  [[nodiscard]] std::uint64_t table_next() const noexcept {
    return table_next_->load(std::memory_order_acquire);
  }
  bool copy(Slot* table, RingReader& ring) noexcept;  // true: every entry copied
  void finish_copy() noexcept;
  void restart(RingReader& ring) noexcept;
  bool roll(RingReader& ring) noexcept;  // true: progress
  std::size_t deliver(TickSink sink, std::size_t limit) noexcept;
  void finish() noexcept;
  // No progress since stalled_since_ for longer than the budget: give up, counted.
  bool stalled(bool progress) noexcept;

  TableGeometry g_;
  std::vector<Tick> copy_;  // seq 0: nothing to deliver
  const std::atomic<std::uint64_t>* table_next_;
  const std::atomic<std::uint64_t>* published_;
  std::uint64_t stall_cycles_;
  Why why_ = Why::snapshot;
  Phase phase_ = Phase::idle;
  std::uint64_t since_ = 0;  // conflation: entries older than this were delivered live
  std::size_t cursor_ = 0;
  std::size_t last_ = 0;     // the last entry to deliver, + 1
  std::uint64_t end_ = 0;    // E
  std::uint64_t ring_lost_ = 0;  // the ring's lost count after our own discounts
  std::uint64_t stalled_since_ = 0;  // Clock cycles; 0: making progress
  std::uint64_t entries_delivered_ = 0;
  std::uint64_t conflations_ = 0;
  std::uint64_t abandoned_ = 0;
};

}  // namespace tickrail::detail
