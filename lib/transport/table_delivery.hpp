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
// Steps run inside Subscriber::poll: copies and stores only, a bounded amount per call.
#pragma once

#include <cstdint>
#include <vector>

#include "core/last_value.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::detail {

class TableDelivery {
 public:
  enum class Why : std::uint8_t { snapshot, conflation };

  explicit TableDelivery(TableGeometry g);  // allocates the private copy

  // Starts a delivery; `ring` has started. A conflation needs `published`, the publisher's next
  // sequence as read now.
  void begin(Why why, RingReader& ring, std::uint64_t published) noexcept;

  // One step over the publisher's `table` and our `ring`; `published()` returns the publisher's
  // next sequence, read after the entries. Returns the ticks delivered.
  template <class Published>
  std::size_t step(Slot* table, RingReader& ring, Published&& published, TickSink sink,
                   std::size_t limit) noexcept {
    switch (phase_) {
      case Phase::copy:
        if (copy(table, ring)) finish_copy(published());
        return 0;
      case Phase::roll: roll(ring, published); return 0;
      case Phase::deliver: return deliver(sink, limit);
      case Phase::idle: return 0;
    }
    return 0;
  }
  [[nodiscard]] bool busy() const noexcept { return phase_ != Phase::idle; }
  [[nodiscard]] Why why() const noexcept { return why_; }
  [[nodiscard]] std::uint64_t delivered() const noexcept { return delivered_; }
  [[nodiscard]] std::uint64_t deliveries(Why w) const noexcept {
    return w == Why::snapshot ? snapshots_ : conflations_;
  }
  // Clock cycles of the last delivery, from its start to its last entry.
  [[nodiscard]] std::uint64_t cycles() const noexcept { return done_at_ - started_at_; }

  static constexpr std::size_t kEntriesPerStep = 4096;

 private:
  enum class Phase : std::uint8_t { idle, copy, roll, deliver };
  bool copy(Slot* table, RingReader& ring) noexcept;  // true: every entry copied
  void finish_copy(std::uint64_t published) noexcept;
  template <class Published>
  void roll(RingReader& ring, Published& published) noexcept {
    if (!roll_to_end(ring)) restart(ring, published());  // lapped on the way
  }
  void restart(RingReader& ring, std::uint64_t published) noexcept;
  bool roll_to_end(RingReader& ring) noexcept;  // false: lapped on the way
  std::size_t deliver(TickSink sink, std::size_t limit) noexcept;
  void finish() noexcept;

  TableGeometry g_;
  std::vector<Tick> copy_;  // seq 0: nothing to deliver
  Why why_ = Why::snapshot;
  Phase phase_ = Phase::idle;
  std::uint64_t since_ = 0;  // conflation: entries older than this were delivered live
  std::size_t cursor_ = 0;
  std::size_t last_ = 0;     // the last entry to deliver, + 1
  std::uint64_t end_ = 0;    // E
  std::uint64_t lost_at_start_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t snapshots_ = 0;
  std::uint64_t conflations_ = 0;
  std::uint64_t started_at_ = 0;
  std::uint64_t done_at_ = 0;
};

}  // namespace tickrail::detail
