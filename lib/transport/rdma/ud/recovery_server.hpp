// Publisher side of recovery: accepts subscribers' RC connections and grants each RDMA READ
// access to the history ring. After that the publisher's CPU does nothing for recovery: the
// NIC serves the reads.
//
// Runs on its own thread (control plane: rdma_cm events, allocation, logging). Its QPs never
// post anything, so the rule that only the publishing thread posts on the publisher's QPs holds.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tickrail/publisher.hpp"
#include "transport/rdma/cm.hpp"
#include "core/thread.hpp"
#include "transport/rdma/ud/recovery_protocol.hpp"
#include "transport/rdma/verbs.hpp"

namespace tickrail::rdma::ud {

class RecoveryServer {
 public:
  struct Params {
    Address listen;                // the publisher's address and rdma.port (0: any free port)
    std::string token;             // required in each request ("" = none)
    std::uint32_t max_connections = 64;
    RecoveryGrant grant{};         // what every accepted subscriber gets
    std::string device;            // rdma.device ("" = any)
    detail::Placement placement;   // where its thread runs
  };

  // Binds and listens (throws Error: address in use, not on an RDMA device...), then serves on
  // its thread. The PD must be the one the history is registered in, on the same device.
  RecoveryServer(const Params& p, const ProtectionDomain& pd);
  ~RecoveryServer();
  RecoveryServer(const RecoveryServer&) = delete;
  RecoveryServer& operator=(const RecoveryServer&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] std::uint32_t connections() const noexcept {
    return established_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::vector<SubscriberStatus> status() const;
  // Disconnects every subscriber and stops the thread. Idempotent.
  void stop() noexcept;
  [[nodiscard]] detail::WakeCounter& wakeups() noexcept { return wakeups_; }

 private:
  struct Conn {
    CmId id;
    CmQueuePair qp;
    std::string peer;
    bool established = false;
  };

  void run(std::stop_token st);
  void handle(CmEvent& ev, std::vector<rdma_cm_id*>& dead);
  void on_request(CmEvent& ev);
  void refuse(CmId& id, const std::string& peer, const std::string& why);

  Params params_;
  ibv_pd* pd_;
  EventChannel channel_;
  CmId listener_;
  CompletionQueue cq_;  // shared by the connections' QPs, which never complete anything
  std::uint16_t port_ = 0;
  std::uint8_t responder_resources_ = 1;
  mutable std::mutex mutex_;  // conns_ (status() reads it from other threads)
  std::vector<std::unique_ptr<Conn>> conns_;
  std::atomic<std::uint32_t> established_{0};
  std::atomic<bool> stopped_{false};
  detail::WakeCounter wakeups_;  // the thread's
  std::jthread thread_;
};

}  // namespace tickrail::rdma::ud
