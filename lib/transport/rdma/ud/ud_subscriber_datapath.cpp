// The UD poll path: no allocation, no exceptions, no logging, no system calls of its own
// (ibv_poll_cq, ibv_post_recv and ibv_post_send are the provider's).
#include <algorithm>

#include "tickrail/clock.hpp"
#include "transport/rdma/ud/ud_subscriber.hpp"

namespace tickrail::rdma::ud {
namespace {

struct NoSink {
  void operator()(const Tick&) const noexcept {}
};

}  // namespace

void UdSubscriber::repost(Group& g) noexcept {
  std::uint32_t a = g.repost_from;
  std::uint32_t k = g.to_repost;
  while (k != 0) {
    // Buffers complete in the order posted (one receive queue per group), so the consumed ones
    // are a contiguous run of the ring: post it as one chain (two when it wraps).
    const std::uint32_t run = std::min(k, g.nbufs - a);
    ibv_recv_wr& last = g.wrs[a + run - 1];
    ibv_recv_wr* const saved = last.next;
    last.next = nullptr;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(g.qp->get(), &g.wrs[a], &bad);
    last.next = saved;
    if (rc != 0) {
      ++g.recv_errors;
      break;
    }
    a = a + run == g.nbufs ? 0 : a + run;
    k -= run;
  }
  g.repost_from = a;
  g.to_repost = k;
}

void UdSubscriber::adopt_session(Group& g, const DatagramHeader& h) noexcept {
  g.session.store(h.session, std::memory_order_relaxed);
  g.history = h.history;
  if (configured_endpoint_ || (h.recovery_family != 0 && h.recovery_port != 0)) {
    g.ep_family = h.recovery_family;
    std::memcpy(g.ep_addr, h.recovery_addr, sizeof g.ep_addr);
    g.ep_port = h.recovery_port;
    // Connect at join: the link is up before the first hole, or the late join needs it now.
    RecoveryState idle = RecoveryState::idle;
    g.recovery_state.compare_exchange_strong(idle, RecoveryState::wanted,
                                             std::memory_order_release, std::memory_order_relaxed);
  }
}

void UdSubscriber::start_stream(Group& g, std::uint64_t first_live) noexcept {
  // A snapshot replaces the past: it starts at the first tick live.
  std::uint64_t k = config_.start == StartMode::snapshot ? 0 : config_.rdma.late_join_recover;
  // Never ask for more than half the history: the rest may be overwritten before we read it.
  if (k > g.history / 2) k = g.history / 2;
  const std::uint64_t first = first_live > k ? first_live - k : 1;
  g.tracker.start(first, first_live);
}

template <bool kHooked>
std::size_t UdSubscriber::on_datagram(Group& g, const std::byte* p, std::size_t len,
                                      detail::TickSink& sink, std::size_t room,
                                      std::uint64_t now) noexcept {
  if constexpr (kHooked) {
    if (drop_hook_(drop_context_, p, len)) {
      ++g.hook_dropped;
      return 0;
    }
  }
  const Verdict v = validate(p, len);
  if (v != Verdict::ok) [[unlikely]] {
    if (v == Verdict::foreign) {
      ++g.foreign;
    } else {
      ++g.malformed;
    }
    return 0;
  }
  const DatagramHeader h = read_header(p);
  const std::uint64_t session = g.session.load(std::memory_order_relaxed);
  if (session == 0) [[unlikely]] {
    adopt_session(g, h);
  } else if (h.session != session) [[unlikely]] {
    ++g.foreign;  // another publisher (or a restarted one) on our group: not our stream
    return 0;
  }
  ++g.datagrams;
  g.last_heard.store(now, std::memory_order_relaxed);
  SequenceTracker& tr = g.tracker;
  if (h.kind != DatagramKind::data) {
    ++g.heartbeats;
    if (!tr.started()) start_stream(g, h.first_seq);
    (void)tr.observe(h.first_seq, h.first_seq);
    if (h.kind == DatagramKind::end) g.ended.store(true, std::memory_order_release);
    return 0;
  }
  g.ticks += h.count;
  if (!tr.started()) start_stream(g, h.first_seq);
  const bool late = tr.observe(h.first_seq, h.first_seq + h.count);
  const std::byte* ticks = p + kHeaderBytes;
  std::uint32_t i = 0;
  std::size_t delivered = 0;
  if (tr.in_order(h.first_seq)) [[likely]] {
    // The common case: straight from the receive buffer to the handler.
    const auto k = static_cast<std::uint32_t>(std::min<std::size_t>(h.count, room));
    for (; i < k; ++i) {
      alignas(kCacheLine) Tick t;
      std::memcpy(&t, ticks + std::size_t{i} * kTickBytes, sizeof t);
      t.flags = static_cast<std::uint16_t>(t.flags & ~kTickFromTable);  // live, whatever was sent
      sink(t);
    }
    tr.delivered_direct(k);
    delivered = k;
  }
  const auto source = late ? SequenceTracker::Source::late : SequenceTracker::Source::live;
  for (; i < h.count; ++i) {
    alignas(kCacheLine) Tick t;
    std::memcpy(&t, ticks + std::size_t{i} * kTickBytes, sizeof t);
    (void)tr.store(t, source);
  }
  return delivered;
}

void UdSubscriber::set_drop_hook(DropHook hook, void* context) noexcept {
  drop_hook_ = hook;
  drop_context_ = context;
  process_cq_ = hook != nullptr ? &UdSubscriber::process_cq<true> : &UdSubscriber::process_cq<false>;
}

template <bool kHooked>
std::size_t UdSubscriber::process_cq(detail::TickSink& sink, std::size_t limit) noexcept {
  ibv_wc wc[32];
  const int got = ibv_poll_cq(recv_cq_->get(), 32, wc);
  if (got <= 0) return 0;
  const std::uint64_t now = Clock::now();
  std::size_t n = 0;
  for (int i = 0; i < got; ++i) {
    Group& g = *groups_[wc[i].wr_id >> 32];
    const auto buf = static_cast<std::uint32_t>(wc[i].wr_id);
    if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= kGrhBytes) [[likely]] {
      const std::byte* p = static_cast<const std::byte*>(g.bufs_mem.data()) +
                           std::size_t{buf} * buf_stride_ + kHeaderBytes;
      n += on_datagram<kHooked>(g, p, wc[i].byte_len - kGrhBytes, sink, limit - n, now);
    } else if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
      ++g.recv_errors;
    }
    if (++g.to_repost >= recv_batch_) repost(g);
  }
  return n;
}

