// Subscriber side of recovery: one RC connection to a publisher, over which lost ticks are read
// straight out of its history ring with RDMA READ (no work for the publisher's CPU).
//
// Made by the subscriber's conductor thread (connecting blocks and throws); used by the polling
// thread through post_read() and poll(), which never block, allocate or throw. The RC QP,
// its CQ and the staging buffer the reads land in are this link's own: it depends on nothing
// else of the subscriber, and nothing of the RC transport. A subscriber that wants the
// publisher's last-value table reads it over the same connection (table_reader()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tickrail/memory.hpp"
#include "tickrail/tick.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/common/table_reader.hpp"
#include "transport/rdma/common/table_region.hpp"
#include "transport/rdma/ud/recovery_protocol.hpp"
#include "transport/rdma/verbs.hpp"

namespace tickrail::rdma::ud {

class RecoveryLink {
 public:
  struct Params {
    Address publisher;               // the publisher's recovery address and port
    std::string token;               // rdma.token
    std::uint64_t session = 0;       // the session to recover
    std::uint32_t staging_ticks = 1024;  // the longest read
    std::chrono::milliseconds timeout{5000};
    std::string device;              // rdma.device ("" = any)
    bool want_table = false;         // start = snapshot or policy = conflate: read the table too
  };

  // Connects; throws Error (timed_out, rejected with the publisher's reason, not_found...).
  explicit RecoveryLink(const Params& p);
  ~RecoveryLink();
  RecoveryLink(const RecoveryLink&) = delete;
  RecoveryLink& operator=(const RecoveryLink&) = delete;

  // Data path. Reads ticks [lo, lo + n) of the history (n <= staging_ticks()) into staging();
  // 0 or the errno of ibv_post_send.
  [[nodiscard]] int post_read(std::uint64_t lo, std::uint32_t n) noexcept;
  // 1: the read completed, 0: not yet, -1: it failed (the link is broken).
  [[nodiscard]] int poll() noexcept;
  // The reader of the publisher's table over this link (want_table and a table granted), else
  // null. Its READs share the send queue with the history's (SendCompletions).
  [[nodiscard]] TableReader* table_reader() noexcept { return table_reader_.get(); }
  [[nodiscard]] const Tick* staging() const noexcept { return staging_; }
  [[nodiscard]] std::uint32_t staging_ticks() const noexcept { return staging_ticks_; }
  [[nodiscard]] std::uint64_t history() const noexcept { return grant_.capacity; }
  // The publisher's last-value table, when its grant offers one (validated at connect).
  [[nodiscard]] const std::optional<detail::TableGeometry>& table() const noexcept { return table_; }
  [[nodiscard]] bool disconnected() const noexcept {
    return disconnected_.load(std::memory_order_acquire);
  }

  // Tests, on a link with nothing else in flight (it takes the CQ's completions itself): one
  // blocking READ of the table's 64 bytes at `offset` into `out` (or a WRITE of 8, which the
  // grant must refuse: the link then breaks). Bounded to 5 s.
  [[nodiscard]] ibv_wc_status probe_table(bool write, std::uint64_t offset, Tick& out);

  // Control plane (conductor thread): takes the connection's pending rdma_cm events without
  // waiting; notes a disconnect for the polling thread.
  void check_events();
  [[nodiscard]] int event_fd() const noexcept { return channel_.fd(); }
  [[nodiscard]] std::string describe() const { return id_.describe(); }

 private:
  EventChannel channel_;
  CmId id_;
  ProtectionDomain pd_;
  MappedRegion staging_mem_;
  MemoryRegion staging_mr_;
  // The table's READs land here (want_table): declared before the QP, so deregistered after it.
  MappedRegion table_buffer_;
  std::optional<MemoryRegion> table_buffer_mr_;
  CompletionQueue cq_;
  CmQueuePair qp_;
  RecoveryGrant grant_{};
  std::optional<detail::TableGeometry> table_;
  SendCompletions sq_;
  std::uint64_t history_posted_ = 0;  // history READs posted (their wr_id)
  std::unique_ptr<TableReader> table_reader_;
  Tick* staging_ = nullptr;
  std::uint32_t staging_ticks_ = 0;
  ibv_send_wr wr_[2]{};
  ibv_sge sge_[2]{};
  std::atomic<bool> disconnected_{false};
};

}  // namespace tickrail::rdma::ud
