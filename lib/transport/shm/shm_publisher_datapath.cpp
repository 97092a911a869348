// The publish path: no allocation, no exceptions, no logging, no system calls.
#include "tickrail/clock.hpp"
#include "transport/shm/shm_publisher.hpp"

namespace tickrail::shm {

namespace {
constexpr std::uint32_t st(EntryState s) { return static_cast<std::uint32_t>(s); }
}  // namespace

PublishResult ShmPublisher::publish(std::span<const Tick> ticks) noexcept {
  if (closing_.load(std::memory_order_relaxed)) [[unlikely]] {
    return {PublishStatus::closed, 0, 0};
  }
  // One shared line, written only when an entry changes: a plain read when nothing happened.
  if (segment_.header().generation.load(std::memory_order_acquire) != seen_generation_)
      [[unlikely]] {
    reconcile();
  }
  const auto want = static_cast<std::uint64_t>(ticks.size());
  if (want == 0) return {n_active_ == 0 ? PublishStatus::no_subscribers : PublishStatus::ok, 0, 0};
  if (n_active_ == 0) {
    next_seq_ += want;
    segment_.header().next_seq.store(next_seq_, std::memory_order_relaxed);
    counters_.published += want;
    counters_.unheard += want;
    return {PublishStatus::no_subscribers, static_cast<std::uint32_t>(want), 0};
  }

  std::uint64_t blocked = 0;
  const std::uint64_t n = room(want, blocked);
  if (n != 0) {
    const std::uint64_t stamp = config_.stamp_send_time ? Clock::now() : 0;
    const std::uint64_t first = next_seq_;
    for (std::uint32_t a = 0; a < n_active_; ++a) {
      Active& s = active_[a];
      const bool may_be_read = s.policy == SlowConsumerPolicy::drop;
      for (std::uint64_t j = 0; j < n; ++j) {
        const Tick& t = ticks[j];
        write_slot(s.ring[(first + j) & mask_], t, first + j,
                   config_.stamp_send_time ? stamp : t.send_ts, may_be_read);
      }
    }
    next_seq_ += n;
    counters_.published += n;
    segment_.header().next_seq.store(next_seq_, std::memory_order_relaxed);
  }
  if (n == want) return {PublishStatus::ok, static_cast<std::uint32_t>(n), blocked};
  ++counters_.back_pressured;
  return {PublishStatus::back_pressured, static_cast<std::uint32_t>(n), blocked};
}

std::uint64_t ShmPublisher::room(std::uint64_t want, std::uint64_t& blocked) noexcept {
  std::uint64_t allowed = want;
  for (std::uint32_t a = 0; a < n_active_;) {
    Active& s = active_[a];
    if (s.policy == SlowConsumerPolicy::drop) {
      ++a;
      continue;
    }
    // The slot of sequence q is free once the subscriber expects more than q - capacity. The
    // shared credit line is read only when the cached value says the ticks would not fit (all
    // of them: whether this subscriber held the call back is counted from a fresh credit).
    if (next_seq_ + want > s.cached_credit + capacity_) {
      s.cached_credit = s.entry->credit.load(std::memory_order_acquire);
    }
    const std::uint64_t limit = s.cached_credit + capacity_;
    const std::uint64_t fits = limit > next_seq_ ? limit - next_seq_ : 0;
    if (fits < want) {
      // It holds this call back (its ring has room for fewer ticks than asked).
      s.entry->back_pressure.store(s.entry->back_pressure.load(std::memory_order_relaxed) + 1,
                                   std::memory_order_relaxed);
    }
    if (fits == 0) {
      blocked |= std::uint64_t{1} << s.index;
      if (s.policy == SlowConsumerPolicy::disconnect) {
        const std::uint64_t now = Clock::now();
        if (s.full_since == 0) {
          s.full_since = now;
        } else if (now - s.full_since >= s.disconnect_ticks) {
          s.entry->reason.store(static_cast<std::uint32_t>(EvictReason::slow_consumer),
                                std::memory_order_relaxed);
          // A subscriber found dead meanwhile stays dead: reconcile frees it.
          std::uint32_t expected = st(EntryState::active);
          s.entry->state.compare_exchange_strong(expected, st(EntryState::evicted),
                                                 std::memory_order_acq_rel);
          ++counters_.evictions;
          blocked &= ~(std::uint64_t{1} << s.index);
          remove_active(a);
          continue;  // the evicted one no longer limits anybody
        }
      }
    } else {
      s.full_since = 0;
    }
    if (fits < allowed) allowed = fits;
    ++a;
  }
  return allowed;
}

void ShmPublisher::reconcile() noexcept {
  SegmentHeader& h = segment_.header();
  seen_generation_ = h.generation.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < h.max_subscribers; ++i) {
    Entry& e = segment_.entry(i);
    const auto state = static_cast<EntryState>(e.state.load(std::memory_order_acquire));
    const bool served = (served_mask_ >> i) & 1U;
    switch (state) {
      case EntryState::requested:
        if (!served) activate(i);
        break;
      case EntryState::detaching:
      case EntryState::dead:
        if (served) {
          for (std::uint32_t a = 0; a < n_active_; ++a) {
            if (active_[a].index == i) {
              remove_active(a);
              break;
            }
          }
        }
        if (state == EntryState::dead) ++counters_.reclaimed;
        release_entry(i);
        break;
      default:
        break;
    }
  }
  n_active_snapshot_.store(n_active_, std::memory_order_relaxed);
}

void ShmPublisher::activate(std::uint32_t index) noexcept {
  Entry& e = segment_.entry(index);
  // Late join: the subscriber starts at the next tick published.
  e.start_seq.store(next_seq_, std::memory_order_relaxed);
  e.credit.store(next_seq_, std::memory_order_relaxed);
  e.back_pressure.store(0, std::memory_order_relaxed);
  std::uint32_t expected = st(EntryState::requested);
  if (!e.state.compare_exchange_strong(expected, st(EntryState::active),
                                       std::memory_order_acq_rel)) {
    return;  // it left or died meanwhile: the next reconcile sees that
  }
  Active& s = active_[n_active_++];
  s = Active{};
  s.ring = segment_.ring(index);
  s.entry = &e;
  s.cached_credit = next_seq_;
  s.index = index;
  s.policy = static_cast<SlowConsumerPolicy>(e.policy.load(std::memory_order_relaxed));
  s.disconnect_ticks =
      Clock::instance().ns_to_ticks(static_cast<double>(e.disconnect_after_ns));
  if (s.disconnect_ticks == 0) s.disconnect_ticks = 1;
  served_mask_ |= std::uint64_t{1} << index;
}

void ShmPublisher::remove_active(std::uint32_t pos) noexcept {
  served_mask_ &= ~(std::uint64_t{1} << active_[pos].index);
  active_[pos] = active_[n_active_ - 1];
  --n_active_;
  n_active_snapshot_.store(n_active_, std::memory_order_relaxed);
}

void ShmPublisher::release_entry(std::uint32_t index) noexcept {
  Entry& e = segment_.entry(index);
  e.pid.store(0, std::memory_order_relaxed);
  e.state.store(st(EntryState::free), std::memory_order_release);
}

}  // namespace tickrail::shm
