// Control plane of the UD publisher: configuration checks, group join, registered history and
// headers, prepared work requests, the recovery server, teardown.
#include "transport/rdma/ud/ud_publisher.hpp"

#include <arpa/inet.h>

#include <bit>
#include <random>
#include <thread>

#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "transport/rdma/ud/recovery_protocol.hpp"
#include "transport/rdma/ud/settings.hpp"
#include "transport/rdma/common/connection.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma::ud {
namespace {

// Resolves the group from the configured address; returns the device it is reached through.
ibv_context* resolve_group(CmId& id, EventChannel& ch, const PublisherConfig& c) {
  require_device(c.rdma.device, "ud");
  const Address group = parse_group(c.rdma.groups.front(), "rdma.groups[0]");
  const Address src = Address::parse(c.rdma.address, 0);
  try {
    id.resolve_addr(&src, group, c.rdma.connect_timeout);
    (void)ch.expect(RDMA_CM_EVENT_ADDR_RESOLVED, c.rdma.connect_timeout + std::chrono::seconds(1),
                    "resolve multicast group " + group.str() + " from " + src.str());
  } catch (const Error& e) {
    throw Error(e.code(), "UD publisher: rdma.address " + c.rdma.address + " (to send to " +
                              group.str() + "): " + e.what() +
                              " (is it the address of an RDMA device's netdev?)");
  }
  check_bound_device(id, c.rdma.device, "address " + c.rdma.address, Errc::invalid_argument);
  return id.verbs();
}

std::uint64_t random_session() {
  std::random_device rd;
  std::uint64_t s = 0;
  while (s == 0) s = (std::uint64_t{rd()} << 32) ^ rd();
  return s;
}

}  // namespace

UdPublisher::UdPublisher(const PublisherConfig& config, const detail::Placement& placement)
    : config_(validated(config)),
      mc_id_(mc_channel_, RDMA_PS_UDP),
      pd_(resolve_group(mc_id_, mc_channel_, config_)) {
  const RdmaConfig& r = config_.rdma;
  const Clock& clock = Clock::instance();  // calibrate now, not on the first publish
  const std::string where = "device " + device_name(mc_id_.verbs()) + " port " +
                            std::to_string(mc_id_.get()->port_num);
  mtu_ = active_mtu(mc_id_.get());
  tpd_ = checked_ticks_per_datagram(r.max_ticks_per_datagram, mtu_, where);
  size_send_queue();
  register_memory();
  create_queue_pair();
  const Address group = parse_group(r.groups.front(), "rdma.groups[0]");
  membership_ = std::make_unique<Membership>(mc_id_, mc_channel_, group,
                                             Membership::Kind::send_only, r.connect_timeout);
  ibv_ah_attr ah = membership_->ah_attr();
  ah_.emplace(pd_, ah);
  session_ = random_session();
  const Address listen = Address::parse(r.address, r.port);
  start_recovery_server(listen, placement);
  prepare_work_requests(listen);
  heartbeat_cycles_ = clock.ns_to_cycles(
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(r.heartbeat_interval).count()));
  batch_delay_cycles_ = clock.ns_to_cycles(static_cast<double>(r.batch_delay.count()));

  logger()->info(
      "UD publisher: session {:016x} to group {} from {} on {} (MTU {}, {} tick(s)/datagram, "
      "inline up to {} B, {} membership), history {} ticks, recovery on port {}",
      session_, group.str(), r.address, where, mtu_, tpd_, max_inline_,
      membership_->send_only() ? "send-only" : "full", r.history, server_->port());
}

void UdPublisher::size_send_queue() {
  const ibv_device_attr dev = query_device(mc_id_.verbs());
  signal_every_ = std::clamp<std::uint32_t>(config_.rdma.signal_every, 1, 1024);
  sq_depth_ = std::bit_ceil(std::max<std::uint32_t>(64, 2 * signal_every_));
  while (sq_depth_ > static_cast<std::uint32_t>(dev.max_qp_wr) && sq_depth_ > 2) sq_depth_ /= 2;
  if (signal_every_ > sq_depth_ / 2) signal_every_ = std::max<std::uint32_t>(1, sq_depth_ / 2);
}

