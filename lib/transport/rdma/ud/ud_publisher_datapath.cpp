// The UD publish path: no allocation, no exceptions, no logging, no system calls of its own
// (ibv_post_send and ibv_poll_cq are the provider's: a doorbell on a NIC, a write() on rxe).
#include "tickrail/clock.hpp"
#include "tickrail/ring.hpp"
#include "transport/rdma/ud/ud_publisher.hpp"

namespace tickrail::rdma::ud {

void UdPublisher::reap() noexcept {
  ibv_wc wc[16];
  for (;;) {
    const int n = ibv_poll_cq(send_cq_->get(), 16, wc);
    if (n <= 0) {
      if (n < 0) qp_failed_ = true;
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        ++ud_.send_errors;
        ++counters_.completion_errors;
        qp_failed_ = true;  // a UD QP with a send error stops sending (SQE state)
      }
      // Completions come in order: a signalled one retires every request before it.
      if (wc[i].wr_id + 1 > retired_) retired_ = wc[i].wr_id + 1;
    }
    if (n < 16) return;
  }
}

bool UdPublisher::send_queue_room() noexcept {
  if (posted_ - retired_ < sq_depth_) return true;
  // Full: the oldest signalled request completes within microseconds on any NIC; wait for it
  // a bounded while, then report back-pressure rather than spin forever.
  for (int i = 0; i < 100000; ++i) {
    reap();
    if (posted_ - retired_ < sq_depth_) return true;
    if (qp_failed_) return false;
  }
  ++ud_.sq_full;
  return false;
}

bool UdPublisher::post(DatagramKind kind, std::uint64_t first, std::uint32_t count,
                       std::uint64_t now) noexcept {
  if (qp_failed_ || !send_queue_room()) return false;
  const std::uint64_t idx = posted_ & (sq_depth_ - 1);
  DatagramHeader& h = headers_[idx];
  h.kind = kind;
  h.first_seq = first;
  h.count = count;
  h.send_ts = now;
  ibv_send_wr& wr = wrs_[idx];
  ibv_sge* sge = wr.sg_list;
  if (count != 0) {
    const std::uint64_t slot = first & history_mask_;
    const std::uint64_t capacity = history_mask_ + 1;
    const std::uint64_t n1 = count < capacity - slot ? count : capacity - slot;
    sge[1].addr = reinterpret_cast<std::uintptr_t>(history_ + slot);
    sge[1].length = static_cast<std::uint32_t>(n1 * kTickBytes);
    if (n1 < count) {  // the ticks wrap around the end of the history ring
      sge[2].addr = reinterpret_cast<std::uintptr_t>(history_);
      sge[2].length = static_cast<std::uint32_t>((count - n1) * kTickBytes);
      wr.num_sge = 3;
    } else {
      wr.num_sge = 2;
    }
  } else {
    wr.num_sge = 1;
  }
  unsigned flags = 0;
  if (datagram_bytes(count) <= max_inline_) flags |= IBV_SEND_INLINE;
  if ((posted_ + 1) % signal_every_ == 0 || kind == DatagramKind::end) flags |= IBV_SEND_SIGNALED;
  wr.send_flags = flags;
  wr.wr_id = posted_;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(qp_->get(), &wr, &bad) != 0) {
    ++ud_.send_errors;
    return false;
  }
  ++posted_;
  last_post_ = now;
  if (kind == DatagramKind::data) {
    ++ud_.datagrams;
  } else {
    ++ud_.heartbeats;
  }
  return true;
}

PublishResult UdPublisher::publish(std::span<const Tick> ticks) noexcept {
  if (closing_.load(std::memory_order_relaxed)) [[unlikely]] {
    if (!end_sent_) send_end();
    return {PublishStatus::closed, 0, 0};
  }
  if (qp_failed_) [[unlikely]] return {PublishStatus::closed, 0, 0};
  const std::uint64_t now = Clock::now();
  if (posted_ - retired_ >= signal_every_) reap();

  // A full datagram left behind by a full send queue goes first.
  if (next_seq_ - pending_first_ == tpd_) {
    if (!post(DatagramKind::data, pending_first_, tpd_, now)) {
      ++counters_.back_pressured;
      return {PublishStatus::back_pressured, 0, 0};
    }
    pending_first_ += tpd_;
  }

  const std::size_t want = ticks.size();
  std::size_t accepted = 0;
  while (accepted < want) {
    const std::uint64_t pending = next_seq_ - pending_first_;
    if (pending == 0) pending_since_ = now;
    const std::size_t k = std::min<std::size_t>(tpd_ - pending, want - accepted);
    // The tick is written once, into its history slot, before any datagram can announce it:
    // what a subscriber learns exists is always there to be read.
    const std::uint64_t first = next_seq_;
    for (std::size_t j = 0; j < k; ++j) {
      const Tick& t = ticks[accepted + j];
      write_slot(history_[next_seq_ & history_mask_], t, next_seq_,
                 config_.stamp_send_time ? now : t.send_ts, /*may_be_read=*/true);
      ++next_seq_;
    }
    table_.keep(ticks.subspan(accepted, k), first, config_.stamp_send_time ? now : 0, counters_);
    accepted += k;
    counters_.published += k;
    if (next_seq_ - pending_first_ == tpd_) {
      if (!post(DatagramKind::data, pending_first_, tpd_, now)) {
        ++counters_.back_pressured;  // sequenced and kept: sent by a later call
        return {PublishStatus::back_pressured, static_cast<std::uint32_t>(accepted), 0};
      }
      pending_first_ += tpd_;
    }
  }

  // A partial datagram goes now (no batch delay), or once it has waited batch_delay.
  const std::uint64_t pending = next_seq_ - pending_first_;
  if (pending != 0 && (batch_delay_cycles_ == 0 || now - pending_since_ >= batch_delay_cycles_)) {
    if (post(DatagramKind::data, pending_first_, static_cast<std::uint32_t>(pending), now)) {
      pending_first_ += pending;
    }
  }
  // Idle: a heartbeat carries the next sequence to be sent, so that subscribers see a lost
  // tail and know we are alive.
  if (now - last_post_ >= heartbeat_cycles_) {
    (void)post(DatagramKind::heartbeat, pending_first_, 0, now);
  }
  return {PublishStatus::ok, static_cast<std::uint32_t>(accepted), 0};
}

bool UdPublisher::flush() noexcept {
  const std::uint64_t pending = next_seq_ - pending_first_;
  if (pending == 0) return true;
  if (!post(DatagramKind::data, pending_first_, static_cast<std::uint32_t>(pending), Clock::now())) {
    return false;
  }
  pending_first_ += pending;
  return true;
}

void UdPublisher::send_end() noexcept {
  end_sent_ = true;
  (void)flush();
  (void)post(DatagramKind::end, pending_first_, 0, Clock::now());
}

}  // namespace tickrail::rdma::ud
