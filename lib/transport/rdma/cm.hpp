// Owners of librdmacm objects and the connection steps built on them, every wait bounded.
//
// The classic flow, as in rdma-core's rdma_client/rdma_server and mckey:
//   active side:  EventChannel ch; CmId id(ch, RDMA_PS_TCP);
//                 resolve(id, ch, peer, timeout);         // ADDR_RESOLVED, ROUTE_RESOLVED
//                 CmQueuePair qp(id, pd.get(), attr); id.connect(param);
//                 CmEvent ev = ch.expect(RDMA_CM_EVENT_ESTABLISHED, timeout, "connect to ...");
//   passive side: CmId listener(ch, RDMA_PS_TCP); listener.bind(addr); listener.listen(1);
//                 CmEvent req = ch.expect(RDMA_CM_EVENT_CONNECT_REQUEST, ...);
//                 CmId conn = CmId::adopt(req.id());   // now owns the new id
//                 CmQueuePair qp(conn, ...); conn.accept(param); ch.expect(ESTABLISHED, ...)
// Declaration order = creation order, so that teardown runs QP, CQ, MR, PD, id, channel:
// EventChannel, CmId, ProtectionDomain, MemoryRegion, CompletionQueue, CmQueuePair. (The
// listener's device is known after bind(), so a server can make its PD before any request.) Everything here is control plane and throws
// tickrail::Error (errno conventions in verbs_error.hpp; unexpected events become
// Errc::rejected, Errc::not_found, Errc::peer_gone or Errc::timed_out with the event's name).
#pragma once

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace tickrail::rdma {

// An IPv4 or IPv6 socket address with its text form for messages.
class Address {
 public:
  // Numeric host ("10.77.0.1", "::1") or a name resolvable by getaddrinfo. Errc::not_found
  // when it does not resolve.
  [[nodiscard]] static Address parse(const std::string& host, std::uint16_t port);

  [[nodiscard]] sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&storage_); }
  [[nodiscard]] const sockaddr* get() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage_);
  }
  [[nodiscard]] std::uint16_t port() const noexcept;
  // "10.77.0.1:7471" / "[::1]:7471"
  [[nodiscard]] std::string str() const;
  // The text of any sockaddr.
  [[nodiscard]] static std::string str(const sockaddr* sa);

 private:
  sockaddr_storage storage_{};
};

// One rdma_cm event; acknowledged (rdma_ack_cm_event) when destroyed.
class CmEvent {
 public:
  explicit CmEvent(rdma_cm_event* ev) noexcept : ev_(ev) {}
  CmEvent(CmEvent&& o) noexcept : ev_(std::exchange(o.ev_, nullptr)) {}
  CmEvent& operator=(CmEvent&& o) noexcept;
  CmEvent(const CmEvent&) = delete;
  CmEvent& operator=(const CmEvent&) = delete;
  ~CmEvent();

  [[nodiscard]] rdma_cm_event_type type() const noexcept { return ev_->event; }
  [[nodiscard]] int status() const noexcept { return ev_->status; }
  [[nodiscard]] rdma_cm_id* id() const noexcept { return ev_->id; }
  [[nodiscard]] const rdma_cm_event* get() const noexcept { return ev_; }
  // The connection's private data (CONNECT_REQUEST, ESTABLISHED, REJECTED). For RC over IB CM
  // the transport may pad it: callers carry their own length inside.
  [[nodiscard]] std::span<const std::byte> private_data() const noexcept;

 private:
  rdma_cm_event* ev_;
};

class EventChannel {
 public:
  EventChannel();
  EventChannel(EventChannel&& o) noexcept : ch_(std::exchange(o.ch_, nullptr)) {}
  EventChannel& operator=(EventChannel&& o) noexcept;
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;
  ~EventChannel();

  [[nodiscard]] rdma_event_channel* get() const noexcept { return ch_; }
  [[nodiscard]] int fd() const noexcept { return ch_->fd; }

