#include "transport/rdma/ud/recovery_link.hpp"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "transport/rdma/ud/datagram.hpp"
#include "transport/rdma/ud/multicast.hpp"
#include "transport/rdma/common/connection.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma::ud {
namespace {

CmId resolved(EventChannel& ch, const RecoveryLink::Params& p) {
  CmId id(ch, RDMA_PS_TCP);
  resolve(id, ch, p.publisher, p.timeout);
  check_bound_device(id, p.device, "publisher " + p.publisher.str(), Errc::invalid_argument);
  return id;
}

CmQueuePair rc_qp(CmId& id, const ProtectionDomain& pd, const CompletionQueue& cq, bool table) {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.send_cq = cq.get();
  a.recv_cq = cq.get();
  // One history read of at most two work requests (history wrap), and the table's READs.
  a.cap.max_send_wr = 4 + (table ? TableReader::kMaxReads + 1 : 0);
  a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.sq_sig_all = 0;
  return CmQueuePair(id, pd.get(), a);
}

std::size_t staging_bytes(std::uint32_t ticks) { return std::size_t{ticks} * kTickBytes; }

}  // namespace

RecoveryLink::RecoveryLink(const Params& p)
    : id_(resolved(channel_, p)),
      pd_(id_.verbs()),
      staging_mem_(staging_bytes(p.staging_ticks)),
      staging_mr_(pd_, staging_mem_.data(), staging_bytes(p.staging_ticks), IBV_ACCESS_LOCAL_WRITE),
      cq_(id_.verbs(), p.want_table ? 8 + static_cast<int>(TableReader::kMaxReads) + 1 : 8),
      qp_(rc_qp(id_, pd_, cq_, p.want_table)),
      staging_(static_cast<Tick*>(staging_mem_.data())),
      staging_ticks_(p.staging_ticks) {
  if (p.token.size() > kMaxTokenBytes) {
    throw Error(Errc::invalid_argument, "rdma.token is " + std::to_string(p.token.size()) +
                                            " bytes; at most " + std::to_string(kMaxTokenBytes));
  }
  RecoveryRequest req{};
  req.magic = kRecoveryMagic;
  req.version = kVersion;
  req.token_len = static_cast<std::uint16_t>(p.token.size());
  req.session = p.session;
  std::memcpy(req.token, p.token.data(), p.token.size());

  const ibv_device_attr dev = query_device(id_.verbs());
  // Retransmit a lost read response after ~67 ms (4.096 us * 2^14) rather than rdma_cm's RoCE
  // default of about half a second: recovery runs exactly when the network is losing packets.
  std::uint8_t ack_timeout = 14;
  if (rdma_set_option(id_.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                      sizeof ack_timeout) != 0) {
    logger()->debug("recovery link {}: rdma_set_option(ACK_TIMEOUT): {}", id_.describe(),
                    std::strerror(errno));
  }
  rdma_conn_param param = connection_param(
      std::as_bytes(std::span(&req, 1)), 0,
      static_cast<std::uint8_t>(std::clamp(dev.max_qp_init_rd_atom, 1, 16)));
  id_.connect(param);
  const std::string what = "recovery connection to publisher " + p.publisher.str();
  CmEvent ev = channel_.expect(RDMA_CM_EVENT_ESTABLISHED, p.timeout, what);
  const auto g = read_message<RecoveryGrant>(ev.private_data());
  if (!g || g->magic != kRecoveryMagic) {
    throw Error(Errc::bad_magic, what + ": the peer is not a tickrail UD publisher (no grant)");
  }
  if (g->version != kVersion) {
    throw Error(Errc::version_mismatch, what + ": protocol version " + std::to_string(g->version) +
                                            ", this subscriber speaks " + std::to_string(kVersion));
  }
  if (p.session != 0 && g->session != p.session) {
    throw Error(Errc::rejected, what + ": it serves another session");
  }
  if (g->capacity < 2 || (g->capacity & (g->capacity - 1)) != 0) {
    throw Error(Errc::geometry_mismatch,
                what + ": history of " + std::to_string(g->capacity) + " ticks is not a power of two");
  }
  if (p.want_table && (g->table_addr != 0 || g->table_capacity != 0 || g->table_classes != 0)) {
    std::string why;
    table_ = granted_table(g->table_addr, g->table_capacity, g->table_classes, why);
    if (!table_) throw Error(Errc::geometry_mismatch, what + ": the grant offers " + why);
  }
  grant_ = *g;
  sq_.cq = cq_.get();
  if (p.want_table && table_) {
    table_buffer_ = MappedRegion(TableReader::kBufferBytes);
    table_buffer_.prefault();
    table_buffer_mr_.emplace(pd_, table_buffer_.data(), TableReader::kBufferBytes, IBV_ACCESS_LOCAL_WRITE);
    table_reader_ = std::make_unique<TableReader>(qp_.get(), sq_, grant_.table_addr, grant_.table_rkey,
                                                  table_buffer_.data(), table_buffer_mr_->lkey());
  }

  for (auto& w : wr_) {
    w.opcode = IBV_WR_RDMA_READ;
    w.num_sge = 1;
    w.wr.rdma.rkey = grant_.rkey;
  }
  wr_[0].sg_list = &sge_[0];
  wr_[1].sg_list = &sge_[1];
  sge_[0].lkey = sge_[1].lkey = staging_mr_.lkey();
}