void UdSubscriber::drive_recovery(Group& g, std::uint64_t now) noexcept {
  SequenceTracker& tr = g.tracker;
  if (g.reading) {
    const int r = g.recovery->poll();
    if (r == 0) return;
    g.reading = false;
    if (r < 0) {
      ++g.read_errors;
      g.recovery_state.store(RecoveryState::broken, std::memory_order_release);
      return;
    }
    ++g.reads;
    (void)tr.recovered(g.recovery->staging(), g.read_range.lo, g.read_range.size());
  }
  if (!tr.started() || !tr.behind()) return;
  const RecoveryState st = g.recovery_state.load(std::memory_order_acquire);
  if (st == RecoveryState::ready) {
    if (g.recovery->disconnected()) {
      g.recovery_state.store(RecoveryState::broken, std::memory_order_release);
      return;
    }
    const Hole hole = tr.first_hole(g.recovery->staging_ticks());
    if (hole.empty() || !hole_aged(g, hole.lo, now)) return;
    if (g.recovery->post_read(hole.lo, static_cast<std::uint32_t>(hole.size())) != 0) {
      ++g.read_errors;
      g.recovery_state.store(RecoveryState::broken, std::memory_order_release);
      return;
    }
    g.reading = true;
    g.read_range = hole;
    // What is still missing right after this read continues the same hole: it has waited.
    g.hole_lo = hole.hi;
    return;
  }
  if (st == RecoveryState::failed || st == RecoveryState::idle) {
    // No recovery: the publisher advertises none, or cannot be reached. Holes are lost.
    if (tr.first_hole(1).empty()) return;
    tr.give_up(tr.highest());
    if (st == RecoveryState::failed) {
      if (g.retry_at == 0) {
        g.retry_at = now + retry_cycles_;
      } else if (now >= g.retry_at) {
        g.retry_at = 0;
        RecoveryState failed = RecoveryState::failed;
        g.recovery_state.compare_exchange_strong(failed, RecoveryState::wanted,
                                                 std::memory_order_release,
                                                 std::memory_order_relaxed);
      }
    }
  }
  // wanted or broken: the conductor is connecting; the holes wait (bounded by connect_timeout).
}

