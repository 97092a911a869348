// UD multicast subscriber: joins one or more groups (one publisher session each), busy-polls
// one receive CQ, validates every datagram, tracks each session's sequence, fills holes by RDMA
// READ from the publisher's history, and delivers each stream's ticks in sequence order.
//
// Threads: the polling thread (poll(): the data path) and a conductor (control plane: opens
// and tears down the recovery connections, watches rdma_cm events). They share, per group, one
// atomic RecoveryState; the conductor creates or destroys a RecoveryLink only while the polling
// thread cannot be using it (states below).
//
// Streams of several groups are independent: each is delivered in its own order, interleaved.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/silence.hpp"
#include "tickrail/memory.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/ud/datagram.hpp"
#include "transport/rdma/ud/multicast.hpp"
#include "transport/rdma/ud/recovery_link.hpp"
#include "transport/rdma/ud/sequence_tracker.hpp"
#include "transport/rdma/verbs.hpp"
#include "transport/table_delivery.hpp"
#include "transport/transport.hpp"

namespace tickrail::rdma::ud {

// What the UD transport counts beyond SubscriberCounters, summed over its groups.
struct UdSubscriberCounters {
  std::uint64_t datagrams = 0;     // valid datagrams of our sessions (data, heartbeat, end)
  std::uint64_t heartbeats = 0;    // of which heartbeats and ends
  std::uint64_t ticks = 0;         // ticks received in datagrams (duplicates included)
  std::uint64_t delivered = 0;     // ticks handed to the application
  std::uint64_t gaps = 0;          // holes seen opening
  std::uint64_t recovered = 0;     // ticks recovered by RDMA READ
  std::uint64_t lost = 0;          // ticks lost for good
  std::uint64_t loss_events = 0;  // runs of ticks lost for good (the skips of SubscriberCounters)
  std::uint64_t duplicates = 0;
  std::uint64_t reordered = 0;     // ticks that arrived late by multicast and filled a hole
  std::uint64_t overrun = 0;       // ticks beyond the reorder window, left to recovery
  std::uint64_t covered = 0;       // holes another line delivered (FailoverSubscriber): no loss
  std::uint64_t foreign = 0;       // not tickrail's, or another session on our group: dropped
  std::uint64_t malformed = 0;     // tickrail's magic, inconsistent content: dropped
  std::uint64_t recv_errors = 0;   // receive completions in error
  std::uint64_t reads = 0;         // RDMA READs completed
  std::uint64_t read_errors = 0;   // RDMA READs failed (the link is then rebuilt)
  std::uint64_t hook_dropped = 0;  // dropped by the test hook
};

class UdSubscriber final : public detail::SubscriberTransport {
 public:
  explicit UdSubscriber(const SubscriberConfig& config, const detail::Placement& where = {});
  ~UdSubscriber() override;

  RingReader* ring() noexcept override { return nullptr; }
  bool in_snapshot() const noexcept override {
    return config_.start == StartMode::snapshot && delivery_ != nullptr && delivery_->busy() &&
           delivery_->why() == detail::TableDelivery::Why::snapshot;
  }
  bool ready() noexcept override;
  std::size_t poll(detail::TickSink sink, std::size_t limit) noexcept override;
  SubscriberState state() const noexcept override;
  SubscriberCounters counters() const noexcept override;
  std::uint64_t next_sequence() const noexcept override;
  std::uint64_t after_end() const noexcept override;
  void cover_below(std::uint64_t seq, std::uint64_t read_until) noexcept override;
  std::string reason() const override;
  const SubscriberConfig& config() const noexcept override { return config_; }
  detail::WakeCounter* wakeups() noexcept override { return &wakeups_; }
  void close() noexcept override;

  // Polling thread (or after it stopped).
  [[nodiscard]] UdSubscriberCounters ud_counters() const noexcept;
  [[nodiscard]] std::size_t group_count() const noexcept { return groups_.size(); }
  [[nodiscard]] std::uint64_t session(std::size_t group) const noexcept;
  [[nodiscard]] std::uint32_t mtu() const noexcept { return mtu_; }

  // Test hook on the receive path: called with every datagram received (before validation);
  // returning true drops it as if the network had. Set before polling; polling thread only.
  // Setting it switches to a receive function that calls it: without it, the receive path
  // carries no test of it at all.
  using DropHook = bool (*)(void* context, const std::byte* datagram, std::size_t length);
  void set_drop_hook(DropHook hook, void* context) noexcept;