RecoveryLink::~RecoveryLink() { id_.disconnect(); }

int RecoveryLink::post_read(std::uint64_t lo, std::uint32_t n) noexcept {
  const std::uint64_t mask = grant_.capacity - 1;
  const std::uint64_t first_slot = lo & mask;
  // Two reads when the range wraps around the end of the history ring.
  const auto first_len = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, grant_.capacity - first_slot));
  const auto base = reinterpret_cast<std::uintptr_t>(staging_);
  sge_[0].addr = base;
  sge_[0].length = first_len * static_cast<std::uint32_t>(kTickBytes);
  wr_[0].wr.rdma.remote_addr = grant_.history_addr + first_slot * kTickBytes;
  ibv_send_wr* head = &wr_[0];
  if (first_len < n) {
    sge_[1].addr = base + std::uint64_t{first_len} * kTickBytes;
    sge_[1].length = (n - first_len) * static_cast<std::uint32_t>(kTickBytes);
    wr_[1].wr.rdma.remote_addr = grant_.history_addr;
    wr_[0].next = &wr_[1];
    wr_[0].send_flags = 0;  // RC completes in order: the last one's completion covers both
    wr_[1].send_flags = IBV_SEND_SIGNALED;
    wr_[1].next = nullptr;
    wr_[1].wr_id = history_posted_ + 1;
  } else {
    wr_[0].next = nullptr;
    wr_[0].send_flags = IBV_SEND_SIGNALED;
    wr_[0].wr_id = history_posted_ + 1;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_.get(), head, &bad);
  if (rc == 0) ++history_posted_;
  return rc;
}

int RecoveryLink::poll() noexcept {
  sq_.reap();  // (the table's READ completions too, when a table delivery is under way)
  if (sq_.failed) return -1;
  return sq_.others >= history_posted_ ? 1 : 0;
}

ibv_wc_status RecoveryLink::probe_table(bool write, std::uint64_t offset, Tick& out) {
  if (!table_) return IBV_WC_GENERAL_ERR;
  // Tagged as a table READ numbered 0: should SendCompletions ever reap it, it changes nothing.
  const ibv_wc_status s = rdma::probe_table(qp_.get(), cq_.get(), staging_, staging_mr_.lkey(), write,
                                            grant_.table_addr + offset, grant_.table_rkey, SendCompletions::kReadTag);
  if (s == IBV_WC_SUCCESS && !write) std::memcpy(&out, staging_, sizeof out);
  return s;
}

void RecoveryLink::check_events() {
  for (;;) {
    pollfd pfd{channel_.fd(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) return;
    CmEvent ev = channel_.next(std::chrono::milliseconds(100), "recovery connection events");
    switch (ev.type()) {
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
      case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        disconnected_.store(true, std::memory_order_release);
        break;
      default:
        break;
    }
  }
}

}  // namespace tickrail::rdma::ud
