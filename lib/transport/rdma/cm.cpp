#include "transport/rdma/cm.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "tickrail/error.hpp"
#include "transport/rdma/verbs.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma {
namespace {

int timeout_ms(std::chrono::milliseconds t) {
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(t.count(), 1 << 30));
}

}  // namespace

// --- Address ---

Address Address::parse(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0 || !res) {
    throw Error(Errc::not_found, "address '" + host + "': " + gai_strerror(rc));
  }
  Address a;
  std::memcpy(&a.storage_, res->ai_addr, std::min<std::size_t>(res->ai_addrlen, sizeof a.storage_));
  freeaddrinfo(res);
  return a;
}

std::uint16_t Address::port() const noexcept {
  const sockaddr* sa = get();
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  }
  return 0;
}

std::string Address::str() const { return str(get()); }

std::string Address::str(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa == nullptr) return "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    std::string s = "[";  // built by appends: GCC 12 -Wrestrict misfires on "[" + string
    s += buf;
    s += "]:";
    s += std::to_string(ntohs(in6->sin6_port));
    return s;
  }
  return "(address family " + std::to_string(sa->sa_family) + ")";
}

// --- CmEvent ---

CmEvent& CmEvent::operator=(CmEvent&& o) noexcept {
  if (this != &o) {
    if (ev_ != nullptr) rdma_ack_cm_event(ev_);
    ev_ = std::exchange(o.ev_, nullptr);
  }
  return *this;
}

CmEvent::~CmEvent() {
  if (ev_ != nullptr && rdma_ack_cm_event(ev_) != 0) {
    log_destroy_failure(errno, "rdma_ack_cm_event", rdma_event_str(ev_->event));
  }
}

std::span<const std::byte> CmEvent::private_data() const noexcept {
  const rdma_conn_param& conn = ev_->param.conn;
  if (conn.private_data == nullptr) return {};
  return {static_cast<const std::byte*>(conn.private_data), conn.private_data_len};
}

// --- EventChannel ---

EventChannel::EventChannel()
    : ch_(check_ptr(rdma_create_event_channel(), "rdma_create_event_channel",
                    "/dev/infiniband/rdma_cm")) {
  // Non-blocking: next() waits in poll() with a deadline, never in rdma_get_cm_event.
  const int flags = fcntl(ch_->fd, F_GETFL);
  if (flags < 0 || fcntl(ch_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int err = errno;
    reset();
    throw_call_error(err, "fcntl(O_NONBLOCK)", "rdma_cm event channel");
  }
}

EventChannel& EventChannel::operator=(EventChannel&& o) noexcept {
  if (this != &o) {
    reset();
    ch_ = std::exchange(o.ch_, nullptr);
  }
  return *this;
}

EventChannel::~EventChannel() { reset(); }

void EventChannel::reset() noexcept {
  if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
  ch_ = nullptr;
}

CmEvent EventChannel::next(std::chrono::milliseconds timeout, std::string_view what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch_, &ev) == 0) return CmEvent(ev);
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      throw_call_error(errno, "rdma_get_cm_event", "event channel, waiting for " + std::string(what));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      throw Error(Errc::timed_out, std::string(what) + ": no rdma_cm event within " +
                                       std::to_string(timeout.count()) + " ms");
    }
    pollfd pfd{ch_->fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms(left)) < 0 && errno != EINTR) {
      throw_call_error(errno, "poll", "rdma_cm event channel, waiting for " + std::string(what));
    }
  }
}

std::optional<CmEvent> EventChannel::try_next() {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch_, &ev) == 0) return CmEvent(ev);
  if (errno != EAGAIN && errno != EWOULDBLOCK) {
    throw_call_error(errno, "rdma_get_cm_event", "rdma_cm event channel");
  }
  return std::nullopt;
}

CmEvent EventChannel::expect(rdma_cm_event_type expected, std::chrono::milliseconds timeout,
                             std::string_view what) {
  CmEvent ev = next(timeout, what);
  if (ev.type() != expected || ev.status() != 0) throw_unexpected(ev, expected, what);
  return ev;
}

std::string reject_reason(int status) {
  // IB CM reject reasons (IBTA 12.6.7.2), which rdma_cm reports for RoCE and InfiniBand alike.
  switch (status) {
    case 1: return "no QP available on the peer (reason 1)";
    case 3: return "peer out of resources (reason 3)";
    case 4: return "peer timed out (reason 4)";
    case 5: return "request not supported by the peer (reason 5)";
    case 8: return "no listener on that address and port (reason 8: invalid service ID)";
    case 10: return "stale connection (reason 10)";
    case 28: return "refused by the peer application (reason 28: consumer defined)";
    default: return "reason " + std::to_string(status);
  }
}