// rdma.recovery_delay: a hole is read back once its first sequence has been missing this long
// (a FailoverSubscriber's other line may bring it first, and cover it).
bool UdSubscriber::hole_aged(Group& g, std::uint64_t lo, std::uint64_t now) noexcept {
  if (recovery_delay_cycles_ == 0) return true;
  if (g.hole_lo != lo) {
    g.hole_lo = lo;
    g.hole_since = now;
  }
  return now - g.hole_since >= recovery_delay_cycles_;
}

// One stream per line under failover (FailoverConfig::validate): the first group's.
void UdSubscriber::cover_below(std::uint64_t seq, std::uint64_t read_until) noexcept {
  if (!groups_.empty()) groups_.front()->tracker.cover(seq, read_until);
}

std::size_t UdSubscriber::poll(detail::TickSink sink, std::size_t limit) noexcept {
  if (closing_.load(std::memory_order_relaxed)) [[unlikely]] return 0;
  if (delivery_ != nullptr) [[unlikely]] return poll_with_table(sink, limit);
  return poll_stream(sink, limit);
}

// A snapshot being delivered, or a conflate subscriber, which looks for a tick the history no
// longer holds: the tracker stops there (stop_at_loss), and the table catches it up instead.
std::size_t UdSubscriber::poll_with_table(detail::TickSink sink, std::size_t limit) noexcept {
  Group& g = *groups_.front();
  if (delivery_->busy()) {
    keep_up_during_delivery(g);
    return delivery_->step(feed_, sink, limit);  // given up at a loss: the feed passes it
  }
  const std::size_t n = poll_stream(sink, limit);
  if (g.tracker.lapped()) [[unlikely]] {
    if (table_source_.reader() != nullptr) {
      delivery_->begin(detail::TableDelivery::Why::conflation, feed_);
    } else {
      g.tracker.pass_loss();  // no table to catch up with now: lost, as without conflate
    }
  }
  return n;
}

// While a delivery reads the table, the group's receive queue is drained into the reorder window
// (buffers reposted, the publisher heard), lost ticks are read back, and a link whose QP failed
// or disconnected is handed to the conductor to rebuild: the stream stays where the delivery will
// roll forward from. A conflation given up leaves the stream stopped at its loss: passed.
void UdSubscriber::keep_up_during_delivery(Group& g) noexcept {
  take_completions();
  if (g.reading || g.tracker.behind()) drive_recovery(g, Clock::now());
  if (g.recovery_state.load(std::memory_order_acquire) == RecoveryState::ready && !g.reading) {
    TableReader* r = g.recovery->table_reader();
    if (g.recovery->disconnected() || (r != nullptr && r->failed())) {
      g.recovery_state.store(RecoveryState::broken, std::memory_order_release);
    }
  }
}

TableReader* UdSubscriber::LinkTableSource::reader() const noexcept {
  Group& g = *s_->groups_.front();
  if (g.recovery_state.load(std::memory_order_acquire) != RecoveryState::ready) return nullptr;
  TableReader* r = g.recovery->table_reader();
  return r != nullptr && !r->failed() && !g.recovery->disconnected() ? r : nullptr;
}

