#include "transport/rdma/ud/multicast.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma::ud {

bool is_multicast(const sockaddr* sa) noexcept {
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return IN_MULTICAST(ntohl(in->sin_addr.s_addr));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return IN6_IS_ADDR_MULTICAST(&in6->sin6_addr);
  }
  return false;
}

Address parse_group(const std::string& text, const std::string& key) {
  if (text.empty()) throw Error(Errc::invalid_argument, key + ": empty multicast group address");
  Address a;
  try {
    a = Address::parse(text, 0);
  } catch (const Error& e) {
    throw Error(Errc::invalid_argument, key + " = '" + text + "': " + e.what());
  }
  if (!is_multicast(a.get())) {
    throw Error(Errc::invalid_argument,
                key + " = '" + text +
                    "' is not a multicast address (IPv4 224.0.0.0/4, e.g. 239.1.1.1, or IPv6 "
                    "ff00::/8)");
  }
  return a;
}

std::string device_ipv4(const Context& device, std::uint8_t port) {
  const ibv_port_attr pa = device.query_port(port);
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(device.get(), port, i, &gid) != 0) continue;
    static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(gid.raw, kMapped, sizeof kMapped) != 0) continue;
    char buf[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, gid.raw + 12, buf, sizeof buf) != nullptr) return buf;
  }
  throw Error(Errc::not_found, "RDMA device " + device.name() + " port " + std::to_string(port) +
                                   " has no IPv4 address in its GID table (set rdma.address to "
                                   "the local address to join multicast groups from)");
}

std::uint32_t active_mtu(rdma_cm_id* id) {
  ibv_port_attr pa{};
  check_ret(ibv_query_port(id->verbs, id->port_num, &pa), "ibv_query_port",
            "port " + std::to_string(id->port_num) + " of device " + device_name(id->verbs));
  return 128u << static_cast<unsigned>(pa.active_mtu);
}

// --- Membership ---

Membership::Membership(CmId& id, EventChannel& channel, const Address& group, Kind kind,
                       std::chrono::milliseconds timeout)
    : id_(id.get()), group_(group) {
  if (kind == Kind::send_only) {
    rdma_cm_join_mc_attr_ex attr{};
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    attr.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    attr.addr = group_.get();
    if (rdma_join_multicast_ex(id_, &attr, nullptr) == 0) {
      joined_ = true;
      if (wait_joined(channel, timeout, kind)) {
        send_only_ = true;
        return;
      }
      if (rdma_leave_multicast(id_, group_.get()) != 0) {
        log_destroy_failure(errno, "rdma_leave_multicast", group_.str());
      }
      joined_ = false;
    } else if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP && errno != ENODEV &&
               errno != EPROTONOSUPPORT) {
      throw_call_error(errno, "rdma_join_multicast_ex (send-only)", group_.str());
    }
    logger()->info("multicast {}: send-only membership refused on {}; joining as a full member",
                   group_.str(), device_name(id_->verbs));
  }
  check_minus1(rdma_join_multicast(id_, group_.get(), nullptr), "rdma_join_multicast",
               group_.str() + " on " + device_name(id_->verbs));
  joined_ = true;
  (void)wait_joined(channel, timeout, Kind::full);
}

bool Membership::wait_joined(EventChannel& channel, std::chrono::milliseconds timeout, Kind kind) {
  const std::string what = "join multicast group " + group_.str();
  CmEvent ev = channel.next(timeout, what);
  if (ev.type() == RDMA_CM_EVENT_MULTICAST_JOIN && ev.status() == 0) {
    const rdma_ud_param& ud = ev.get()->param.ud;
    ah_attr_ = ud.ah_attr;
    qpn_ = ud.qp_num;
    qkey_ = ud.qkey;
    return true;
  }
  if (kind == Kind::send_only && ev.type() == RDMA_CM_EVENT_MULTICAST_ERROR) return false;
  throw_unexpected(ev, RDMA_CM_EVENT_MULTICAST_JOIN, what);
}

Membership::~Membership() {
  if (joined_ && rdma_leave_multicast(id_, group_.get()) != 0) {
    log_destroy_failure(errno, "rdma_leave_multicast", group_.str());
  }
}

}  // namespace tickrail::rdma::ud
