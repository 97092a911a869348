#include "transport/snapshot.hpp"

#include <algorithm>

#include "tickrail/clock.hpp"

namespace tickrail::detail {

SnapshotJoin::SnapshotJoin(TableGeometry g) : g_(g), copy_(g.entries()) {}

bool SnapshotJoin::copy(Slot* table, RingReader& ring) noexcept {
  if (cursor_ == 0) {
    if (started_at_ == 0) started_at_ = Clock::now();
    lost_at_copy_ = ring.lost();
  }
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
void SnapshotJoin::finish_copy(std::uint64_t published) noexcept {
  end_ = 0;
  last_ = 0;
  for (std::size_t i = 0; i < copy_.size(); ++i) {
    Tick& t = copy_[i];
    if (t.seq == 0) continue;
    if (t.seq >= published || g_.entry_of(t) != i) {
      t.seq = 0;
      ++rejected_;
      continue;
    }
    end_ = std::max(end_, t.seq);
    last_ = i + 1;
  }
  phase_ = Phase::roll;
}

void SnapshotJoin::restart(RingReader& ring) noexcept {
  cursor_ = 0;
  phase_ = Phase::copy;
  lost_at_copy_ = ring.lost();
}

void SnapshotJoin::roll(RingReader& ring) noexcept {
  while (ring.next_seq() <= end_) {
    const std::uint64_t want = end_ + 1 - ring.next_seq();
    auto apply = [this](const Tick& t) {
      ++absorbed_;
      const std::size_t i = g_.entry_of(t);
      if (i >= copy_.size() || copy_[i].seq >= t.seq) return;
      copy_[i] = t;
      last_ = std::max(last_, i + 1);
    };
    const std::size_t n = ring.poll(apply, static_cast<std::size_t>(std::min<std::uint64_t>(want, 4096)));
    ring.discount(n);
    if (ring.lost() != lost_at_copy_) {
      // Lapped (drop policy) between the copy and E: the copy misses what the lap skipped.
      restart(ring);
      return;
    }
    if (n == 0) return;  // E not yet in the ring: the publisher is still writing it
  }
  cursor_ = 0;
  phase_ = Phase::deliver;
  if (last_ == 0) finish();
}

std::size_t SnapshotJoin::deliver(TickSink sink, std::size_t limit) noexcept {
  std::size_t n = 0;
  for (; cursor_ < last_ && n < limit; ++cursor_) {
    Tick t = copy_[cursor_];
    if (t.seq == 0) continue;
    t.flags = static_cast<std::uint16_t>(t.flags | kTickFromTable |
                                         (cursor_ + 1 == last_ ? kTickLastOfTable : 0));
    sink(t);
    ++n;
  }
  delivered_ += n;
  if (cursor_ == last_) finish();
  return n;
}

void SnapshotJoin::finish() noexcept {
  phase_ = Phase::done;
  done_at_ = Clock::now();
  if (started_at_ == 0) started_at_ = done_at_;
  // The copy stays allocated until the subscriber goes: freeing it here would be a system call.
}

}  // namespace tickrail::detail
