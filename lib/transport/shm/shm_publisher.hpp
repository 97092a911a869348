// Shared-memory publisher: one ring per subscriber entry, each tick copied into every active
// subscriber's ring.
//
// Two threads touch it: the publishing thread (data path: publish(), which also applies seat
// changes, since only it may start or stop writing a ring) and the conductor (control plane:
// heartbeats, the attach handshake, noticing subscribers that left or died; the only one making
// system calls). They share nothing but private memory: the seats below.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/last_value.hpp"
#include "transport/shm/segment.hpp"
#include "transport/transport.hpp"

namespace tickrail::shm {

class ShmPublisher final : public detail::PublisherTransport {
 public:
  ShmPublisher(const PublisherConfig& config, const detail::Placement& where);
  ~ShmPublisher() override;

  PublishResult publish(std::span<const Tick> ticks) noexcept override;
  std::uint64_t next_sequence() const noexcept override { return lane_.next_seq; }
  std::uint32_t subscriber_count() const noexcept override {
    return n_active_snapshot_.load(std::memory_order_relaxed);
  }
  const PublisherCounters& counters() const noexcept override { return counters_; }
  std::vector<SubscriberStatus> subscribers() const override;
  const PublisherConfig& config() const noexcept override { return config_; }
  detail::WakeCounter* wakeups() noexcept override { return &wakeups_; }
  const detail::LastValueWriter* table() const noexcept override {
    return table_.on() ? &table_ : nullptr;
  }
  void close() noexcept override;
  detail::PublishLane* lane() noexcept override { return &lane_; }

 private:
  // A subscriber entry, in private memory. Seat state machine (each transition a CAS or a store
  // by the one thread that owns the state it leaves):
  //   free -> pending        conductor: handshake done, memory handed over
  //   pending -> active      data path starts writing the ring
  //   active -> evicted      data path, disconnect policy
  //   pending|active|evicted -> leaving    conductor: the subscriber's socket closed
  //   leaving -> released    data path: it no longer touches the seat
  //   released -> free       conductor: unmaps the control line
  enum class SeatState : std::uint32_t { free, pending, active, evicted, leaving, released };
  struct Seat {
    std::atomic<std::uint32_t> state{0};
    std::atomic<bool> dead{false};  // left without saying goodbye
    // Written by the conductor while free, read after `pending` (acquire).
    Control* control = nullptr;
    SlowConsumerPolicy policy = SlowConsumerPolicy::block;
    std::uint64_t disconnect_after_ns = 0;
    int pid = 0;
    // Conductor only.
    Fd sock;
    SharedMemory control_memory;
  };
  // A connection that has not sent its request yet.
  struct Knock {
    Fd sock;
    PeerCred cred;
    std::uint64_t deadline_ns = 0;
  };

  // What the data path keeps per subscriber it writes to: everything on its own cache lines.
  struct alignas(kCacheLine) Active {
    Control* control = nullptr;
    std::uint64_t cached_credit = 0;     // last credit read, clamped; re-read only when full
    std::uint64_t full_since = 0;         // Clock cycles; 0 while not full
    std::uint64_t disconnect_cycles = 0;  // disconnect policy: full this long -> evict
    std::uint32_t index = 0;
    SlowConsumerPolicy policy = SlowConsumerPolicy::block;
  };

  void reconcile() noexcept;
  void activate(std::uint32_t index) noexcept;
  void remove_active(std::uint32_t pos) noexcept;
  void sync_lane() noexcept;  // after any change to active_
  // Returns how many of `want` ticks every block/disconnect subscriber has room for, and sets
  // lane_.room_until.
  std::uint64_t room(std::uint64_t want, std::uint64_t& blocked) noexcept;

  void conductor_loop(std::stop_token st);
  void accept_knocks();
  void answer(Knock& k);
  bool seat_subscriber(Knock& k, const Request& r, Reply& reply);
  void leave(std::uint32_t index, bool dead);
  void free_released();

  PublisherConfig config_;
  Allow allow_;
  Allow wait_for_;  // who may pick a policy that holds the publisher back
  std::uint64_t capacity_;
  std::uint64_t mask_;
  std::uint32_t max_subscribers_;

  SharedMemory status_memory_;
  Status* status_ = nullptr;
  Fd status_read_only_;
  SharedMemory table_memory_;  // the last-value table, when the channel keeps one
  Fd table_read_only_;
  std::vector<SharedMemory> rings_;
  std::vector<Fd> rings_read_only_;
  std::array<Seat, kMaxSubscribers> seats_{};
  mutable std::mutex seats_mutex_;  // conductor's mapping changes vs subscribers()
  std::vector<Knock> knocks_;       // conductor only
  Listener listener_;

  // Bumped by the conductor on every seat change, and by close(); read by publish(): a private
  // line.
  alignas(kCacheLine) std::atomic<std::uint64_t> generation_{0};

  // Data path state (publishing thread only).
  alignas(kCacheLine) std::array<Active, kMaxSubscribers> active_{};
  std::uint32_t n_active_ = 0;
  // The sequence (lane_.next_seq), the generation last seen, and lane_.room_until: every
  // block/disconnect subscriber has room below lane_.room_until by the credits last read, so a
  // publish that stays below it needs no look at them (0 after any seat change).
  detail::PublishLane lane_;
  // The rings of active_, in its order: what every publish writes, inline or not.
  std::array<detail::LaneRing, kMaxSubscribers> lane_rings_{};
  std::uint64_t served_mask_ = 0;  // bit i: seat i is in active_
  detail::LastValueWriter table_;
  PublisherCounters counters_{};

  // Read by other threads.
  std::atomic<std::uint32_t> n_active_snapshot_{0};
  std::atomic<bool> closing_{false};
  detail::WakeCounter wakeups_;  // the conductor's
  std::jthread conductor_;
};

}  // namespace tickrail::shm
