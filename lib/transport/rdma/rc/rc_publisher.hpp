// RC publisher: listens with rdma_cm, and RDMA-WRITEs every tick into each subscriber's ring
// over a reliable-connected QP of that subscriber's own.
//
// Threads (the shm publisher's split):
//  - the publishing thread runs the data path (rc_publisher_datapath.cpp): publish() and
//    service() are the only callers that post on the data QPs and poll their send CQs;
//  - the CM thread (rc_publisher.cpp) runs the control plane: it accepts or rejects connect
//    requests, builds each connection's verbs objects, reacts to DISCONNECTED, errors and
//    timeouts, and destroys a connection's objects once the data path has let go of it.
// They hand connections over through Link::state (every transition a CAS, each side owning
// some of them) and a generation counter the data path checks once per publish:
//
//   free -> claimed            CM: building the connection's objects
//   claimed -> joining         CM: request accepted by the checks, objects ready
//   joining -> reserved        DP: first sequence chosen; its ticks are kept in staging
//   reserved -> established    CM: accepted, RDMA_CM_EVENT_ESTABLISHED seen
//   established -> active      DP: ticks since the first sequence written; serving
//   * -> leaving               CM: peer disconnected, error, timeout
//   active|leaving -> retired  DP: stopped using the QP (leaving, evicted, completion error)
//   joining -> retired         CM: timed out before the data path ever saw it
//   retired -> free            CM: disconnected and destroyed
//
// Ticks are first copied once into a staging ring (twice the largest subscriber ring,
// registered for local access in every connection's protection domain); from there each
// subscriber gets one RDMA WRITE per run of contiguous slots (inline when it fits the QP's
// max_inline_data), so a slot's bytes come from memory that stays put until the WRITE that
// reads them has completed.
//
// With [state] enabled, the publisher also keeps the last-value table (core/last_value.hpp) in
// a region of its own, updated on the publish path after the ring WRITEs are posted, and
// registered for remote read only in the protection domain of each connection that asks for
// it (start = snapshot, policy = conflate): such a subscriber can read the table and write its
// credit line, nothing else (docs/state.md).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tickrail/memory.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/common/close_guard.hpp"
#include "transport/rdma/rc/protocol.hpp"
#include "transport/rdma/verbs.hpp"
#include "transport/transport.hpp"

namespace tickrail::rdma::rc {

enum class LinkState : std::uint32_t {
  free = 0,
  claimed,
  joining,
  reserved,
  established,
  active,
  leaving,
  retired,
};
[[nodiscard]] const char* to_string(LinkState s) noexcept;

// A link's state word (Link::state) and its one transition, moved by the CM thread and the
// publishing thread alike.
[[nodiscard]] constexpr std::uint32_t st(LinkState s) noexcept {
  return static_cast<std::uint32_t>(s);
}
inline bool cas(std::atomic<std::uint32_t>& a, LinkState from, LinkState to) noexcept {
  std::uint32_t expected = st(from);
  return a.compare_exchange_strong(expected, st(to), std::memory_order_acq_rel);
}

// Why a connection ended (for logs and counters).
enum class LinkEnd : std::uint32_t { none = 0, disconnected, failed, evicted, timed_out, closed };
[[nodiscard]] const char* to_string(LinkEnd e) noexcept;

// One subscriber connection's control-plane record. Its LinkBlock is the only memory of the
// publisher a subscriber can write (the credit line), through an MR of this link's own PD.
struct Link {
  LinkBlock block{};  // first: cache-line aligned, and the NIC's writes stay off the fields below

  std::atomic<std::uint32_t> state{0};
  std::atomic<std::uint32_t> end{0};
  std::atomic<std::uint64_t> first_seq{0};  // chosen by the data path (joining -> reserved)
  std::atomic<std::uint64_t> position{0};   // the credit the data path last read
  std::atomic<std::uint64_t> back_pressure{0};  // publish calls it held back (data path writes)

  // Written by the CM thread before joining (release), read-only for the data path after.
  ConnectRequest req{};
  std::string peer;
  std::uint32_t max_inline = 0;
  std::vector<std::uint64_t> signalled_seq;  // data path: highest tick of each signalled WR

  // CM thread only.
  bool accepted = false;
  bool disconnected = false;
  std::chrono::steady_clock::time_point deadline{};

  // Verbs objects, made by the CM thread in this order and destroyed in reverse (teardown()).
  std::optional<rdma::CmId> id;
  std::optional<rdma::ProtectionDomain> pd;
  std::optional<rdma::MemoryRegion> credit_mr;   // block.credit: remote write
  std::optional<rdma::MemoryRegion> source_mr;   // block sources: local
  std::optional<rdma::MemoryRegion> staging_mr;  // the staging ring: local
  std::optional<rdma::MemoryRegion> table_mr;    // the last-value table: remote read only
  std::optional<rdma::CompletionQueue> cq;
  std::optional<rdma::CmQueuePair> qp;