std::size_t UdSubscriber::poll_stream(detail::TickSink sink, std::size_t limit) noexcept {
  std::size_t n = 0;
  for (auto& g : groups_) {
    if (n >= limit) break;
    if (g->tracker.behind()) n += g->tracker.deliver(sink, limit - n);
  }
  if (n < limit) n += (this->*process_cq_)(sink, limit - n);
  // Recovery work only when some stream is behind; the clock is read only then.
  std::uint64_t now = 0;
  for (auto& g : groups_) {
    if (!g->reading && !g->tracker.behind()) continue;
    if (now == 0) now = Clock::now();
    drive_recovery(*g, now);
    if (n < limit && g->tracker.behind()) n += g->tracker.deliver(sink, limit - n);
  }
  return n;
}

void UdSubscriber::take_completions() noexcept {
  NoSink none;
  detail::TickSink sink(none);
  (void)(this->*process_cq_)(sink, 0);
}

bool UdSubscriber::ready() noexcept {
  if (closing_.load(std::memory_order_relaxed)) return false;
  take_completions();
  for (const auto& g : groups_) {
    if (!g->tracker.started()) return false;
  }
  return true;
}

// UD's own counters in the Subscriber's terms: no ring to lap, each run lost for good a skip.
SubscriberCounters UdSubscriber::counters() const noexcept {
  const UdSubscriberCounters u = ud_counters();
  SubscriberCounters c;
  c.received = u.delivered;
  c.lost = u.lost;
  c.skips = u.loss_events;
  c.gaps = u.gaps;
  c.recovered = u.recovered;
  c.foreign = u.foreign;
  c.malformed = u.malformed;
  c.completion_errors = u.recv_errors + u.read_errors;
  if (delivery_ != nullptr) {
    c.from_table = delivery_->entries_delivered();
    c.conflations = delivery_->conflations();
    c.table_abandoned = delivery_->abandoned();
  }
  return c;
}

std::uint64_t UdSubscriber::next_sequence() const noexcept {
  return groups_.empty() ? 0 : groups_.front()->tracker.next();
}

// Every posted buffer full of ticks, every group's reorder window and what it still has to read
// back (at most its publisher's history), and a table delivered twice (snapshot, conflation).
std::uint64_t UdSubscriber::after_end() const noexcept {
  std::uint64_t n = delivery_ != nullptr ? 2 * delivery_->geometry().entries() : 0;
  for (const auto& g : groups_) {
    const SequenceTracker& t = g->tracker;
    const std::uint64_t behind = t.highest() > t.next() ? t.highest() - t.next() : 0;
    n += std::uint64_t{g->nbufs} * ticks_per_mtu(mtu_) + t.capacity() + std::min(behind, g->history);
  }
  return n;
}

std::uint64_t UdSubscriber::session(std::size_t group) const noexcept {
  return group < groups_.size() ? groups_[group]->session.load(std::memory_order_relaxed) : 0;
}

UdSubscriberCounters UdSubscriber::ud_counters() const noexcept {
  UdSubscriberCounters c;
  for (const auto& g : groups_) {
    const TrackerCounters& t = g->tracker.counters();
    c.datagrams += g->datagrams;
    c.heartbeats += g->heartbeats;
    c.ticks += g->ticks;
    c.delivered += t.delivered;
    c.gaps += t.gaps;
    c.recovered += t.recovered;
    c.lost += t.lost;
    c.loss_events += t.loss_events;
    c.duplicates += t.duplicates;
    c.reordered += t.reordered;
    c.overrun += t.overrun;
    c.covered += t.covered;
    c.foreign += g->foreign;
    c.malformed += g->malformed;
    c.recv_errors += g->recv_errors;
    c.reads += g->reads;
    c.read_errors += g->read_errors;
    c.hook_dropped += g->hook_dropped;
  }
  return c;
}

// The two receive functions, for the constructor (ud_subscriber.cpp) to point at.
template std::size_t UdSubscriber::process_cq<false>(detail::TickSink&, std::size_t) noexcept;
template std::size_t UdSubscriber::process_cq<true>(detail::TickSink&, std::size_t) noexcept;

}  // namespace tickrail::rdma::ud
