// UD multicast publisher: sequences ticks, keeps the last `history` of them in a registered ring
// that subscribers read lost ticks from (RDMA READ, through RecoveryServer), and sends each tick
// once to the multicast group, whatever the number of subscribers.
//
// Threads: the publishing thread (publish(), service(): the data path, the only one posting on
// the UD QP; it also sends heartbeats and the end-of-stream datagram) and the recovery server's
// (control plane). close() may come from any thread: it stops the server at once; the end
// datagram goes out from the next publish()/service() or the destructor, so that the publishing
// thread stays the only one posting.
//
// Zero copy: a tick is written once, into its history slot, and a datagram is gathered by the
// NIC from a prepared header and the history slots it carries (inline when it fits).
//
// With [state] enabled it also keeps the last-value table (common/table_region.hpp), after the
// history and before any datagram announces the ticks; the recovery connection grants it to
// subscribers for RDMA READ beside the history.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "tickrail/memory.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/common/table_region.hpp"
#include "transport/rdma/ud/datagram.hpp"
#include "transport/rdma/ud/multicast.hpp"
#include "transport/rdma/ud/recovery_server.hpp"
#include "transport/rdma/verbs.hpp"
#include "transport/transport.hpp"

namespace tickrail::rdma::ud {

struct UdPublisherCounters {
  std::uint64_t datagrams = 0;    // data datagrams posted
  std::uint64_t heartbeats = 0;   // heartbeat (and end) datagrams posted
  std::uint64_t send_errors = 0;  // failed posts or error completions
  std::uint64_t sq_full = 0;      // times the send queue was full (back-pressure)
};

class UdPublisher final : public detail::PublisherTransport {
 public:
  explicit UdPublisher(const PublisherConfig& config, const detail::Placement& where = {});
  ~UdPublisher() override;

  PublishResult publish(std::span<const Tick> ticks) noexcept override;
  std::uint64_t next_sequence() const noexcept override { return next_seq_; }
  // UD cannot see its multicast receivers: this counts the subscribers connected for recovery
  // (each connects once it has heard us), as Publisher::subscriber_count() documents.
  std::uint32_t subscriber_count() const noexcept override {
    return server_ ? server_->connections() : 0;
  }
  const PublisherCounters& counters() const noexcept override { return counters_; }
  std::vector<SubscriberStatus> subscribers() const override;
  const PublisherConfig& config() const noexcept override { return config_; }
  detail::WakeCounter* wakeups() noexcept override { return server_ ? &server_->wakeups() : nullptr; }
  const detail::LastValueWriter* table() const noexcept override {
    return table_.on() ? &table_.writer() : nullptr;
  }
  void close() noexcept override;

  // Heartbeats, a due partial datagram, the end datagram after close(): Publisher::service().
  void service() noexcept { (void)publish(std::span<const Tick>{}); }
  // Sends the ticks waiting for a fuller datagram now (batching); publishing thread only.
  // False when the send queue stayed full.
  bool flush() noexcept;

  [[nodiscard]] const UdPublisherCounters& ud_counters() const noexcept { return ud_; }
  [[nodiscard]] std::uint32_t ticks_per_datagram() const noexcept { return tpd_; }
  [[nodiscard]] std::uint32_t mtu() const noexcept { return mtu_; }
  [[nodiscard]] std::uint32_t max_inline() const noexcept { return max_inline_; }
  [[nodiscard]] bool send_only_member() const noexcept { return membership_->send_only(); }
  [[nodiscard]] std::uint16_t recovery_port() const noexcept { return server_ ? server_->port() : 0; }
  [[nodiscard]] std::uint64_t session() const noexcept { return session_; }

 private:
  // Setup steps of the constructor, in order.
  void size_send_queue();
  void register_memory();
  void create_queue_pair();
  void start_recovery_server(const Address& listen, const detail::Placement& placement);
  void prepare_work_requests(const Address& listen);

  // Data path.
  bool post(DatagramKind kind, std::uint64_t first, std::uint32_t count, std::uint64_t now) noexcept;
  bool send_queue_room() noexcept;
  void reap() noexcept;
  void send_end() noexcept;

  PublisherConfig config_;
  // Control-plane objects, declared in creation order so that teardown runs in reverse:
  // membership (leave), QP, CQ, MRs, PD, id, channel.
  EventChannel mc_channel_;
  CmId mc_id_;
  ProtectionDomain pd_;
  MappedRegion history_mem_;
  std::optional<MemoryRegion> history_mr_;
  MappedRegion header_mem_;
  std::optional<MemoryRegion> header_mr_;
  TableRegion table_;  // off without [state]
  std::optional<MemoryRegion> table_mr_;
  std::optional<CompletionQueue> send_cq_;
  std::optional<CmQueuePair> qp_;
  std::unique_ptr<Membership> membership_;
  std::optional<AddressHandle> ah_;
  std::unique_ptr<RecoveryServer> server_;

  // Geometry.
  std::uint32_t mtu_ = 0;
  std::uint32_t tpd_ = 1;  // ticks per datagram
  std::uint32_t max_inline_ = 0;
  std::uint32_t sq_depth_ = 0;  // power of two
  std::uint32_t signal_every_ = 1;
  std::uint64_t session_ = 0;
  std::uint64_t history_mask_ = 0;
  std::uint64_t heartbeat_cycles_ = 0;    // clock cycles between heartbeats when idle
  std::uint64_t batch_delay_cycles_ = 0;  // clock cycles a partial datagram may wait

  // Data path state (publishing thread only).
  alignas(kCacheLine) Slot* history_ = nullptr;
  DatagramHeader* headers_ = nullptr;  // sq_depth_ prepared headers
  std::unique_ptr<ibv_send_wr[]> wrs_;  // one prepared work request per header
  std::unique_ptr<ibv_sge[]> sges_;     // three per work request: header, history, wrapped rest
  std::uint64_t next_seq_ = 1;
  std::uint64_t pending_first_ = 1;  // ticks [pending_first_, next_seq_) are not sent yet
  std::uint64_t pending_since_ = 0;  // clock cycles when the first of them was published
  std::uint64_t posted_ = 0;         // work requests posted
  std::uint64_t retired_ = 0;        // work requests known complete
  std::uint64_t last_post_ = 0;      // clock cycles of the last datagram (heartbeat pacing)
  bool end_sent_ = false;
  bool qp_failed_ = false;
  PublisherCounters counters_{};
  UdPublisherCounters ud_{};

  std::atomic<bool> closing_{false};
};

}  // namespace tickrail::rdma::ud
