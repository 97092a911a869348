// The RC publish path: no allocation, exceptions, logging or system calls of our own; the
// verbs calls (ibv_post_send, ibv_poll_cq) are user-space doorbell writes and queue reads on a
// hardware NIC (on rxe, ibv_post_send is a write() to the uverbs fd: docs/state.md).
//
// Torn reads under `drop`. A subscriber that polls memory reads a slot's commit word, copies
// the other seven words, and re-reads the commit word (ring.hpp). A CPU writer zeroes the
// commit word before overwriting a slot, so the re-check catches a copy that raced with it;
// an RDMA WRITE of one slot lands in address order with the commit word last, so by itself it
// would leave the commit word unchanged until the very end and the re-check would pass over a
// torn copy. What we do, per polling mode:
//  - memory polling: a slot is "at risk" when the tick it holds (s - capacity) may not have been
//    read yet, i.e. s >= credit + capacity with the latest credit the subscriber returned (it
//    returns it only after copying). Before writing an at-risk slot we post an 8-byte WRITE of
//    zero to its commit word, on the same QP: the subscriber's re-check then fails exactly as
//    with a CPU writer, and its lap detection counts the loss. This costs one extra WRITE per
//    slot, only while the subscriber lags a whole ring behind; it relies on WRITEs of one QP
//    being placed in order, which memory polling relies on anyway (the commit word last).
//  - CQ polling: we never overwrite a slot that may be unread. Ticks at or beyond
//    credit + capacity are not written to that subscriber at all (counted as dropped for it);
//    the subscriber learns from each completion's immediate how far the writes went, and counts
//    every tick it expected but did not find as lost. No placement-order assumption at all.
//    Those ticks go one slot per WRITE, inline, so that a subscriber that stops reposting
//    receives (RNR) holds no staging memory: its send queue fills, and we drop for it.
#include <arpa/inet.h>

#include <algorithm>

#include "tickrail/clock.hpp"
#include "transport/rdma/rc/rc_publisher.hpp"

