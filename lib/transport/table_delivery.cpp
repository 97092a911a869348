#include "transport/table_delivery.hpp"

#include <algorithm>

#include "tickrail/clock.hpp"

namespace tickrail::detail {

std::size_t MappedTableSource::copy(std::span<Tick> out, std::size_t cursor) noexcept {
  const std::size_t stop = std::min(out.size(), cursor + kEntriesPerStep);
  for (; cursor < stop; ++cursor) {
    Tick& t = out[cursor];
    switch (read_entry(table_[cursor], t)) {
      case EntryRead::ok: break;
      case EntryRead::empty: t.seq = 0; break;
      case EntryRead::busy: return cursor;  // being written: the next poll looks again
    }
  }
  return cursor;
}

TableDelivery::TableDelivery(TableGeometry g, TableSource& source, std::uint64_t stall_cycles)
    : g_(g), copy_(g.entries()), source_(&source), stall_cycles_(stall_cycles) {}

void TableDelivery::begin(Why why, TickFeed& ring) noexcept {
  why_ = why;
  // A conflation delivers what changed since the last tick the app had live.
  since_ = why == Why::conflation ? ring.next_seq() : 0;
  first_lap_ = 0;
  restart(ring);
}

void TableDelivery::restart(TickFeed& ring) noexcept {
  // A lapped reader moves to where the table is (locate): what it skips is lost (and what of it
  // is in an entry comes back through the table).
  skip_ = why_ == Why::conflation || ring.lapped();
  ring_lost_ = ring.lost();
  cursor_ = 0;
  stalled_since_ = 0;
  source_->restart();
  phase_ = Phase::locate;
  (void)locate(ring);  // at once where the source can (a mapped table): the lap is skipped now
}

std::size_t TableDelivery::step(TickFeed& ring, TickSink sink, std::size_t limit) noexcept {
  switch (phase_) {
    case Phase::locate:
    case Phase::copy:
    case Phase::bound: (void)stalled(ring, fetch(ring)); return 0;
    case Phase::roll: (void)stalled(ring, roll(ring)); return 0;
    case Phase::deliver: return deliver(sink, limit);
    case Phase::idle: return 0;
  }
  return 0;
}

bool TableDelivery::stalled(TickFeed& ring, bool progress) noexcept {
  if (progress || phase_ == Phase::idle) {
    stalled_since_ = 0;
    return false;
  }
  const std::uint64_t now = Clock::now();
  if (stalled_since_ == 0) stalled_since_ = now;
  if (now - stalled_since_ < stall_cycles_) return false;
  give_up(ring);
  return true;
}

// As far as the source lets us in one call: a mapped table is located, copied (a bounded
// amount) and bounded in the same call; a remote one waits for its READs between the steps.
bool TableDelivery::fetch(TickFeed& ring) noexcept {
  bool progress = false;
  if (phase_ == Phase::locate) {
    if (!locate(ring)) return false;
    progress = true;
  }
  if (phase_ == Phase::copy) {
    const std::size_t from = cursor_;
    cursor_ = source_->copy(copy_, cursor_);
    progress = progress || cursor_ != from;
    if (cursor_ < copy_.size()) return progress;
    phase_ = Phase::bound;
  }
  // Looked at after the copy: no entry the publisher wrote can hold this sequence or a later one.
  const std::uint64_t bound = source_->look();
  if (bound == 0) return progress;
  finish_copy(bound, ring.slack());
  return true;
}

bool TableDelivery::locate(TickFeed& ring) noexcept {
  const std::uint64_t next = source_->look();
  if (next == 0) return false;
  if (skip_) {
    ring.skip_to(next);
    ring_lost_ = ring.lost();
    skip_ = false;
  }
  // Not before the table holds every tick below our position (the publisher is mid-batch).
  if (next < ring.next_seq()) return false;
  phase_ = Phase::copy;
  return true;
}

// Entries the publisher could not have written (a tick of another instrument or class than its
// place, a sequence a ring's length beyond what the table held when we looked after the copy)
// are not used. An entry of the batch in flight (at or above `bound`) is kept: its tick is in
// the ring, and the roll forward to E brings every other entry to the same point. The slack
// bounds what a lying publisher can make the roll consume.
void TableDelivery::finish_copy(std::uint64_t bound, std::uint64_t slack) noexcept {
  end_ = 0;
  last_ = 0;
  for (std::size_t i = 0; i < copy_.size(); ++i) {
    Tick& t = copy_[i];
    if (t.seq == 0) continue;
    if (t.seq >= bound + slack || g_.entry_of(t) != i) {
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

bool TableDelivery::roll(TickFeed& ring) noexcept {
  const bool count_lost = why_ == Why::conflation;
  bool progress = false;
  while (ring.next_seq() <= end_) {
    const std::uint64_t want = end_ + 1 - ring.next_seq();
    auto apply = [this](const Tick& t) {
      const std::size_t i = g_.entry_of(t);
      if (i >= copy_.size() || copy_[i].seq >= t.seq) return;
      copy_[i] = t;
      last_ = std::max(last_, i + 1);
    };
    const std::size_t n = ring.poll(TickSink(apply), static_cast<std::size_t>(std::min<std::uint64_t>(want, 4096)));
    ring.discount(n, count_lost);
    if (ring.lapped() || ring.lost() != ring_lost_ + (count_lost ? n : 0)) {
      return start_over(ring);  // lapped on the way: the copy misses what the lap skipped
    }
    ring_lost_ = ring.lost();
    if (n == 0) return progress;  // E not yet in the ring: the publisher is still writing it
    progress = true;
  }
  cursor_ = 0;
  phase_ = Phase::deliver;
  if (last_ == 0) finish();
  return true;
}

// A restart is no progress: the delivery may start over for the stall budget from its first lap,
// then it is given up. Else a publisher that laps us on purpose (its entries just ahead of the
// ring), or a feed too fast for the ring, would keep it going for ever, nothing delivered.
bool TableDelivery::start_over(TickFeed& ring) noexcept {
  const std::uint64_t now = Clock::now();
  if (first_lap_ == 0) first_lap_ = now;
  if (now - first_lap_ >= stall_cycles_) {
    give_up(ring);
    return false;
  }
  restart(ring);
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
  entries_delivered_ += n;
  if (cursor_ == last_) finish();
  return n;
}

// The ring goes on live from where it is, with nothing from the table.
void TableDelivery::give_up(TickFeed& ring) noexcept {
  ++abandoned_;
  phase_ = Phase::idle;
  ring.pass_lap();
}

void TableDelivery::finish() noexcept {
  phase_ = Phase::idle;
  if (why_ == Why::conflation) ++conflations_;
  // The copy stays allocated until the subscriber goes: freeing it here would be a system call.
}

}  // namespace tickrail::detail