void throw_unexpected(const CmEvent& ev, rdma_cm_event_type expected, std::string_view what) {
  std::string msg = std::string(what) + ": expected " + rdma_event_str(expected) + ", got " +
                    rdma_event_str(ev.type());
  const int status = ev.status();
  switch (ev.type()) {
    case RDMA_CM_EVENT_REJECTED:
      throw Error(Errc::rejected, msg + ": " + reject_reason(status));
    case RDMA_CM_EVENT_ADDR_ERROR:
      throw Error(Errc::not_found,
                  msg + " (status " + std::to_string(status) +
                      "): no RDMA device reaches that address (is rxe/RoCE set up on its "
                      "interface?)");
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      if (status == -ETIMEDOUT) throw Error(Errc::timed_out, msg + " (peer did not answer)");
      throw Error(Errc::peer_gone, msg + " (status " + std::to_string(status) + ")");
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      throw Error(Errc::peer_gone, msg);
    default:
      if (status != 0) {
        throw Error(std::error_code(status < 0 ? -status : status, std::generic_category()),
                    msg + " (status " + std::to_string(status) + ")");
      }
      throw Error(Errc::unsupported, msg);
  }
}

// --- CmId ---

CmId::CmId(EventChannel& channel, rdma_port_space ps, void* context) : id_(nullptr) {
  check_minus1(rdma_create_id(channel.get(), &id_, context, ps), "rdma_create_id",
               "rdma_cm event channel");
}

CmId& CmId::operator=(CmId&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = std::exchange(o.id_, nullptr);
  }
  return *this;
}

CmId::~CmId() { reset(); }

void CmId::reset() noexcept {
  if (id_ == nullptr) return;
  if (id_->qp != nullptr) rdma_destroy_qp(id_);
  if (rdma_destroy_id(id_) != 0) {
    const int err = errno;
    try {
      log_destroy_failure(err, "rdma_destroy_id", describe());
    } catch (...) {
    }
  }
  id_ = nullptr;
}

std::uint16_t CmId::local_port() const noexcept { return ntohs(rdma_get_src_port(id_)); }

std::string CmId::describe() const {
  std::string s = Address::str(rdma_get_local_addr(id_));
  const sockaddr* peer = rdma_get_peer_addr(id_);
  if (peer != nullptr && peer->sa_family != 0) s += " -> " + Address::str(peer);
  if (id_->verbs != nullptr) s += " on " + device_name(id_->verbs);
  return "rdma_cm id " + s;
}

void CmId::bind(const Address& addr) {
  check_minus1(rdma_bind_addr(id_, const_cast<sockaddr*>(addr.get())), "rdma_bind_addr",
               addr.str());
}

void CmId::listen(int backlog) { check_minus1(rdma_listen(id_, backlog), "rdma_listen", describe()); }

void CmId::resolve_addr(const Address* src, const Address& dst, std::chrono::milliseconds timeout) {
  check_minus1(rdma_resolve_addr(id_, src != nullptr ? const_cast<sockaddr*>(src->get()) : nullptr,
                                 const_cast<sockaddr*>(dst.get()), timeout_ms(timeout)),
               "rdma_resolve_addr", dst.str());
}

void CmId::resolve_route(std::chrono::milliseconds timeout) {
  check_minus1(rdma_resolve_route(id_, timeout_ms(timeout)), "rdma_resolve_route", describe());
}


void CmId::connect(rdma_conn_param& param) {
  check_minus1(rdma_connect(id_, &param), "rdma_connect", describe());
}

void CmId::accept(rdma_conn_param& param) {
  check_minus1(rdma_accept(id_, &param), "rdma_accept", describe());
}

void CmId::reject(std::span<const std::byte> private_data) {
  check_minus1(rdma_reject(id_, private_data.data(), static_cast<std::uint8_t>(private_data.size())),
               "rdma_reject", describe());
}

void CmId::disconnect() noexcept {
  if (id_ != nullptr && rdma_disconnect(id_) != 0) {
    const int err = errno;
    try {
      log_destroy_failure(err, "rdma_disconnect", describe());
    } catch (...) {
    }
  }
}

// --- CmQueuePair ---

CmQueuePair::CmQueuePair(CmId& id, ibv_pd* pd, ibv_qp_init_attr& attr) : id_(id.get()) {
  check_minus1(rdma_create_qp(id_, pd, &attr), "rdma_create_qp", id.describe());
}

CmQueuePair& CmQueuePair::operator=(CmQueuePair&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = std::exchange(o.id_, nullptr);
  }
  return *this;
}

CmQueuePair::~CmQueuePair() { reset(); }

void CmQueuePair::reset() noexcept {
  if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);  // sets id_->qp to NULL
  id_ = nullptr;
}

void resolve(CmId& id, EventChannel& channel, const Address& dst, std::chrono::milliseconds timeout,
             const Address* src) {
  id.resolve_addr(src, dst, timeout);
  // The event arrives within rdma_cm's own timeout; our wait adds a margin for slow hosts.
  const auto wait = timeout + std::chrono::milliseconds(1000);
  (void)channel.expect(RDMA_CM_EVENT_ADDR_RESOLVED, wait, "resolve address " + dst.str());
  id.resolve_route(timeout);
  (void)channel.expect(RDMA_CM_EVENT_ROUTE_RESOLVED, wait, "resolve route to " + dst.str());
}

}  // namespace tickrail::rdma
