// The RC subscriber's polling path: no allocation, exceptions, logging or system calls of our
// own (ibv_poll_cq, ibv_post_recv and ibv_post_send are user-space queue operations on a
// hardware NIC; on rxe, each post ends with a write() to the uverbs fd: docs/state.md).
//
// CQ polling. Each WRITE WITH IMMEDIATE carries the low 32 bits of the last tick it wrote;
// its completion means that WRITE and every earlier one on the QP have been placed, so every
// slot up to that tick may be read. The full sequence is rebuilt from the previous one:
// completions arrive in order, so it is the first value at or after it with those low bits
// (correct while two successive WRITEs to us are less than 2^32 ticks apart). Under `drop`
// the publisher skips the ticks that do not fit our ring instead of overwriting unread
// slots (rc_publisher_datapath.cpp): a slot up to that limit that does not hold the tick we
// expect was never written to us, and counts as lost. Heartbeats to a CQ-polling subscriber
// are WRITEs WITH IMMEDIATE too, carrying the publisher's position for it, so that ticks
// dropped for us are counted even when nothing more is written to us.
#include <arpa/inet.h>

#include <cstring>

#include "transport/rdma/rc/rc_subscriber.hpp"

namespace tickrail::rdma::rc {

std::size_t RcSubscriber::poll(detail::TickSink sink, std::size_t limit) noexcept {
  if (closed_) return 0;
  if (!is_memory_mode(mode_)) {
    if (delivery_ != nullptr && delivery_->busy()) [[unlikely]] return poll_cq_with_table(sink, limit);
    return poll_cq(sink, limit);
  }
  if (delivery_ != nullptr) [[unlikely]] return poll_with_table(sink, limit);
  return reader_.poll(sink, limit);  // Subscriber::poll returns the credit
}

void RcSubscriber::note_loss(PeerLoss why) noexcept {
  std::uint32_t none = 0;
  loss_.compare_exchange_strong(none, static_cast<std::uint32_t>(why), std::memory_order_release);
}

// A snapshot being delivered, or a conflate subscriber (which looks for laps here). The table's
// READs are posted and reaped inside these steps: the snapshot and conflation path only.
std::size_t RcSubscriber::poll_with_table(detail::TickSink sink, std::size_t limit) noexcept {
  std::size_t n = 0;
  if (delivery_->busy()) {
    n = delivery_->step(feed_, sink, limit);
    if (table_reader_->failed()) [[unlikely]] note_loss(PeerLoss::qp_error);
  } else {
    n = reader_.poll(sink, limit);
    if (reader_.lapped()) [[unlikely]] delivery_->begin(detail::TableDelivery::Why::conflation, feed_);
  }
  // Polled out of line, the ring's credit goes back from here (Subscriber::poll returns it for a
  // ring polled inline only).
  settle_credit(reader_.next_seq(), n == 0);
  return n;
}

// A snapshot over CQ polling: completions are taken on every poll (poll_cq delivering nothing),
// so that receives are reposted and the publisher's WRITEs and heartbeats never wait for one,
// whatever the copy's length; the roll forward then polls the ring through cq_feed_.
std::size_t RcSubscriber::poll_cq_with_table(detail::TickSink sink, std::size_t limit) noexcept {
  (void)poll_cq(sink, 0);
  const std::size_t n = delivery_->step(cq_feed_, sink, limit);
  if (table_reader_->failed()) [[unlikely]] note_loss(PeerLoss::qp_error);
  settle_credit(next_, n == 0);
  return n;
}

void RcSubscriber::post_receives(std::uint32_t n) noexcept {
  while (recv_used_ >= n) {
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(conn_->qp->get(), recv_wr_.data(), &bad) != 0) [[unlikely]] {
      std::uint32_t none = 0;
      loss_.compare_exchange_strong(none, static_cast<std::uint32_t>(PeerLoss::qp_error),
                                    std::memory_order_release);
      return;
    }
    recv_used_ -= n;
  }
}

