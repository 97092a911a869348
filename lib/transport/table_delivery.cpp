#include "transport/table_delivery.hpp"

#include <algorithm>

#include "tickrail/clock.hpp"

namespace tickrail::detail {

TableDelivery::TableDelivery(TableGeometry g) : g_(g), copy_(g.entries()) {}

void TableDelivery::begin(Why why, RingReader& ring, std::uint64_t published) noexcept {
  why_ = why;
  started_at_ = Clock::now();
  // A conflation delivers what changed since the last tick the app had live.
  since_ = why == Why::conflation ? ring.next_seq() : 0;
  restart(ring, published);
}

void TableDelivery::restart(RingReader& ring, std::uint64_t published) noexcept {
  // A conflating reader moves to where the publisher is: what it skips is lost (and what of it
  // is in an entry comes back through the table).
  if (why_ == Why::conflation || ring.lapped()) ring.skip_to(published);
  lost_at_start_ = ring.lost();
  cursor_ = 0;
  phase_ = Phase::copy;
}

bool TableDelivery::copy(Slot* table, RingReader& ring) noexcept {
  (void)ring;
  const std::size_t stop = std::min(copy_.size(), cursor_ + kEntriesPerStep);
  for (; cursor_ < stop; ++cursor_) {
    Tick& t = copy_[cursor_];
    switch (read_entry(table[cursor_], t)) {
      case EntryRead::ok: break;
      case EntryRead::empty: t.seq = 0; break;
      case EntryRead::busy: return false;  // being written: the next poll looks again
    }
  }
  return cursor_ == copy_.size();
}

// Entries the publisher could not have written (a sequence it had not published when we looked
// after the copy, or a tick of another instrument or class than its place) are not used.
void TableDelivery::finish_copy(std::uint64_t published) noexcept {
  end_ = 0;
  last_ = 0;
  for (std::size_t i = 0; i < copy_.size(); ++i) {
    Tick& t = copy_[i];
    if (t.seq == 0) continue;
    if (t.seq >= published || g_.entry_of(t) != i) {
      t.seq = 0;
      continue;
    }
    end_ = std::max(end_, t.seq);
    if (t.seq < since_) {
      t.seq = 0;  // delivered live before the lap
      continue;
    }
    last_ = i + 1;
  }
  phase_ = Phase::roll;
}

bool TableDelivery::roll_to_end(RingReader& ring) noexcept {
  const bool lost = why_ == Why::conflation;
  while (ring.next_seq() <= end_) {
    const std::uint64_t want = end_ + 1 - ring.next_seq();
    auto apply = [this](const Tick& t) {
      const std::size_t i = g_.entry_of(t);
      if (i >= copy_.size() || copy_[i].seq >= t.seq) return;
      copy_[i] = t;
      last_ = std::max(last_, i + 1);
    };
    const std::size_t n = ring.poll(apply, static_cast<std::size_t>(std::min<std::uint64_t>(want, 4096)));
    ring.discount(n, lost);
    if (ring.lapped() || ring.lost() != lost_at_start_ + (lost ? n : 0)) return false;
    lost_at_start_ = ring.lost();
    if (n == 0) return true;  // E not yet in the ring: the publisher is still writing it
  }
  cursor_ = 0;
  phase_ = Phase::deliver;
  if (last_ == 0) finish();
  return true;
}

std::size_t TableDelivery::deliver(TickSink sink, std::size_t limit) noexcept {
  std::size_t n = 0;
  for (; cursor_ < last_ && n < limit; ++cursor_) {
    Tick t = copy_[cursor_];
    if (t.seq == 0) continue;
    t.flags = static_cast<std::uint16_t>(t.flags | kTickFromTable);
    sink(t);
    ++n;
  }
  delivered_ += n;
  if (cursor_ == last_) finish();
  return n;
}

void TableDelivery::finish() noexcept {
  phase_ = Phase::idle;
  done_at_ = Clock::now();
  ++(why_ == Why::conflation ? conflations_ : snapshots_);
  // The copy stays allocated until the subscriber goes: freeing it here would be a system call.
}

}  // namespace tickrail::detail
