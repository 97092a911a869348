// The publish path: no allocation, no exceptions, no logging, no system calls.
#include "tickrail/clock.hpp"
#include "transport/shm/shm_publisher.hpp"

namespace tickrail::shm {

namespace {
template <class E>
constexpr std::uint32_t st(E s) { return static_cast<std::uint32_t>(s); }
}  // namespace

PublishResult ShmPublisher::publish(std::span<const Tick> ticks) noexcept {
  if (closing_.load(std::memory_order_relaxed)) [[unlikely]] {
    return {PublishStatus::closed, 0, 0};
  }
  // One private line, written only when a seat changes or on close(): a plain read when nothing
  // happened.
  if (generation_.load(std::memory_order_acquire) != lane_.seen_generation)
      [[unlikely]] {
    reconcile();
  }
  const auto want = static_cast<std::uint64_t>(ticks.size());
  if (want == 0) return {n_active_ == 0 ? PublishStatus::no_subscribers : PublishStatus::ok, 0, 0};
  if (n_active_ == 0) {
    lane_.next_seq += want;
    status_->next_seq.store(lane_.next_seq, std::memory_order_relaxed);
    if (table_.on()) {
      table_.update(ticks, lane_.next_seq - want, config_.stamp_send_time ? Clock::now() : 0, counters_);
      status_->table_next.store(lane_.next_seq, std::memory_order_release);
    }
    counters_.published += want;
    counters_.unheard += want;
    return {PublishStatus::no_subscribers, static_cast<std::uint32_t>(want), 0};
  }

  // The lane (publisher.hpp) publishes one tick as this does: a change here is one there too.
  std::uint64_t blocked = 0;
  const std::uint64_t n = lane_.next_seq + want <= lane_.room_until ? want : room(want, blocked);
  if (n != 0) {
    // Locals: the slot stores could alias members, which would then be re-read every tick.
    const bool stamping = config_.stamp_send_time;
    const std::uint64_t stamp = stamping ? Clock::now() : 0;
    const std::uint64_t first = lane_.next_seq;
    const std::uint64_t mask = mask_;
    const std::uint32_t n_active = n_active_;
    const std::uint64_t ahead = lane_.prefetch;
    for (std::uint32_t a = 0; a < n_active; ++a) {
      Slot* const ring = lane_rings_[a].slots;
      const bool may_be_read = lane_rings_[a].may_be_read;
      for (std::uint64_t j = 0; j < n; ++j) {
        const Tick& t = ticks[j];
        write_slot(ring[(first + j) & mask], t, first + j, stamping ? stamp : t.send_ts,
                   may_be_read);
        if (ahead != 0) __builtin_prefetch(&ring[(first + j + ahead) & mask], 1, 3);
      }
    }
    lane_.next_seq += n;
    counters_.published += n;
    status_->next_seq.store(lane_.next_seq, std::memory_order_relaxed);
    // After the rings and the published sequence: what TableDelivery relies on (table_delivery.hpp).
    if (table_.on()) {
      table_.update(ticks.first(n), first, stamping ? stamp : 0, counters_);
      status_->table_next.store(lane_.next_seq, std::memory_order_release);
    }
  }
  if (n == want) return {PublishStatus::ok, static_cast<std::uint32_t>(n), blocked};
  ++counters_.back_pressured;
  return {PublishStatus::back_pressured, static_cast<std::uint32_t>(n), blocked};
}

std::uint64_t ShmPublisher::room(std::uint64_t want, std::uint64_t& blocked) noexcept {
  std::uint64_t allowed = want;
  std::uint64_t until = ~std::uint64_t{0};
  for (std::uint32_t a = 0; a < n_active_;) {
    Active& s = active_[a];
    if (never_waits(s.policy)) {
      ++a;
      continue;
    }
    // The slot of sequence q is free once the subscriber expects more than q - capacity. The
    // shared credit line is read only when the cached value says the ticks would not fit (all
    // of them: whether this subscriber held the call back is counted from a fresh credit).
    if (lane_.next_seq + want > s.cached_credit + capacity_) {
      // The subscriber writes its credit: one beyond what was published is a lie that could
      // only make us overwrite its own unread ticks; clamp it, and the sums below stay exact.
      const std::uint64_t c = s.control->credit.load(std::memory_order_acquire);
      s.cached_credit = c < lane_.next_seq ? c : lane_.next_seq;
    }
    const std::uint64_t limit = s.cached_credit + capacity_;
    const std::uint64_t fits = limit > lane_.next_seq ? limit - lane_.next_seq : 0;
    if (fits < want) {
      // It holds this call back (its ring has room for fewer ticks than asked).
      s.control->back_pressure.store(s.control->back_pressure.load(std::memory_order_relaxed) + 1,
                                     std::memory_order_relaxed);
    }
    if (fits == 0) {
      blocked |= std::uint64_t{1} << s.index;
      if (s.policy == SlowConsumerPolicy::disconnect) {
        const std::uint64_t now = Clock::now();
        if (s.full_since == 0) {
          s.full_since = now;
        } else if (now - s.full_since >= s.disconnect_cycles) {
          s.control->reason.store(st(EvictReason::slow_consumer), std::memory_order_relaxed);
          s.control->state.store(st(ControlState::evicted), std::memory_order_release);
          // A subscriber that left meanwhile stays leaving: reconcile releases it.
          std::uint32_t expected = st(SeatState::active);
          seats_[s.index].state.compare_exchange_strong(expected, st(SeatState::evicted),
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
    if (limit < until) until = limit;
    ++a;
  }
  // Below `until` every fit is at least 1 and nothing above would differ: no back-pressure
  // to count, no eviction clock running.
  lane_.room_until = until;
  return allowed;
}

void ShmPublisher::reconcile() noexcept {
  lane_.seen_generation = generation_.load(std::memory_order_acquire);
  lane_.room_until = 0;
  for (std::uint32_t i = 0; i < max_subscribers_; ++i) {
    Seat& seat = seats_[i];
    const auto state = static_cast<SeatState>(seat.state.load(std::memory_order_acquire));
    const bool served = (served_mask_ >> i) & 1U;
    if (state == SeatState::pending) {
      activate(i);
    } else if (state == SeatState::leaving) {
      if (served) {
        for (std::uint32_t a = 0; a < n_active_; ++a) {
          if (active_[a].index == i) {
            remove_active(a);
            break;
          }
        }
      }
      if (seat.dead.load(std::memory_order_relaxed)) ++counters_.reclaimed;
      seat.state.store(st(SeatState::released), std::memory_order_release);
    }
  }
  n_active_snapshot_.store(n_active_, std::memory_order_relaxed);
}

void ShmPublisher::activate(std::uint32_t index) noexcept {
  Seat& seat = seats_[index];
  Control& c = *seat.control;
  // Late join: the subscriber starts at the next tick published.
  c.start_seq.store(lane_.next_seq, std::memory_order_relaxed);
  c.credit.store(lane_.next_seq, std::memory_order_relaxed);
  c.back_pressure.store(0, std::memory_order_relaxed);
  std::uint32_t expected = st(SeatState::pending);
  if (!seat.state.compare_exchange_strong(expected, st(SeatState::active), std::memory_order_acq_rel)) {
    return;  // it left meanwhile: the next reconcile sees that
  }
  c.state.store(st(ControlState::active), std::memory_order_release);
  Active& s = active_[n_active_++];
  s = Active{};
  s.control = &c;
  s.cached_credit = lane_.next_seq;
  s.index = index;
  s.policy = seat.policy;
  s.disconnect_cycles = Clock::instance().ns_to_cycles(static_cast<double>(seat.disconnect_after_ns));
  if (s.disconnect_cycles == 0) s.disconnect_cycles = 1;
  served_mask_ |= std::uint64_t{1} << index;
  sync_lane();
}

void ShmPublisher::remove_active(std::uint32_t pos) noexcept {
  served_mask_ &= ~(std::uint64_t{1} << active_[pos].index);
  active_[pos] = active_[n_active_ - 1];
  --n_active_;
  n_active_snapshot_.store(n_active_, std::memory_order_relaxed);
  sync_lane();
}

void ShmPublisher::sync_lane() noexcept {
  for (std::uint32_t a = 0; a < n_active_; ++a) {
    const Active& s = active_[a];
    lane_rings_[a] = {static_cast<Slot*>(rings_[s.index].map.get()), never_waits(s.policy)};
  }
  // A tick that must also go into the table is published out of line.
  lane_.n_rings = table_.on() ? 0 : n_active_;
}

}  // namespace tickrail::shm
