// Shared-memory publisher: one segment, one ring per subscriber, each tick copied into every
// active subscriber's ring.
//
// Two threads touch it: the publishing thread (data path: publish(), which also applies entry
// changes, since only it may start or stop writing a ring) and the conductor (control plane:
// heartbeats, detecting dead subscriber processes; the only one making system calls).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

#include "transport/shm/segment.hpp"
#include "transport/transport.hpp"

namespace tickrail::shm {

class ShmPublisher final : public detail::PublisherTransport {
 public:
  explicit ShmPublisher(const PublisherConfig& config);
  ~ShmPublisher() override;

  PublishResult publish(std::span<const Tick> ticks) noexcept override;
  std::uint64_t next_sequence() const noexcept override { return next_seq_; }
  std::uint32_t subscriber_count() const noexcept override {
    return n_active_snapshot_.load(std::memory_order_relaxed);
  }
  const PublisherCounters& counters() const noexcept override { return counters_; }
  std::vector<SubscriberStatus> subscribers() const override;
  const PublisherConfig& config() const noexcept override { return config_; }
  void close() noexcept override;

 private:
  // What the data path keeps per subscriber it writes to: everything on its own cache lines.
  struct alignas(kCacheLine) Active {
    Slot* ring = nullptr;
    Entry* entry = nullptr;
    std::uint64_t cached_credit = 0;     // last credit read; re-read only when it looks full
    std::uint64_t full_since = 0;        // Clock ticks; 0 while not full
    std::uint64_t disconnect_ticks = 0;  // disconnect policy: full this long -> evict
    std::uint32_t index = 0;
    SlowConsumerPolicy policy = SlowConsumerPolicy::block;
  };

  void reconcile() noexcept;
  void activate(std::uint32_t index) noexcept;
  void remove_active(std::uint32_t pos) noexcept;
  void release_entry(std::uint32_t index) noexcept;
  // Returns how many of `want` ticks every block/disconnect subscriber has room for.
  std::uint64_t room(std::uint64_t want, std::uint64_t& blocked) noexcept;
  void conductor_loop(std::stop_token st);

  PublisherConfig config_;
  Segment segment_;
  std::uint64_t capacity_;
  std::uint64_t mask_;

  // Data path state (publishing thread only).
  std::array<Active, kMaxSubscribers> active_{};
  std::uint32_t n_active_ = 0;
  std::uint64_t next_seq_ = 1;
  std::uint64_t seen_generation_ = 0;
  std::uint64_t served_mask_ = 0;  // bit i: entry i is in active_
  bool closed_ = false;
  PublisherCounters counters_{};

  // Read by other threads.
  std::atomic<std::uint32_t> n_active_snapshot_{0};
  std::atomic<bool> closing_{false};
  std::jthread conductor_;
};

}  // namespace tickrail::shm
