// Shared-memory subscriber: claims an entry of the channel, then reads its ring inline.
#pragma once

#include <memory>

#include "core/silence.hpp"
#include "transport/snapshot.hpp"
#include "transport/shm/segment.hpp"
#include "transport/transport.hpp"

namespace tickrail::shm {

class ShmSubscriber final : public detail::SubscriberTransport {
 public:
  explicit ShmSubscriber(const SubscriberConfig& config);
  ~ShmSubscriber() override;

  RingReader* ring() noexcept override {
    return started_ && !closed_ && !in_snapshot() ? &reader_ : nullptr;
  }
  bool ready() noexcept override { return try_start(); }
  std::size_t poll(detail::TickSink sink, std::size_t limit) noexcept override {
    if (closed_ || !try_start()) return 0;
    if (in_snapshot()) [[unlikely]] {
      return join_->step(static_cast<Slot*>(table_.get()), reader_,
                         [this] { return status_line_->next_seq.load(std::memory_order_acquire); },
                         sink, limit);
    }
    return reader_.poll(sink, limit);
  }
  bool in_snapshot() const noexcept override { return join_ != nullptr && !join_->done(); }
  SubscriberState state() const noexcept override;
  SubscriberCounters counters() const noexcept override {
    SubscriberCounters c;
    c.received = reader_.received();
    c.lost = reader_.lost();
    c.laps = reader_.laps();
    c.skips = reader_.skips();
    c.from_table = join_ != nullptr ? join_->delivered() : 0;
    return c;
  }
  std::uint64_t next_sequence() const noexcept override { return reader_.next_seq(); }
  std::string reason() const override;
  const SubscriberConfig& config() const noexcept override { return config_; }
  void close() noexcept override;

 private:
  void handshake(const std::string& what);

  SubscriberConfig config_;
  PeerCred publisher_;  // the kernel's word, checked against publisher_users
  Fd sock_;
  // Validated once from the handshake and the descriptors' sizes; never re-read.
  std::uint64_t capacity_ = 0;
  std::uint32_t index_ = 0;
  Mapping ring_;     // read-only
  Mapping status_;   // read-only
  Mapping control_;  // ours: the credit word
  Mapping table_;    // read-only; the last-value table, when the channel keeps one
  detail::TableGeometry table_geometry_;
  std::unique_ptr<detail::SnapshotJoin> join_;  // start = snapshot
  const Status* status_line_ = nullptr;
  Control* control_line_ = nullptr;
  // The reader is built once the publisher has chosen our first sequence (on activation).
  bool try_start() noexcept;

  RingReader reader_;
  bool started_ = false;
  bool closed_ = false;
  std::uint64_t publisher_timeout_ns_ = 0;
  // Liveness over the conductor's stamp, used only as "it changed" (our CLOCK_MONOTONIC, ns).
  mutable SilenceWatch silence_;
};

}  // namespace tickrail::shm