  void teardown() noexcept;
};

class RcPublisher final : public detail::PublisherTransport {
 public:
  // Binds and listens on config.rdma.address:port (port 0: an ephemeral port, reported by
  // config().rdma.port). Throws Error: no address, address on no RDMA device, device mismatch,
  // port in use, staging memory.
  explicit RcPublisher(const PublisherConfig& config, const detail::Placement& where = {});
  ~RcPublisher() override;

  PublishResult publish(std::span<const Tick> ticks) noexcept override;
  std::uint64_t next_sequence() const noexcept override { return next_seq_; }
  std::uint32_t subscriber_count() const noexcept override {
    return n_active_snapshot_.load(std::memory_order_relaxed);
  }
  const PublisherCounters& counters() const noexcept override { return counters_; }
  std::vector<SubscriberStatus> subscribers() const override;
  const PublisherConfig& config() const noexcept override { return config_; }
  detail::WakeCounter* wakeups() noexcept override { return &wakeups_; }
  const detail::LastValueWriter* table() const noexcept override {
    return table_.on() ? &table_.writer() : nullptr;
  }
  // Tells every subscriber (notice line), then disconnects and frees everything. Safe from any
  // thread: it waits for a publish() in progress to return.
  void close() noexcept override;

  // Largest number of ticks written by one post (the WR arrays are sized for it).
  static constexpr std::uint32_t kMaxBatch = 64;
  // Worst case WRs per post: split-commit with every slot at risk (3 per tick), plus 4.
  static constexpr std::uint32_t kMaxWrPerPost = 3 * kMaxBatch + 4;

 private:
  // What the data path keeps per subscriber it writes to.
  struct alignas(kCacheLine) Active {
    ibv_qp* qp = nullptr;
    ibv_cq* cq = nullptr;
    Link* link = nullptr;
    std::uint64_t slots_addr = 0;  // remote address of slot 0
    std::uint64_t region_addr = 0;
    std::uint32_t rkey = 0;
    std::uint32_t staging_lkey = 0;
    std::uint32_t source_lkey = 0;
    std::uint32_t max_inline = 0;
    std::uint64_t capacity = 0;
    std::uint64_t mask = 0;
    std::uint64_t cached_credit = 0;
    std::uint64_t sent = 0;  // next tick to write to it (< next_seq_ while it has a backlog)
    WriteMode mode = WriteMode::memory;
    SlowConsumerPolicy policy = SlowConsumerPolicy::block;
    std::uint32_t index = 0;
    bool dead = false;       // retired this round; swept after the loop
    bool evicting = false;

    // Send queue accounting: WRs are numbered from 1; a signalled completion of WR k means
    // every WR up to k is done (RC completes in order).
    std::uint64_t posted = 0;
    std::uint64_t completed = 0;
    std::uint64_t last_signalled = 0;
    std::uint64_t unsignalled_staged = 0;  // staged (non-inline) ticks since the last signal
    std::uint64_t staged_high = 0;         // highest tick a non-inline WR reads from staging
    std::uint64_t done_seq = 0;            // every tick <= this is no longer read from staging
    std::uint64_t notice_wr = 0;           // the last notice WR (eviction, close), once posted
    std::uint64_t evict_deadline = 0;      // Clock cycles: retire even if the notice never completes

    std::uint64_t full_since = 0;          // disconnect policy: Clock cycles, 0 while not full
    std::uint64_t disconnect_cycles = 0;
    std::uint64_t dropped = 0;             // ticks not written to it (drop policy, CQ polling)
  };

  struct Pending {
    std::uint32_t index = 0;
    std::uint64_t first_seq = 0;
    std::uint64_t capacity = 0;
    SlowConsumerPolicy policy = SlowConsumerPolicy::block;
    WriteMode mode = WriteMode::memory;
  };