  // The next event, waiting up to `timeout` in poll() on the channel's fd. Errc::timed_out
  // naming `what` when nothing came.
  [[nodiscard]] CmEvent next(std::chrono::milliseconds timeout, std::string_view what);
  // The next event if one is queued, without waiting; nullopt when none is.
  [[nodiscard]] std::optional<CmEvent> try_next();
  // next() that must be of type `expected` with status 0; anything else throws, naming `what`,
  // the event received and its status (a REJECTED carries the reject reason in words).
  [[nodiscard]] CmEvent expect(rdma_cm_event_type expected, std::chrono::milliseconds timeout,
                               std::string_view what);

 private:
  void reset() noexcept;
  rdma_event_channel* ch_;
};

// Throws the Error an unexpected event stands for (see EventChannel::expect).
[[noreturn]] void throw_unexpected(const CmEvent& ev, rdma_cm_event_type expected,
                                   std::string_view what);

// An rdma_cm_id. Destroying it destroys the id (and, as a last resort, a QP still on it); it
// does not disconnect: call disconnect() first to tell the peer.
class CmId {
 public:
  CmId(EventChannel& channel, rdma_port_space ps, void* context = nullptr);
  // Takes ownership of an id that rdma_cm made (the id of a CONNECT_REQUEST event).
  [[nodiscard]] static CmId adopt(rdma_cm_id* id) noexcept { return CmId(id); }
  CmId(CmId&& o) noexcept : id_(std::exchange(o.id_, nullptr)) {}
  CmId& operator=(CmId&& o) noexcept;
  CmId(const CmId&) = delete;
  CmId& operator=(const CmId&) = delete;
  ~CmId();

  [[nodiscard]] rdma_cm_id* get() const noexcept { return id_; }
  // The device rdma_cm bound this id to (after bind or address resolution), owned by rdma_cm.
  [[nodiscard]] ibv_context* verbs() const noexcept { return id_->verbs; }
  [[nodiscard]] ibv_qp* qp() const noexcept { return id_->qp; }
  [[nodiscard]] std::uint16_t local_port() const noexcept;
  // "10.77.0.1:7471 -> 10.77.0.2:40123 on rxe0", for messages.
  [[nodiscard]] std::string describe() const;

  void bind(const Address& addr);
  void listen(int backlog);
  void resolve_addr(const Address* src, const Address& dst, std::chrono::milliseconds timeout);
  void resolve_route(std::chrono::milliseconds timeout);
  void connect(rdma_conn_param& param);
  void accept(rdma_conn_param& param);
  void reject(std::span<const std::byte> private_data);
  // Tells the peer; errors are logged, not thrown, since this is also a teardown step.
  void disconnect() noexcept;

 private:
  explicit CmId(rdma_cm_id* id) noexcept : id_(id) {}
  void reset() noexcept;
  rdma_cm_id* id_;
};

// The QP rdma_create_qp makes on a CmId (its state follows connect/accept by itself). An owner
// of its own, so that it can be declared after the PD and CQs it uses and be destroyed before
// them, as rc_pingpong orders teardown; the CmId must outlive it.
class CmQueuePair {
 public:
  CmQueuePair(CmId& id, ibv_pd* pd, ibv_qp_init_attr& attr);
  CmQueuePair(CmQueuePair&& o) noexcept : id_(std::exchange(o.id_, nullptr)) {}
  CmQueuePair& operator=(CmQueuePair&& o) noexcept;
  CmQueuePair(const CmQueuePair&) = delete;
  CmQueuePair& operator=(const CmQueuePair&) = delete;
  ~CmQueuePair();

  [[nodiscard]] ibv_qp* get() const noexcept { return id_->qp; }
  [[nodiscard]] std::uint32_t num() const noexcept { return id_->qp->qp_num; }

 private:
  void reset() noexcept;
  rdma_cm_id* id_;
};

// Active side: resolve_addr then resolve_route, waiting for each event (bounded by `timeout`
// each). Errc::not_found when no RDMA device reaches `dst`.
void resolve(CmId& id, EventChannel& channel, const Address& dst,
             std::chrono::milliseconds timeout, const Address* src = nullptr);

// The reason code of an IB CM reject in words ("no listener on that port" for 8, ...).
[[nodiscard]] std::string reject_reason(int status);

}  // namespace tickrail::rdma
