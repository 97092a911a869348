// Control plane of UD multicast: group addresses, the local address to join from, and a joined
// membership (rdma_join_multicast and its leave) with the address handle, remote QPN and qkey
// that the RDMA_CM_EVENT_MULTICAST_JOIN event carries.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "transport/rdma/cm.hpp"
#include "transport/rdma/verbs.hpp"

namespace tickrail::rdma::ud {

// Parses a group address; Errc::invalid_argument when it is not multicast (IPv4 224.0.0.0/4,
// IPv6 ff00::/8), naming `key` and the value.
[[nodiscard]] Address parse_group(const std::string& text, const std::string& key);

[[nodiscard]] bool is_multicast(const sockaddr* sa) noexcept;

// The IPv4 address of `device`'s port (the IPv4-mapped RoCE GID), to join groups from.
// Errc::not_found naming the device when it has none (an InfiniBand port, or no address yet).
[[nodiscard]] std::string device_ipv4(const Context& device, std::uint8_t port);

// Path MTU in bytes of the port an rdma_cm id is bound to.
[[nodiscard]] std::uint32_t active_mtu(rdma_cm_id* id);

// A membership of `group` on an rdma_cm id whose address is resolved and whose QP (if it should
// receive) exists. Leaves the group when destroyed (rdma_leave_multicast, which also detaches
// the id's QP). Destroy it before the id's QP, and its AH before it.
class Membership {
 public:
  enum class Kind : std::uint8_t { full, send_only };

  // Joins and waits (bounded by `timeout`) for RDMA_CM_EVENT_MULTICAST_JOIN. A send-only join
  // that the kernel or fabric refuses falls back to a full join (send_only() says which).
  Membership(CmId& id, EventChannel& channel, const Address& group, Kind kind,
             std::chrono::milliseconds timeout);
  Membership(Membership&&) = delete;
  Membership& operator=(Membership&&) = delete;
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;
  ~Membership();

  [[nodiscard]] const ibv_ah_attr& ah_attr() const noexcept { return ah_attr_; }
  [[nodiscard]] std::uint32_t remote_qpn() const noexcept { return qpn_; }
  [[nodiscard]] std::uint32_t qkey() const noexcept { return qkey_; }
  [[nodiscard]] bool send_only() const noexcept { return send_only_; }
  [[nodiscard]] const Address& group() const noexcept { return group_; }

 private:
  bool wait_joined(EventChannel& channel, std::chrono::milliseconds timeout, Kind kind);

  rdma_cm_id* id_;
  Address group_;
  ibv_ah_attr ah_attr_{};
  std::uint32_t qpn_ = 0;
  std::uint32_t qkey_ = 0;
  bool send_only_ = false;
  bool joined_ = false;
};

}  // namespace tickrail::rdma::ud