  // --- data path (rc_publisher_datapath.cpp) ---
  void reconcile() noexcept;
  void activate(std::uint32_t pending_pos) noexcept;
  void retire(Active& a, LinkEnd why) noexcept;
  void sweep() noexcept;
  std::uint64_t room(std::uint64_t want, std::uint64_t& blocked, std::uint64_t now) noexcept;
  std::uint64_t staging_hold(std::uint64_t& holders) const noexcept;
  void stage(std::span<const Tick> ticks, std::uint64_t first, std::uint64_t stamp) noexcept;
  void send(Active& a, std::uint64_t end) noexcept;
  bool send_piece(Active& a, std::uint64_t from, std::uint64_t to) noexcept;
  void add_write(const Active& a, std::uint64_t remote, const void* local, std::uint32_t len,
                 std::uint32_t lkey) noexcept;
  bool post(Active& a, std::uint64_t staged_ticks, std::uint64_t high, bool force_signal) noexcept;
  void reap(Active& a) noexcept;
  void heartbeat(std::uint64_t now) noexcept;
  bool post_notice(Active& a, Notice what) noexcept;
  void evict(Active& a, std::uint64_t now) noexcept;
  void maintain(std::uint64_t now) noexcept;
  std::uint64_t refresh_credit(Active& a) noexcept;
  void recompute_limits() noexcept;

  // --- control plane (rc_publisher.cpp) ---
  void cm_loop(std::stop_token st) noexcept;
  [[nodiscard]] std::chrono::milliseconds wait_period() const noexcept;
  // The CM thread's longest wait while nothing is due but rdma_cm events.
  static constexpr std::chrono::milliseconds kIdleWait{1000};
  void on_event(rdma::CmEvent ev);
  void on_connect_request(rdma::CmEvent ev);
  std::optional<RejectNote> refusal(const std::optional<ConnectRequest>& req, std::size_t size,
                                    const std::string& peer, const sockaddr* peer_addr) const;
  void refuse(rdma::CmId& id, const std::string& peer, const RejectNote& note);
  Link* claim_link() noexcept;
  void abandon_link(Link& link, const std::exception& e);
  void setup_link(Link& link, rdma::CmId id, const ConnectRequest& req, const std::string& peer);
  void accept(Link& link);
  void to_leaving(Link& link, LinkEnd why) noexcept;
  void check_links() noexcept;
  Link* find(const rdma_cm_id* id) noexcept;
  // Is `peer` in `list` (empty: anyone is)?
  static bool listed(const std::vector<rdma::Address>& list, const sockaddr* peer) noexcept;
  void notify_and_drain() noexcept;
  // Live, and ticks publish() accepted are still to be written to it.
  [[nodiscard]] bool backlogged(const Active& a) const noexcept {
    return !a.dead && !a.evicting && a.sent < next_seq_;
  }

  PublisherConfig config_;
  ServeTerms terms_;
  std::uint64_t capacity_;         // config ring_capacity: the largest subscriber ring accepted
  std::uint64_t staging_slots_;    // 2 x capacity_
  std::uint32_t signal_every_;
  std::uint32_t sq_depth_;
  std::uint64_t heartbeat_cycles_;
  std::vector<rdma::Address> allow_;
  std::vector<rdma::Address> wait_for_;  // who may pick a policy that holds the publisher back
  // 2 x staging_slots_ Slots: the staging ring, then its twin with commit words of 0 (written
  // only while a split-commit subscriber is served).
  MappedRegion staging_;
  // The last-value table; off when not kept.
  rdma::TableRegion table_;
  // Declared before everything made on it (ids, links), so destroyed after them.
  rdma::EventChannel channel_;
  std::array<Link, kMaxSubscribers> links_{};

  // Data path state (publishing thread only).
  std::array<Active, kMaxSubscribers> active_{};
  std::uint32_t n_active_ = 0;
  std::array<Pending, kMaxSubscribers> pending_{};
  std::uint32_t n_pending_ = 0;
  std::uint64_t min_capacity_ = 0;
  std::uint32_t split_links_ = 0;
  std::uint64_t next_seq_ = 1;
  std::uint64_t seen_generation_ = 0;
  std::uint64_t last_heartbeat_ = 0;
  std::uint64_t beat_ = 0;
  bool any_dead_ = false;
  PublisherCounters counters_{};
  std::uint32_t n_wr_ = 0;  // WRs built in wr_ for the next post()
  std::array<ibv_send_wr, kMaxWrPerPost> wr_{};
  std::array<ibv_sge, kMaxWrPerPost> sge_{};
  // Shared by the threads: the CM thread writes Link::peer/req under it, subscribers() reads.
  mutable std::mutex status_mutex_;

  // Shared between the threads.
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> published_seq_{1};  // next_seq_, for subscribers()
  std::atomic<std::uint32_t> n_active_snapshot_{0};
  CloseGuard close_guard_;  // publish() against close() from another thread
  std::atomic<bool> device_lost_{false};

  // Control plane (the CM thread last: it stops before the objects it uses go).
  std::optional<rdma::CmId> listener_;
  std::string where_;  // "10.77.1.1:7471 on rxe0"
  detail::WakeCounter wakeups_;  // the CM thread's
  std::jthread cm_thread_;
};

}  // namespace tickrail::rdma::rc
