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
// Where the copy comes from is a TableSource: the table mapped here (shm: loads), or read with
// RDMA READ into a local buffer (rc, ud). What it is rolled forward with is a TickFeed: the
// subscriber's ring (shm, rc: RingFeed), or a UD subscriber's ordered stream, which recovery
// fills from the publisher's history. The algorithm is the same; only these two differ.
//
// Steps run inside Subscriber::poll: no allocation, no system call of ours.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/last_value.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::detail {

// The publisher's table as a delivery fetches it. Each call is one bounded step; a source that
// must wait for its memory (an RDMA READ in flight) says so and is called again on a later poll.
class TableSource {
 public:
  virtual ~TableSource() = default;
  // Forgets a copy or look in progress: the next copy starts at entry 0.
  virtual void restart() noexcept = 0;
  // The publisher's table_next word (every tick below it is in the table) as of now; 0 while
  // the look is under way. Once it has returned a value, the next call looks afresh.
  virtual std::uint64_t look() noexcept = 0;
  // Copies entries from `cursor` on into out[cursor..] (seq 0: never written), each one an
  // untorn copy of what the publisher wrote; returns the new cursor (out.size(): all copied).
  virtual std::size_t copy(std::span<Tick> out, std::size_t cursor) noexcept = 0;
};

// A table in this process's memory (shm: the publisher's mapped read-only), read with loads.
class MappedTableSource final : public TableSource {
 public:
  MappedTableSource(Slot* table, const std::atomic<std::uint64_t>* table_next) noexcept
      : table_(table), table_next_(table_next) {}
  void restart() noexcept override {}
  std::uint64_t look() noexcept override { return table_next_->load(std::memory_order_acquire); }
  std::size_t copy(std::span<Tick> out, std::size_t cursor) noexcept override;

  static constexpr std::size_t kEntriesPerStep = 4096;

 private:
  Slot* table_;
  const std::atomic<std::uint64_t>* table_next_;
};

// The ordered stream a delivery rolls its copy forward with, and skips along when lapped. Called
// only while a delivery is under way: the steady-state poll does not go through it.
class TickFeed {
 public:
  virtual ~TickFeed() = default;
  [[nodiscard]] virtual std::uint64_t next_seq() const noexcept = 0;
  // Delivers up to `limit` ticks in sequence order from next_seq() on.
  virtual std::size_t poll(TickSink sink, std::size_t limit) noexcept = 0;
  // Found lapped (ticks lost for good at next_seq()): stopped there, until skip_to().
  [[nodiscard]] virtual bool lapped() const noexcept = 0;
  // Moves ahead to `seq`, counting what it skips as lost.
  virtual void skip_to(std::uint64_t seq) noexcept = 0;
  // A delivery given up while lapped: go on live, as a feed that does not stop at laps would
  // (else the next poll finds the same lap and starts a delivery again, live ticks never come).
  virtual void pass_lap() noexcept = 0;
  [[nodiscard]] virtual std::uint64_t lost() const noexcept = 0;
  // Ticks polled by the roll forward did not reach the app: not received; with `lost`, lost.
  virtual void discount(std::uint64_t n, bool lost) noexcept = 0;
  // How far past the table's bound an entry of the batch in flight may be.
  [[nodiscard]] virtual std::uint64_t slack() const noexcept = 0;
};

// The subscriber's ring as a TickFeed.
class RingFeed final : public TickFeed {
 public:
  explicit RingFeed(RingReader& r) noexcept : r_(&r) {}
  std::uint64_t next_seq() const noexcept override { return r_->next_seq(); }
  std::size_t poll(TickSink sink, std::size_t limit) noexcept override { return r_->poll(sink, limit); }
  bool lapped() const noexcept override { return r_->lapped(); }
  void skip_to(std::uint64_t seq) noexcept override { r_->skip_to(seq); }
  void pass_lap() noexcept override { r_->pass_lap(); }
  std::uint64_t lost() const noexcept override { return r_->lost(); }
  void discount(std::uint64_t n, bool lost) noexcept override { r_->discount(n, lost); }
  std::uint64_t slack() const noexcept override { return r_->capacity(); }

 private:
  RingReader* r_;
};

class TableDelivery {
 public:
  enum class Why : std::uint8_t { snapshot, conflation };

  // Allocates the private copy. `source`: where the table is read from (outlives us);
  // `stall_cycles`: how long a delivery may make no progress (an entry left busy, a ring that
  // stops short of E, a READ that never completes: a publisher dead or lying) before it is
  // abandoned.
  TableDelivery(TableGeometry g, TableSource& source, std::uint64_t stall_cycles);

  // Starts a delivery; `ring` has started.
  void begin(Why why, TickFeed& ring) noexcept;
  // One step over the table and our `ring`: returns the ticks delivered.
  std::size_t step(TickFeed& ring, TickSink sink, std::size_t limit) noexcept;

  [[nodiscard]] bool busy() const noexcept { return phase_ != Phase::idle; }
  [[nodiscard]] TableGeometry geometry() const noexcept { return g_; }
  [[nodiscard]] Why why() const noexcept { return why_; }
  [[nodiscard]] std::uint64_t entries_delivered() const noexcept { return entries_delivered_; }
  [[nodiscard]] std::uint64_t conflations() const noexcept { return conflations_; }
  [[nodiscard]] std::uint64_t abandoned() const noexcept { return abandoned_; }

 private:
  // locate: learn where the table is (and, lapped, skip there); copy: fetch every entry;
  // bound: look at table_next again, after the copy; roll: bring the copy forward to E.
  enum class Phase : std::uint8_t { idle, locate, copy, bound, roll, deliver };
  bool fetch(TickFeed& ring) noexcept;  // locate, copy, bound as far as the source allows
  bool locate(TickFeed& ring) noexcept;
  void finish_copy(std::uint64_t bound, std::uint64_t slack) noexcept;
  void restart(TickFeed& ring) noexcept;
  bool roll(TickFeed& ring) noexcept;  // true: progress
  bool start_over(TickFeed& ring) noexcept;  // false: given up
  std::size_t deliver(TickSink sink, std::size_t limit) noexcept;
  void finish() noexcept;
  // No progress since stalled_since_ for longer than the budget: give up, counted.
  bool stalled(TickFeed& ring, bool progress) noexcept;
  void give_up(TickFeed& ring) noexcept;

  TableGeometry g_;
  std::vector<Tick> copy_;  // seq 0: nothing to deliver
  TableSource* source_;
  std::uint64_t stall_cycles_;
  Why why_ = Why::snapshot;
  Phase phase_ = Phase::idle;
  bool skip_ = false;        // locate moves the ring to where the table is
  std::uint64_t since_ = 0;  // conflation: entries older than this were delivered live
  std::size_t cursor_ = 0;
  std::size_t last_ = 0;     // the last entry to deliver, + 1
  std::uint64_t end_ = 0;    // E
  std::uint64_t ring_lost_ = 0;  // the ring's lost count after our own discounts
  std::uint64_t stalled_since_ = 0;  // Clock cycles; 0: making progress
  std::uint64_t first_lap_ = 0;      // Clock cycles: this delivery's first start over; 0: none
  std::uint64_t entries_delivered_ = 0;
  std::uint64_t conflations_ = 0;
  std::uint64_t abandoned_ = 0;
};

}  // namespace tickrail::detail