 private:
  // States of a group's recovery link (its RecoveryLink): the polling thread moves
  // idle->wanted, failed->wanted (retry) and ready->broken; the conductor moves
  // wanted->ready/failed and broken->wanted, and touches the link only in wanted and broken.
  enum class RecoveryState : int { idle, wanted, ready, broken, failed };

  struct Group {
    Group() : id(channel, RDMA_PS_UDP) {}
    // Control plane, in creation order.
    EventChannel channel;
    CmId id;
    Address address;
    std::string text;
    MappedRegion bufs_mem;
    std::optional<MemoryRegion> bufs_mr;
    std::optional<CmQueuePair> qp;
    std::unique_ptr<Membership> membership;
    std::unique_ptr<ibv_recv_wr[]> wrs;
    std::unique_ptr<ibv_sge[]> sges;
    MappedRegion window_mem;
    // Recovery.
    std::atomic<RecoveryState> recovery_state{RecoveryState::idle};
    std::unique_ptr<RecoveryLink> recovery;  // conductor-owned; used by the poller when ready
    // The publisher's recovery endpoint from its headers, written by the poller before the
    // link goes idle->wanted (the conductor reads it after).
    std::uint8_t ep_family = 0;
    std::uint8_t ep_addr[16]{};
    std::uint16_t ep_port = 0;
    std::string link_error;  // conductor, under mutex_
    std::uint32_t connect_failures = 0;  // conductor: consecutive failed connects

    // Data path state.
    std::uint32_t index = 0;
    std::uint32_t nbufs = 0;
    std::uint32_t repost_from = 0;  // first buffer to post again
    std::uint32_t to_repost = 0;    // consumed buffers waiting to be posted
    // 0 until the first valid datagram; written once by the poller, read by status calls.
    std::atomic<std::uint64_t> session{0};
    std::uint64_t history = 0;      // the publisher's, from its headers
    SequenceTracker tracker;
    bool reading = false;
    Hole read_range{};
    std::uint64_t retry_at = 0;     // clock cycles: when a failed link may be tried again
    std::uint64_t hole_lo = 0;      // the first hole's first sequence, and when it was seen
    std::uint64_t hole_since = 0;   // (rdma.recovery_delay)
    std::uint64_t ticks = 0;
    std::uint64_t datagrams = 0;
    std::uint64_t heartbeats = 0;
    std::uint64_t foreign = 0;
    std::uint64_t malformed = 0;
    std::uint64_t recv_errors = 0;
    std::uint64_t reads = 0;
    std::uint64_t read_errors = 0;
    std::uint64_t hook_dropped = 0;
    std::atomic<std::uint64_t> last_heard{0};  // clock cycles of the last datagram of our session
    SilenceWatch silence;                       // state()'s, over last_heard
    std::atomic<bool> ended{false};             // the publisher sent its end datagram
  };

  // start = snapshot or policy = conflate: one group, whose publisher keeps a table.
  [[nodiscard]] bool wants_table() const noexcept {
    return config_.start == StartMode::snapshot || config_.policy == SlowConsumerPolicy::conflate;
  }
  void wait_for_table();

  // The group's ordered stream, as a table delivery rolls forward with it and skips along it.
  class StreamFeed final : public detail::TickFeed {
   public:
    explicit StreamFeed(UdSubscriber& s) noexcept : s_(&s) {}
    std::uint64_t next_seq() const noexcept override { return tracker().next(); }
    std::size_t poll(detail::TickSink sink, std::size_t limit) noexcept override {
      return s_->poll_stream(sink, limit);
    }
    bool lapped() const noexcept override { return tracker().lapped(); }
    void skip_to(std::uint64_t seq) noexcept override { tracker().skip_to(seq); }
    void pass_lap() noexcept override {
      if (tracker().lapped()) tracker().pass_loss();
    }
    std::uint64_t lost() const noexcept override { return tracker().counters().lost; }
    void discount(std::uint64_t n, bool lost) noexcept override { tracker().discount(n, lost); }
    std::uint64_t slack() const noexcept override { return s_->groups_.front()->history; }