// The history ring (read by recovering subscribers), one header per send queue slot, and the
// last-value table when [state] keeps one (read by subscribers over the same connection).
void UdPublisher::register_memory() {
  const std::uint64_t history = config_.rdma.history;
  // A history slot is rewritten `history` ticks later: by then every send that gathered it from
  // there must be complete, which the send queue depth bounds.
  const std::uint64_t min_history = std::uint64_t{4} * sq_depth_ * tpd_;
  if (history < min_history) {
    bad_setting("UD publisher", "history", std::to_string(history) + " ticks is less than the " +
                       std::to_string(min_history) + " that " + std::to_string(sq_depth_) +
                       " queued datagrams of " + std::to_string(tpd_) + " ticks may still gather");
  }
  history_mask_ = history - 1;
  const std::size_t history_bytes = std::size_t{history} * sizeof(Slot);
  history_mem_ = MappedRegion(history_bytes, /*huge_pages=*/true);
  history_mem_.prefault();
  history_mr_.emplace(pd_, history_mem_.data(), history_bytes,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  history_ = static_cast<Slot*>(history_mem_.data());

  const std::size_t header_bytes = std::size_t{sq_depth_} * sizeof(DatagramHeader);
  header_mem_ = MappedRegion(header_bytes);
  header_mem_.prefault();
  header_mr_.emplace(pd_, header_mem_.data(), header_bytes, IBV_ACCESS_LOCAL_WRITE);
  headers_ = static_cast<DatagramHeader*>(header_mem_.data());

  if (config_.state.enabled) {
    // Remote read, and nothing else: not even local write (our CPU writes it, not the NIC).
    table_ = TableRegion(config_.state, config_.lock_memory, "UD publisher '" + config_.channel + "'");
    table_mr_.emplace(pd_, table_.data(), table_.bytes(), IBV_ACCESS_REMOTE_READ);
  }
}

void UdPublisher::create_queue_pair() {
  send_cq_.emplace(mc_id_.verbs(), static_cast<int>(sq_depth_));
  // Inline the largest datagram the device takes inline (rxe: 512 bytes); the work request
  // then carries the bytes and the NIC reads no memory for them.
  const auto want_inline = static_cast<std::uint32_t>(std::min<std::size_t>(datagram_bytes(tpd_), 1024));
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_UD;
  a.send_cq = send_cq_->get();
  a.recv_cq = send_cq_->get();
  a.cap.max_send_wr = sq_depth_;
  a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = 3;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = want_inline;
  a.sq_sig_all = 0;
  qp_.emplace(create_qp(mc_id_, pd_.get(), a, kHeaderBytes));
  max_inline_ = a.cap.max_inline_data;
}

void UdPublisher::start_recovery_server(const Address& listen, const detail::Placement& placement) {
  const RdmaConfig& r = config_.rdma;
  RecoveryServer::Params sp;
  sp.listen = listen;
  sp.token = r.token;
  sp.max_connections = 256;
  sp.device = r.device;
  sp.placement = placement;
  sp.grant.magic = kRecoveryMagic;
  sp.grant.version = kVersion;
  sp.grant.session = session_;
  sp.grant.history_addr = reinterpret_cast<std::uintptr_t>(history_mem_.data());
  sp.grant.capacity = r.history;
  sp.grant.rkey = history_mr_->rkey();
  if (table_mr_) {
    sp.grant.table_addr = reinterpret_cast<std::uintptr_t>(table_.data());
    sp.grant.table_rkey = table_mr_->rkey();
    sp.grant.table_capacity = table_.geometry().capacity;
    sp.grant.table_classes = table_.geometry().classes;
  }
  server_ = std::make_unique<RecoveryServer>(sp, pd_);
}

// Every header and work request is prepared once; a post writes only kind, first_seq, count,
// send_ts and the gather list's history entries.
void UdPublisher::prepare_work_requests(const Address& listen) {
  DatagramHeader tmpl{};
  tmpl.magic = kMagic;
  tmpl.version = kVersion;
  tmpl.session = session_;
  tmpl.recovery_port = server_->port();
  tmpl.history = config_.rdma.history;
  const sockaddr* sa = listen.get();
  if (sa->sa_family == AF_INET) {
    tmpl.recovery_family = 4;
    std::memcpy(tmpl.recovery_addr, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    tmpl.recovery_family = 6;
    std::memcpy(tmpl.recovery_addr, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  }
  wrs_ = std::make_unique<ibv_send_wr[]>(sq_depth_);
  sges_ = std::make_unique<ibv_sge[]>(std::size_t{sq_depth_} * 3);
  for (std::uint32_t i = 0; i < sq_depth_; ++i) {
    headers_[i] = tmpl;
    ibv_sge* s = &sges_[std::size_t{i} * 3];
    s[0].addr = reinterpret_cast<std::uintptr_t>(&headers_[i]);
    s[0].length = static_cast<std::uint32_t>(kHeaderBytes);
    s[0].lkey = header_mr_->lkey();
    s[1].lkey = s[2].lkey = history_mr_->lkey();
    ibv_send_wr& w = wrs_[i];
    w.sg_list = s;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.wr.ud.ah = ah_->get();
    w.wr.ud.remote_qpn = membership_->remote_qpn();
    w.wr.ud.remote_qkey = membership_->qkey();
  }
}

UdPublisher::~UdPublisher() {
  close();
  if (qp_ && !end_sent_ && !qp_failed_) {
    send_end();
    // Let the end datagram leave before the QP is destroyed (bounded).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (retired_ < posted_ && !qp_failed_ && std::chrono::steady_clock::now() < deadline) {
      reap();
      std::this_thread::yield();
    }
  }
}

void UdPublisher::close() noexcept {
  if (closing_.exchange(true)) return;
  if (server_) server_->stop();
}

std::vector<SubscriberStatus> UdPublisher::subscribers() const {
  return server_ ? server_->status() : std::vector<SubscriberStatus>{};
}

}  // namespace tickrail::rdma::ud