namespace tickrail::rdma::rc {
namespace {

constexpr std::uint64_t kNone = ~std::uint64_t{0};
// The longest run of slots in one WRITE (256 KiB).
constexpr std::uint64_t kMaxRunSlots = 4096;

}  // namespace

PublishResult RcPublisher::publish(std::span<const Tick> ticks) noexcept {
  // close() may come from another thread: see CloseGuard for the ordering.
  if (!close_guard_.enter()) [[unlikely]] return {PublishStatus::closed, 0, 0};
  struct Leave {
    CloseGuard& guard;
    ~Leave() { guard.leave(); }
  } leave{close_guard_};

  if (generation_.load(std::memory_order_acquire) != seen_generation_) [[unlikely]] reconcile();
  const std::uint64_t now = Clock::now();
  if (now - last_heartbeat_ >= heartbeat_cycles_) [[unlikely]] heartbeat(now);

  const auto want = static_cast<std::uint64_t>(ticks.size());
  if (want == 0) {
    maintain(now);
    return {n_active_ + n_pending_ == 0 ? PublishStatus::no_subscribers : PublishStatus::ok, 0, 0};
  }
  const std::uint64_t stamp = config_.stamp_send_time ? now : 0;
  if (n_active_ + n_pending_ == 0) {
    table_.keep(ticks, next_seq_, stamp, counters_);  // a late joiner's snapshot includes what nobody heard
    next_seq_ += want;
    published_seq_.store(next_seq_, std::memory_order_relaxed);
    counters_.published += want;
    counters_.unheard += want;
    return {PublishStatus::no_subscribers, static_cast<std::uint32_t>(want), 0};
  }

  std::uint64_t done = 0;
  std::uint64_t blocked = 0;
  while (done < want) {
    const std::uint64_t n = room(want - done, blocked, now);
    if (n == 0) break;
    stage(ticks.subspan(done, n), next_seq_, stamp);
    const std::uint64_t end = next_seq_ + n;
    for (std::uint32_t i = 0; i < n_active_; ++i) {
      Active& a = active_[i];
      if (!a.dead && !a.evicting) send(a, end);
    }
    // After the ring WRITEs are posted: what TableDelivery relies on (table_delivery.hpp).
    table_.keep(ticks.subspan(done, n), next_seq_, stamp, counters_);
    next_seq_ = end;
    done += n;
  }
  counters_.published += done;
  published_seq_.store(next_seq_, std::memory_order_relaxed);
  maintain(now);
  if (done == want) return {PublishStatus::ok, static_cast<std::uint32_t>(done), blocked};
  // The loop ended on a pass with no room: the subscribers without room held this call back.
  for (std::uint64_t b = blocked; b != 0; b &= b - 1) {
    std::atomic<std::uint64_t>& bp = links_[static_cast<std::size_t>(__builtin_ctzll(b))].back_pressure;
    bp.store(bp.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  ++counters_.back_pressured;
  return {PublishStatus::back_pressured, static_cast<std::uint32_t>(done), blocked};
}

// Completions, backlogs, evictions and departures: on every publish, and all of service().
void RcPublisher::maintain(std::uint64_t now) noexcept {
  for (std::uint32_t i = 0; i < n_active_; ++i) {
    Active& a = active_[i];
    if (a.dead) continue;
    // Reaping only when the send queue is half full keeps the poll off most publishes; an
    // evicting subscriber is reaped until its notice has landed.
    if (a.evicting || a.posted - a.completed > sq_depth_ / 2) reap(a);
    if (a.dead) continue;
    if (a.evicting) {
      if (now >= a.evict_deadline) retire(a, LinkEnd::evicted);
      continue;
    }
    if (a.sent < next_seq_) send(a, next_seq_);  // a backlog (send queue was full, or new)
  }
  if (any_dead_) sweep();
}

std::uint64_t RcPublisher::refresh_credit(Active& a) noexcept {
  // Written by the subscriber's NIC: a plain 64-bit load, acquire so that what it guards (the
  // subscriber finished reading those slots) is ordered before our overwrite decisions.
  const std::uint64_t c =
      std::atomic_ref<std::uint64_t>(a.link->block.credit[0]).load(std::memory_order_acquire);
  // Credits only move forward; a stale or garbage value must not reopen slots.
  if (c > a.cached_credit && c <= next_seq_) {
    a.cached_credit = c;
    a.link->position.store(c, std::memory_order_relaxed);
  }
  return a.cached_credit;
}

std::uint64_t RcPublisher::staging_hold(std::uint64_t& holders) const noexcept {
  // The oldest tick some connection may still read from the staging ring: its unsent backlog,
  // or a non-inline WRITE not known to be complete, or a reservation awaiting its backfill.
  std::uint64_t hold = kNone;
  holders = 0;
  auto consider = [&](std::uint64_t h, std::uint32_t index) {
    if (h < hold) {
      hold = h;
      holders = 0;
    }
    if (h == hold && h != kNone) holders |= std::uint64_t{1} << index;
  };
  for (std::uint32_t i = 0; i < n_active_; ++i) {
    const Active& a = active_[i];
    if (a.dead) continue;
    std::uint64_t h = a.sent < next_seq_ && !a.evicting ? a.sent : kNone;
    if (a.staged_high > a.done_seq) h = std::min(h, a.done_seq + 1);
    consider(h, a.index);
  }
  for (std::uint32_t i = 0; i < n_pending_; ++i) consider(pending_[i].first_seq, pending_[i].index);
  return hold;
}

std::uint64_t RcPublisher::room(std::uint64_t want, std::uint64_t& blocked,
                                std::uint64_t now) noexcept {
  // One pass never writes more than the smallest ring holds, so a run wraps at most once.
  std::uint64_t allowed = std::min(want, min_capacity_);

  std::uint64_t holders = 0;
  std::uint64_t hold = staging_hold(holders);
  auto staging_fits = [&] {
    const std::uint64_t limit = hold == kNone ? kNone : hold + staging_slots_;
    return limit > next_seq_ ? limit - next_seq_ : 0;
  };
  if (staging_fits() < allowed) {
    for (std::uint32_t i = 0; i < n_active_; ++i) {
      Active& a = active_[i];
      if (a.dead || ((holders >> a.index) & 1U) == 0) continue;
      reap(a);
      if (!a.dead && !a.evicting && a.sent < next_seq_) send(a, next_seq_);
    }
    hold = staging_hold(holders);
    const std::uint64_t fits = staging_fits();
    if (fits < allowed) {
      allowed = fits;
      if (fits == 0) blocked |= holders;
    }
  }

  for (std::uint32_t i = 0; i < n_active_; ++i) {
    Active& a = active_[i];
    if (a.dead || a.evicting || a.policy == SlowConsumerPolicy::drop) continue;
    // The slot of tick q is free once the subscriber expects more than q - capacity. The
    // credit line is read only when the cached credit says the ticks would not fit.
    if (next_seq_ + allowed > a.cached_credit + a.capacity) refresh_credit(a);
    const std::uint64_t limit = a.cached_credit + a.capacity;
    const std::uint64_t fits = limit > next_seq_ ? limit - next_seq_ : 0;
    if (fits == 0) {
      blocked |= std::uint64_t{1} << a.index;
      if (a.policy == SlowConsumerPolicy::disconnect) {
        if (a.full_since == 0) {
          a.full_since = now;
        } else if (now - a.full_since >= a.disconnect_cycles) {
          evict(a, now);
          blocked &= ~(std::uint64_t{1} << a.index);
          continue;  // the evicted one no longer limits anybody
        }
      }
    } else {
      a.full_since = 0;
    }
    allowed = std::min(allowed, fits);
  }
  for (std::uint32_t i = 0; i < n_pending_; ++i) {
    const Pending& p = pending_[i];
    if (p.policy == SlowConsumerPolicy::drop) continue;
    const std::uint64_t limit = p.first_seq + p.capacity;
    const std::uint64_t fits = limit > next_seq_ ? limit - next_seq_ : 0;
    if (fits == 0) blocked |= std::uint64_t{1} << p.index;
    allowed = std::min(allowed, fits);
  }
  return allowed;
}

void RcPublisher::stage(std::span<const Tick> ticks, std::uint64_t first, std::uint64_t stamp) noexcept {
  // Plain stores: the NIC reads these slots only after the ibv_post_send that follows, whose
  // doorbell is ordered after them by the provider's barrier.
  auto* slots = static_cast<Slot*>(staging_.data());
  const std::uint64_t mask = staging_slots_ - 1;
  for (std::size_t j = 0; j < ticks.size(); ++j) {
    Slot& s = slots[(first + j) & mask];
    std::memcpy(&s, &ticks[j], sizeof s);
    if (config_.stamp_send_time) s.words[0] = stamp;
    s.words[kSeqWord] = first + j;
    if (split_links_ != 0) {
      // The twin, for split-commit subscribers: the same tick with a commit word of 0.
      Slot& z = slots[staging_slots_ + ((first + j) & mask)];
      z = s;
      z.words[kSeqWord] = 0;
    }
  }
}

void RcPublisher::send(Active& a, std::uint64_t end) noexcept {
  const bool cq_drop = a.policy == SlowConsumerPolicy::drop && a.mode == WriteMode::cq;
  const bool memory_drop = a.policy == SlowConsumerPolicy::drop && is_memory_mode(a.mode);
  while (a.sent < end) {
    const std::uint64_t from = a.sent;
    std::uint64_t to = end;
    if (cq_drop) {
      if (from >= a.cached_credit + a.capacity) refresh_credit(a);
      const std::uint64_t limit = a.cached_credit + a.capacity;
      if (from >= limit) {
        a.dropped += end - from;  // its ring is full of unread ticks: never overwrite them
        a.sent = end;
        return;
      }
      to = std::min(end, limit);
      if (a.max_inline >= sizeof(Slot)) to = from + 1;
    }
    // One WR per slot (split commit, or zeroing slots at risk): at most kMaxBatch per post.
    if (a.mode == WriteMode::memory_split) to = std::min(to, from + kMaxBatch);
    if (memory_drop && to > a.cached_credit + a.capacity &&
        to > refresh_credit(a) + a.capacity) {
      to = std::min(to, from + kMaxBatch);
    }
    to = std::min({to, from + (a.capacity - (from & a.mask)), from + kMaxRunSlots});
    if (a.posted - a.completed + kMaxWrPerPost > sq_depth_) {
      reap(a);
      if (a.dead) return;
      if (a.posted - a.completed + kMaxWrPerPost > sq_depth_) {
        if (cq_drop) {  // receives exhausted (RNR) or a slow NIC: drop, never wait
          a.dropped += end - from;
          a.sent = end;
        }
        return;  // otherwise a backlog, sent by a later publish()/service()
      }
    }
    if (!send_piece(a, from, to)) return;
    a.sent = to;
  }
}

void RcPublisher::add_write(const Active& a, std::uint64_t remote, const void* local,
                            std::uint32_t len, std::uint32_t lkey) noexcept {
  ibv_send_wr& w = wr_[n_wr_];
  ibv_sge& g = sge_[n_wr_];
  ++n_wr_;
  g.addr = reinterpret_cast<std::uintptr_t>(local);
  g.length = len;
  g.lkey = lkey;
  w.sg_list = &g;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  // Inline: the bytes are copied into the WQE by ibv_post_send; no lkey, no later read.
  w.send_flags = len <= a.max_inline ? IBV_SEND_INLINE : 0;
  w.wr.rdma.remote_addr = remote;
  w.wr.rdma.rkey = a.rkey;
  w.imm_data = 0;
}

bool RcPublisher::send_piece(Active& a, std::uint64_t from, std::uint64_t to) noexcept {
  auto* staging = static_cast<Slot*>(staging_.data());
  const std::uint64_t smask = staging_slots_ - 1;
  auto remote = [&a](std::uint64_t s) { return a.slots_addr + (s & a.mask) * sizeof(Slot); };
  constexpr std::uint32_t kCommitOffset = kSeqWord * sizeof(std::uint64_t);
  n_wr_ = 0;

  if (a.policy == SlowConsumerPolicy::drop && is_memory_mode(a.mode)) {
    if (to > a.cached_credit + a.capacity) refresh_credit(a);
    // Zero the commit word of every slot whose tick may be unread (see the top of this file).
    for (std::uint64_t s = std::max(from, a.cached_credit + a.capacity); s < to; ++s) {
      add_write(a, remote(s) + kCommitOffset, a.link->block.zero_source, 8, a.source_lkey);
    }
  }
  std::uint64_t staged = 0;  // ticks whose WRITE reads the staging ring after the post
  if (a.mode == WriteMode::memory_split) {
    // The run from the twin staging ring, whose commit words are 0, then each slot's commit
    // word in a WRITE of its own: k + 1 WRs for k slots. The reader sees 0 (not yet) until
    // the commit lands, which is placed after the data WRITE posted before it.
    const auto len = static_cast<std::uint32_t>((to - from) * sizeof(Slot));
    add_write(a, remote(from), &staging[staging_slots_ + (from & smask)], len, a.staging_lkey);
    for (std::uint64_t s = from; s < to; ++s) {
      add_write(a, remote(s) + kCommitOffset, &staging[s & smask].words[kSeqWord], 8,
                a.staging_lkey);
    }
    if (len > a.max_inline || a.max_inline < 8) staged = to - from;
  } else {
    const auto len = static_cast<std::uint32_t>((to - from) * sizeof(Slot));
    add_write(a, remote(from), &staging[from & smask], len, a.staging_lkey);
    if (a.mode == WriteMode::cq) {
      ibv_send_wr& w = wr_[n_wr_ - 1];
      w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      w.imm_data = htonl(static_cast<std::uint32_t>(to - 1));
    }
    if (len > a.max_inline) staged = to - from;
  }
  return post(a, staged, to - 1, false);
}

bool RcPublisher::post(Active& a, std::uint64_t staged_ticks, std::uint64_t high,
                       bool force_signal) noexcept {
  const std::uint64_t ring_mask = a.link->signalled_seq.size() - 1;
  std::uint64_t* signalled_seq = a.link->signalled_seq.data();
  if (staged_ticks != 0) a.unsignalled_staged += staged_ticks;
  const std::uint64_t staged_before = a.staged_high;
  for (std::uint32_t i = 0; i < n_wr_; ++i) {
    ibv_send_wr& w = wr_[i];
    w.next = i + 1 < n_wr_ ? &wr_[i + 1] : nullptr;
    w.wr_id = ++a.posted;
    const bool last = i + 1 == n_wr_;
    // Selective signalling: every signal_every WRs, and often enough for the staging ring to
    // be released (an eighth of it), and when asked (notices).
    bool sig = a.posted - a.last_signalled >= signal_every_;
    if (last) sig = sig || force_signal || a.unsignalled_staged >= staging_slots_ / 8;
    if (sig) {
      w.send_flags |= IBV_SEND_SIGNALED;
      a.last_signalled = a.posted;
      // A completion of WR k proves every WR up to k done: for a WR before the last, only the
      // staged ticks of earlier posts are covered.
      signalled_seq[a.posted & ring_mask] = last && staged_ticks != 0 ? high : staged_before;
      if (last) a.unsignalled_staged = 0;
    }
  }
  if (staged_ticks != 0) a.staged_high = high;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(a.qp, &wr_[0], &bad) != 0) [[unlikely]] {
    retire(a, LinkEnd::failed);  // the QP is in error: its subscriber is gone
    return false;
  }
  return true;
}

void RcPublisher::reap(Active& a) noexcept {
  ibv_wc wc[16];
  const std::uint64_t ring_mask = a.link->signalled_seq.size() - 1;
  for (;;) {
    const int n = ibv_poll_cq(a.cq, 16, wc);
    if (n < 0) [[unlikely]] {
      retire(a, LinkEnd::failed);
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) [[unlikely]] {
        // A WRITE failed (retry exceeded, remote access error, flushed): this subscriber
        // is gone or broken; the others are not affected.
        retire(a, a.evicting ? LinkEnd::evicted : LinkEnd::failed);
        return;
      }
      const std::uint64_t id = wc[i].wr_id;
      if (id > a.completed) a.completed = id;
      const std::uint64_t seq = a.link->signalled_seq[id & ring_mask];
      if (seq > a.done_seq) a.done_seq = seq;
      if (a.evicting && a.notice_wr != 0 && id >= a.notice_wr) {
        retire(a, LinkEnd::evicted);  // the notice has landed: the CM thread disconnects it
        return;
      }
    }
    if (n < 16) return;
  }
}

void RcPublisher::heartbeat(std::uint64_t now) noexcept {
  last_heartbeat_ = now;
  ++beat_;
  for (std::uint32_t i = 0; i < n_active_; ++i) {
    Active& a = active_[i];
    if (a.dead || a.evicting) continue;
    if (a.posted - a.completed + 1 > sq_depth_) {
      reap(a);
      if (a.dead || a.posted - a.completed + 1 > sq_depth_) continue;
    }
    Heartbeat& h = a.link->block.heartbeat_source;
    // A non-inline heartbeat may still be read by the NIC when the next one is written here:
    // it then carries the newer values, which is all a heartbeat says.
    h.next_seq = next_seq_;
    h.stamp = now;
    h.beat = beat_;
    n_wr_ = 0;
    add_write(a, a.region_addr + offsetof(ControlBlock, heartbeat), &h, 3 * sizeof(std::uint64_t),
              a.source_lkey);
    if (a.mode == WriteMode::cq) {
      // With an immediate: every tick before `sent` has been written or dropped for it, which
      // a CQ-polling subscriber cannot learn otherwise once we stop writing to it.
      wr_[0].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr_[0].imm_data = htonl(static_cast<std::uint32_t>(a.sent - 1));
    }
    (void)post(a, 0, 0, false);
  }
}

bool RcPublisher::post_notice(Active& a, Notice what) noexcept {
  if (a.posted - a.completed + 1 > sq_depth_) {
    reap(a);
    if (a.dead || a.posted - a.completed + 1 > sq_depth_) return false;
  }
  NoticeLine& n = a.link->block.notice_source;
  n.notice = static_cast<std::uint64_t>(what);
  n.at_seq = next_seq_;
  n_wr_ = 0;
  add_write(a, a.region_addr + offsetof(ControlBlock, notice), &n, 2 * sizeof(std::uint64_t),
            a.source_lkey);
  if (!post(a, 0, 0, true)) return false;
  a.notice_wr = a.posted;
  return true;
}

void RcPublisher::evict(Active& a, std::uint64_t now) noexcept {
  // Tell it why before it is disconnected: the notice WRITE, signalled; once it has completed
  // (or after a second, if it never does) the link is retired, and the CM thread disconnects it
  // at its next look: within RcPublisher::kIdleWait, or at once when a connection request
  // comes (no system call here to wake it).
  ++counters_.evictions;
  a.evicting = true;
  a.evict_deadline = now + Clock::instance().ns_to_cycles(1e9);
  if (!post_notice(a, Notice::evicted)) retire(a, LinkEnd::evicted);
}

void RcPublisher::retire(Active& a, LinkEnd why) noexcept {
  if (a.dead) return;
  a.dead = true;
  any_dead_ = true;
  Link& l = *a.link;
  std::uint32_t none = 0;
  l.end.compare_exchange_strong(none, static_cast<std::uint32_t>(why), std::memory_order_relaxed);
  if (why == LinkEnd::failed) ++counters_.reclaimed;
  // active -> retired, or leaving -> retired when the CM thread got there first.
  if (!cas(l.state, LinkState::active, LinkState::retired)) {
    (void)cas(l.state, LinkState::leaving, LinkState::retired);
  }
}

void RcPublisher::sweep() noexcept {
  std::uint32_t out = 0;
  for (std::uint32_t i = 0; i < n_active_; ++i) {
    if (active_[i].dead) continue;
    if (out != i) active_[out] = active_[i];
    ++out;
  }
  n_active_ = out;
  any_dead_ = false;
  n_active_snapshot_.store(n_active_, std::memory_order_relaxed);
  recompute_limits();
}

void RcPublisher::recompute_limits() noexcept {
  std::uint64_t m = capacity_;
  std::uint32_t split = 0;
  for (std::uint32_t i = 0; i < n_active_; ++i) {
    if (active_[i].dead) continue;
    m = std::min(m, active_[i].capacity);
    if (active_[i].mode == WriteMode::memory_split) ++split;
  }
  for (std::uint32_t i = 0; i < n_pending_; ++i) {
    m = std::min(m, pending_[i].capacity);
    if (pending_[i].mode == WriteMode::memory_split) ++split;
  }
  min_capacity_ = m;
  split_links_ = split;
}

void RcPublisher::reconcile() noexcept {
  seen_generation_ = generation_.load(std::memory_order_acquire);
  auto pending_pos = [this](std::uint32_t index) -> std::uint32_t {
    for (std::uint32_t p = 0; p < n_pending_; ++p) {
      if (pending_[p].index == index) return p;
    }
    return kMaxSubscribers;
  };
  auto drop_pending = [this](std::uint32_t p) { pending_[p] = pending_[--n_pending_]; };

  for (std::uint32_t i = 0; i < config_.max_subscribers; ++i) {
    Link& l = links_[i];
    const auto s = static_cast<LinkState>(l.state.load(std::memory_order_acquire));
    switch (s) {
      case LinkState::joining: {
        // Late join: it starts at the next tick published; until it is established, the
        // staging ring keeps every tick from there (its backfill).
        l.first_seq.store(next_seq_, std::memory_order_release);
        Pending& p = pending_[n_pending_++];
        p.index = i;
        p.first_seq = next_seq_;
        p.capacity = std::uint64_t{1} << l.req.capacity_log2;
        // Conflate is drop on the wire: never waited for, at-risk slots zeroed so that it sees
        // its laps (it catches up through the table itself).
        p.policy = never_waits(static_cast<SlowConsumerPolicy>(l.req.policy))
                       ? SlowConsumerPolicy::drop
                       : static_cast<SlowConsumerPolicy>(l.req.policy);
        p.mode = static_cast<WriteMode>(l.req.mode);
        if (!cas(l.state, LinkState::joining, LinkState::reserved)) drop_pending(n_pending_ - 1);
        break;
      }
      case LinkState::established: {
        const std::uint32_t p = pending_pos(i);
        if (p != kMaxSubscribers) activate(p);
        break;
      }
      case LinkState::leaving: {
        const std::uint32_t p = pending_pos(i);
        if (p != kMaxSubscribers) drop_pending(p);
        bool found = false;
        for (std::uint32_t a = 0; a < n_active_; ++a) {
          if (active_[a].index == i && !active_[a].dead) {
            retire(active_[a], LinkEnd::disconnected);
            ++counters_.reclaimed;  // found gone while being served
            found = true;
          }
        }
        if (!found) (void)cas(l.state, LinkState::leaving, LinkState::retired);
        break;
      }
      default:
        break;
    }
  }
  if (any_dead_) sweep();
  recompute_limits();
  n_active_snapshot_.store(n_active_, std::memory_order_relaxed);
}

void RcPublisher::activate(std::uint32_t pending_pos) noexcept {
  const Pending p = pending_[pending_pos];
  pending_[pending_pos] = pending_[--n_pending_];
  Link& l = links_[p.index];
  Active& a = active_[n_active_++];
  a = Active{};
  a.qp = l.qp->get();
  a.cq = l.cq->get();
  a.link = &l;
  a.region_addr = l.req.region_addr;
  a.slots_addr = l.req.region_addr + kControlBytes;
  a.rkey = l.req.rkey;
  a.staging_lkey = l.staging_mr->lkey();
  a.source_lkey = l.source_mr->lkey();
  a.max_inline = l.max_inline;
  a.capacity = p.capacity;
  a.mask = p.capacity - 1;
  a.cached_credit = p.first_seq;
  a.mode = static_cast<WriteMode>(l.req.mode);
  a.policy = p.policy;
  a.index = p.index;
  a.disconnect_cycles = std::max<std::uint64_t>(
      1, Clock::instance().ns_to_cycles(static_cast<double>(l.req.disconnect_after_ms) * 1e6));
  a.sent = p.first_seq;
  // A memory-polling drop subscriber that missed more than a ring while connecting starts one
  // ring back: it finds its first slot lapped and counts the loss.
  if (a.policy == SlowConsumerPolicy::drop && is_memory_mode(a.mode) &&
      next_seq_ - p.first_seq > a.capacity) {
    a.sent = next_seq_ - a.capacity;
  }
  l.position.store(p.first_seq, std::memory_order_relaxed);
  l.back_pressure.store(0, std::memory_order_relaxed);
  if (!cas(l.state, LinkState::established, LinkState::active)) {
    // The CM thread gave up on it meanwhile (leaving): let it go at once.
    a.dead = true;
    any_dead_ = true;
    (void)cas(l.state, LinkState::leaving, LinkState::retired);
    return;
  }
  n_active_snapshot_.store(n_active_, std::memory_order_relaxed);
  if (a.sent < next_seq_) send(a, next_seq_);  // the ticks published since it was accepted
}

namespace {

// Runs `more()` every 200 us while it says there is more to do, for up to 2 s (close() only).
template <class More>
void for_up_to_2s(More more) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (more() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

void RcPublisher::notify_and_drain() noexcept {
  // Runs in close(), owning the data path. First the ticks publish() accepted but could not yet
  // write (a send queue that was full: a backlog a later publish() would have sent): closing must
  // not drop what the subscribers' rings had room for (close() names what is left). Then tell
  // every subscriber, and wait for the notices to land, so that they read "closed" rather than a
  // silent disconnect.
  for_up_to_2s([this] {
    bool behind = false;
    for (std::uint32_t i = 0; i < n_active_; ++i) {
      Active& a = active_[i];
      if (!backlogged(a)) continue;
      send(a, next_seq_);
      behind = behind || backlogged(a);
    }
    return behind;
  });
  for (std::uint32_t i = 0; i < n_active_; ++i) {
    Active& a = active_[i];
    if (!a.dead && !a.evicting) (void)post_notice(a, Notice::closed);
  }
  for_up_to_2s([this] {
    bool waiting = false;
    for (std::uint32_t i = 0; i < n_active_; ++i) {
      Active& a = active_[i];
      if (a.dead || a.notice_wr == 0 || a.completed >= a.notice_wr) continue;
      reap(a);
      waiting = waiting || (!a.dead && a.completed < a.notice_wr);
    }
    return waiting;
  });
}

}  // namespace tickrail::rdma::rc