std::size_t RcSubscriber::poll_cq(detail::TickSink sink, std::size_t limit) noexcept {
  using namespace ring_detail;
  const int n = ibv_poll_cq(conn_->recv_cq->get(), static_cast<int>(wc_.size()), wc_.data());
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wc_[static_cast<std::size_t>(i)];
    ++recv_used_;
    if (wc.status != IBV_WC_SUCCESS) [[unlikely]] {
      // Flushed: the QP went to error (the publisher vanished); the CM thread usually says so
      // too, and what arrived before can still be drained.
      std::uint32_t none = 0;
      loss_.compare_exchange_strong(none, static_cast<std::uint32_t>(PeerLoss::qp_error),
                                    std::memory_order_release);
      continue;
    }
    const std::uint32_t low = ntohl(wc.imm_data);
    const std::uint64_t seq = limit_ + static_cast<std::uint32_t>(low - static_cast<std::uint32_t>(limit_));
    if (seq > limit_) limit_ = seq;
  }
  if (recv_used_ >= recv_batch_) post_receives(recv_batch_);

  const std::uint64_t mask = capacity_ - 1;
  std::size_t delivered = 0;
  while (delivered < limit && next_ <= limit_) {
    Slot& s = slots_[next_ & mask];
    const std::uint64_t seq = load_acquire(s.words[kSeqWord]);
    if (seq == next_) {
      alignas(kCacheLine) std::uint64_t w[8];
      read_slot_words(s, w);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (load_relaxed(s.words[kSeqWord]) != seq) [[unlikely]] continue;
      w[kSeqWord] = seq;
      w[6] &= kLiveWord6;
      Tick t;
      std::memcpy(&t, w, sizeof t);
      ++next_;
      ++delivered;
      in_gap_ = false;
      sink(t);
      continue;
    }
    // Not written to us (the publisher dropped it for us: our ring was full), or, defensively,
    // a later tick (then resume at the oldest tick that can still be intact, as RingReader
    // does): counted as lost, the run of losses once in `skips_`.
    if (!in_gap_) ++skips_;
    in_gap_ = true;
    std::uint64_t resume = next_ + 1;
    if (seq > next_ && seq <= limit_ && seq >= capacity_ && seq - capacity_ + 1 > resume) {
      resume = seq - capacity_ + 1;
    }
    lost_ += resume - next_;
    next_ = resume;
  }
  received_ += delivered;
  settle_credit(next_, delivered == 0);
  return delivered;
}

std::uint64_t RcSubscriber::return_credit(std::uint64_t next_seq) noexcept {
  if (closed_ || loss_.load(std::memory_order_relaxed) != 0) return ~std::uint64_t{0};
  if (next_seq <= last_credit_) return last_credit_ + credit_every_;
  // Free send-queue entries: one signalled credit in every 16, reaped when half are in flight.
  if (credits_posted_ - credits_completed_ >= credit_depth_ / 2) {
    send_.reap();  // (a table subscriber's READ completions too: SendCompletions)
    if (send_.failed) [[unlikely]] {
      note_loss(PeerLoss::qp_error);
      return ~std::uint64_t{0};
    }
    credits_completed_ = send_.others;
    if (credits_posted_ - credits_completed_ >= credit_depth_ - 1) {
      return next_seq + 1;  // try again on the next poll
    }
  }
  // Inline: copied by the post; otherwise the NIC reads it from here after the post.
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(credit_sge_.addr))
      .store(next_seq, std::memory_order_relaxed);
  credit_wr_.wr_id = ++credits_posted_;
  credit_wr_.send_flags = (conn_->max_inline >= sizeof(std::uint64_t) ? IBV_SEND_INLINE : 0) |
                          (credits_posted_ % 16 == 0 ? IBV_SEND_SIGNALED : 0);
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(conn_->qp->get(), &credit_wr_, &bad) != 0) [[unlikely]] {
    std::uint32_t none = 0;
    loss_.compare_exchange_strong(none, static_cast<std::uint32_t>(PeerLoss::qp_error),
                                  std::memory_order_release);
    return ~std::uint64_t{0};
  }
  last_credit_ = next_seq;
  return next_seq + credit_every_;
}

}  // namespace tickrail::rdma::rc