   private:
    SequenceTracker& tracker() const noexcept { return s_->groups_.front()->tracker; }
    UdSubscriber* s_;
  };
  // The publisher's table over the group's recovery link, whichever link is up: while the
  // conductor rebuilds a broken one, nothing is read (the delivery's stall budget bounds that).
  class LinkTableSource final : public detail::TableSource {
   public:
    explicit LinkTableSource(UdSubscriber& s) noexcept : s_(&s) {}
    void restart() noexcept override {
      if (TableReader* r = reader()) r->restart();
    }
    std::uint64_t look() noexcept override {
      TableReader* r = reader();
      return r != nullptr ? r->look() : 0;
    }
    std::size_t copy(std::span<Tick> out, std::size_t cursor) noexcept override {
      TableReader* r = reader();
      return r != nullptr ? r->copy(out, cursor) : cursor;
    }

    // A reader that can be read from now: the link up, not failed nor disconnected.
    [[nodiscard]] TableReader* reader() const noexcept;

   private:
    UdSubscriber* s_;
  };

  // Data path. kHooked: the drop hook is set (tests only).
  std::size_t poll_stream(detail::TickSink sink, std::size_t limit) noexcept;
  std::size_t poll_with_table(detail::TickSink sink, std::size_t limit) noexcept;
  void keep_up_during_delivery(Group& g) noexcept;
  template <bool kHooked>
  std::size_t on_datagram(Group& g, const std::byte* p, std::size_t len, detail::TickSink& sink,
                          std::size_t room, std::uint64_t now) noexcept;
  void adopt_session(Group& g, const DatagramHeader& h) noexcept;
  void start_stream(Group& g, std::uint64_t first_live) noexcept;
  void repost(Group& g) noexcept;
  void drive_recovery(Group& g, std::uint64_t now) noexcept;
  bool hole_aged(Group& g, std::uint64_t lo, std::uint64_t now) noexcept;

  // Delivers nothing: takes pending completions into the reorder windows (ready()).
  void take_completions() noexcept;
  template <bool kHooked>
  std::size_t process_cq(detail::TickSink& sink, std::size_t limit) noexcept;
  using ProcessCq = std::size_t (UdSubscriber::*)(detail::TickSink&, std::size_t) noexcept;

  // Construction steps, in order: groups resolved, one receive CQ, then per group its
  // buffers posted and the join.
  void resolve_groups(const std::vector<Address>& addrs, const Address& src);
  std::uint32_t create_receive_cq();
  void post_receive_buffers(Group& g, std::uint32_t nbufs);
  void join_group(Group& g);

  // Control plane.
  void conductor_loop(std::stop_token st);
  void serve_link(Group& g);
  void teardown() noexcept;

  // Releases the verbs objects in dependency order however construction ended (declared after
  // the objects it releases, so it runs before their own destructors; before conductor_, so it
  // runs after the conductor thread has been joined).
  struct Teardown {
    UdSubscriber* self;
    ~Teardown() { self->teardown(); }
  };

  SubscriberConfig config_;
  std::vector<std::unique_ptr<Group>> groups_;
  std::optional<ProtectionDomain> pd_;
  std::optional<CompletionQueue> recv_cq_;
  std::optional<Address> configured_endpoint_;  // rdma.address:port, when set
  Teardown teardown_{this};
  std::uint32_t mtu_ = 0;
  std::uint32_t buf_stride_ = 0;
  std::uint32_t window_ticks_ = 0;
  std::uint32_t staging_ticks_ = 0;
  std::uint32_t recv_batch_ = 32;
  std::uint64_t publisher_timeout_cycles_ = 0;
  std::uint64_t retry_cycles_ = 0;
  std::uint64_t recovery_delay_cycles_ = 0;
  std::uint32_t idle_polls_ = 0;
  std::atomic<bool> closing_{false};
  DropHook drop_hook_ = nullptr;
  void* drop_context_ = nullptr;
  ProcessCq process_cq_ = &UdSubscriber::process_cq<false>;  // <true> once a drop hook is set
  // wants_table(): the group's table, delivered over its stream.
  StreamFeed feed_{*this};
  LinkTableSource table_source_{*this};
  std::unique_ptr<detail::TableDelivery> delivery_;
  mutable std::mutex mutex_;  // link_error strings
  detail::WakeCounter wakeups_;  // the conductor's
  std::jthread conductor_;
};

}  // namespace tickrail::rdma::ud
