#include "transport/rdma/ud/recovery_server.hpp"

#include <poll.h>

#include <algorithm>

#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "transport/rdma/ud/datagram.hpp"
#include "transport/rdma/ud/multicast.hpp"
#include "transport/rdma/common/connection.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma::ud {
namespace {

CmId bound_listener(EventChannel& ch, const RecoveryServer::Params& p) {
  CmId id(ch, RDMA_PS_TCP);
  id.bind(p.listen);
  check_bound_device(id, p.device, "UD recovery address " + p.listen.str() + " (rdma.address)",
                     Errc::invalid_argument);
  id.listen(16);
  return id;
}

}  // namespace

RecoveryServer::RecoveryServer(const Params& p, const ProtectionDomain& pd)
    : params_(p),
      pd_(pd.get()),
      listener_(bound_listener(channel_, p)),
      cq_(listener_.verbs(), 4) {
  if (listener_.verbs() != pd_->context) {
    throw Error(Errc::invalid_argument,
                "UD recovery listener " + p.listen.str() + " is on device " +
                    device_name(listener_.verbs()) + ", the multicast QP on " +
                    device_name(pd_->context) + ": use one address on one device");
  }
  port_ = listener_.local_port();
  const ibv_device_attr dev = query_device(listener_.verbs());
  responder_resources_ = static_cast<std::uint8_t>(std::clamp(dev.max_qp_rd_atom, 1, 16));
  thread_ = detail::start_thread("tr-ud-recov", p.placement, [this](std::stop_token st) { run(st); });
}

RecoveryServer::~RecoveryServer() { stop(); }

void RecoveryServer::stop() noexcept {
  if (stopped_.exchange(true)) return;
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  for (auto& c : conns_) c->id.disconnect();
  conns_.clear();
  established_.store(0, std::memory_order_relaxed);
}

void RecoveryServer::run(std::stop_token st) {
  while (!st.stop_requested()) {
    pollfd pfd{channel_.fd(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 20);  // bounded: a stop request is seen within 20 ms
    wakeups_.tick();
    if (ready <= 0) continue;
    try {
      std::vector<rdma_cm_id*> dead;
      {
        CmEvent ev = channel_.next(std::chrono::milliseconds(100), "UD recovery listener");
        handle(ev, dead);
      }  // acknowledged: only then may its id be destroyed
      if (!dead.empty()) {
        std::lock_guard lock(mutex_);
        for (rdma_cm_id* id : dead) {
          auto it = std::find_if(conns_.begin(), conns_.end(),
                                 [id](const auto& c) { return c->id.get() == id; });
          if (it == conns_.end()) continue;
          if ((*it)->established) established_.fetch_sub(1, std::memory_order_relaxed);
          logger()->info("UD publisher: recovery connection from {} closed", (*it)->peer);
          conns_.erase(it);
        }
      }
    } catch (const std::exception& e) {
      logger()->warn("UD publisher: recovery listener {}: {}", params_.listen.str(), e.what());
    }
  }
}

void RecoveryServer::handle(CmEvent& ev, std::vector<rdma_cm_id*>& dead) {
  switch (ev.type()) {
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      on_request(ev);
      break;
    case RDMA_CM_EVENT_ESTABLISHED: {
      std::lock_guard lock(mutex_);
      for (auto& c : conns_) {
        if (c->id.get() == ev.id() && !c->established) {
          c->established = true;
          established_.fetch_add(1, std::memory_order_relaxed);
          logger()->info("UD publisher: recovery connection from {} established", c->peer);
        }
      }
      break;
    }
    case RDMA_CM_EVENT_DISCONNECTED:
      if (ev.id() != nullptr) rdma_disconnect(ev.id());  // completes the handshake; may fail
      dead.push_back(ev.id());
      break;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      dead.push_back(ev.id());
      break;
    default:
      break;
  }
}

void RecoveryServer::refuse(CmId& id, const std::string& peer, const std::string& why) {
  logger()->warn("UD publisher: recovery connection from {} refused: {}", peer, why);
  const std::string msg = why.substr(0, 140);
  id.reject(std::as_bytes(std::span(msg.data(), msg.size())));
}

void RecoveryServer::on_request(CmEvent& ev) {
  CmId id = CmId::adopt(ev.id());
  const std::string peer = Address::str(rdma_get_peer_addr(id.get()));
  const auto req = read_message<RecoveryRequest>(ev.private_data());
  if (!req || req->magic != kRecoveryMagic) {
    refuse(id, peer, "not a tickrail UD recovery request");
    return;
  }
  if (req->version != kVersion) {
    refuse(id, peer, "protocol version " + std::to_string(req->version) + ", publisher speaks " +
                         std::to_string(kVersion));
    return;
  }
  if (!token_matches(*req, params_.token)) {
    refuse(id, peer, "wrong access token");
    return;
  }
  if (req->session != 0 && req->session != params_.grant.session) {
    refuse(id, peer, "unknown session (the publisher restarted?)");
    return;
  }
  if (id.verbs() != pd_->context) {
    refuse(id, peer, "request arrived on another device");
    return;
  }
  {
    std::lock_guard lock(mutex_);
    if (conns_.size() >= params_.max_connections) {
      refuse(id, peer, "too many recovery connections (" + std::to_string(conns_.size()) + ")");
      return;
    }
  }
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.send_cq = cq_.get();
  a.recv_cq = cq_.get();
  a.cap.max_send_wr = 1;
  a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  CmQueuePair qp(id, pd_, a);
  RecoveryGrant grant = params_.grant;
  rdma_conn_param param = connection_param(
      std::as_bytes(std::span(&grant, 1)),
      std::max<std::uint8_t>(1, std::min<std::uint8_t>(ev.get()->param.conn.initiator_depth,
                                                       responder_resources_)),
      0);  // the publisher reads nothing
  id.accept(param);
  auto conn = std::make_unique<Conn>(Conn{std::move(id), std::move(qp), peer, false});
  std::lock_guard lock(mutex_);
  conns_.push_back(std::move(conn));
}

std::vector<SubscriberStatus> RecoveryServer::status() const {
  std::vector<SubscriberStatus> out;
  std::lock_guard lock(mutex_);
  std::uint32_t i = 0;
  for (const auto& c : conns_) {
    SubscriberStatus s;
    s.slot = i++;
    s.peer = c->peer;
    // The connection, not the subscriber: it may read nothing for as long as nothing is lost.
    s.state = c->established ? "connected for recovery" : "connecting for recovery";
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tickrail::rdma::ud
