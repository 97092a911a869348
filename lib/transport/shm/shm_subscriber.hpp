// Shared-memory subscriber: claims an entry of the channel, then reads its ring inline.
#pragma once

#include <functional>
#include <memory>

#include "core/silence.hpp"
#include "transport/table_delivery.hpp"
#include "transport/shm/segment.hpp"
#include "transport/transport.hpp"

namespace tickrail::shm {

class ShmSubscriber final : public detail::SubscriberTransport {
 public:
  // `between`: called while it waits for the channel to appear (Subscriber's between_attempts).
  explicit ShmSubscriber(const SubscriberConfig& config, const std::function<void()>* between = nullptr);
  ~ShmSubscriber() override;

  // Polled inline once started, but for conflate subscribers (which look for laps here) and
  // during a snapshot.
  RingReader* ring() noexcept override {
    return started_ && !closed_ && config_.policy != SlowConsumerPolicy::conflate && !in_snapshot()
               ? &reader_
               : nullptr;
  }
  bool ready() noexcept override { return try_start(); }
  std::size_t poll(detail::TickSink sink, std::size_t limit) noexcept override {
    if (closed_ || !try_start()) return 0;
    if (table_delivery_ != nullptr) [[unlikely]] return poll_with_table(sink, limit);
    return reader_.poll(sink, limit);
  }
  // From the attach (before the publisher activates us) until the snapshot is delivered.
  bool in_snapshot() const noexcept override {
    return config_.start == StartMode::snapshot && table_delivery_ != nullptr &&
           (!started_ || (table_delivery_->busy() && table_delivery_->why() == detail::TableDelivery::Why::snapshot));
  }
  SubscriberState state() const noexcept override;
  SubscriberCounters counters() const noexcept override {
    SubscriberCounters c;
    c.received = reader_.received();
    c.lost = reader_.lost();
    c.laps = reader_.laps();
    c.skips = reader_.skips();
    if (table_delivery_ != nullptr) {
      c.from_table = table_delivery_->entries_delivered();
      c.conflations = table_delivery_->conflations();
      c.table_abandoned = table_delivery_->abandoned();
    }
    return c;
  }
  std::uint64_t next_sequence() const noexcept override { return reader_.next_seq(); }
  std::uint64_t after_end() const noexcept override {
    return capacity_ + (table_delivery_ != nullptr ? 2 * table_delivery_->geometry().entries() : 0);
  }
  std::string reason() const override;
  const SubscriberConfig& config() const noexcept override { return config_; }
  void close() noexcept override;

 private:
  void handshake(const std::string& what, const std::function<void()>* between);

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
  // start = snapshot or policy = conflate: the table delivered at the start and after laps.
  std::unique_ptr<detail::MappedTableSource> table_source_;
  std::unique_ptr<detail::TableDelivery> table_delivery_;
  std::size_t poll_with_table(detail::TickSink sink, std::size_t limit) noexcept;
  const Status* status_line_ = nullptr;
  Control* control_line_ = nullptr;
  // The reader is built once the publisher has chosen our first sequence (on activation).
  bool try_start() noexcept;

  RingReader reader_;
  detail::RingFeed feed_{reader_};  // what a table delivery rolls forward with
  bool started_ = false;
  bool closed_ = false;
  std::uint64_t publisher_timeout_ns_ = 0;
  // Liveness over the conductor's stamp, used only as "it changed" (our CLOCK_MONOTONIC, ns).
  mutable SilenceWatch silence_;
};

}  // namespace tickrail::shm
