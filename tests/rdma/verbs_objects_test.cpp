// The verbs owners on a real device, without rdma_cm: two RC QPs connected by hand (as
// rc_pingpong does) exchange a SEND seen through a completion channel; a UD QP sends to itself
// through an AddressHandle; moved-from owners release nothing twice; bounded waits time out.
#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "transport/rdma/verbs.hpp"

using namespace tickrail;
using namespace tickrail::rdma;
using std::chrono::milliseconds;

namespace {

constexpr std::uint8_t kPort = 1;

// The GID index that carries the rig's IPv4 address (RoCE v2), as rdma_cm would pick.
int ipv4_gid_index(const Context& ctx, const std::string& addr, int table_len) {
  in_addr want{};
  REQUIRE(inet_pton(AF_INET, addr.c_str(), &want) == 1);
  for (int i = 0; i < table_len; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx.get(), kPort, i, &gid) != 0) continue;
    if (gid.raw[10] == 0xff && gid.raw[11] == 0xff && std::memcmp(gid.raw + 12, &want, 4) == 0) {
      return i;
    }
  }
  FAIL("no GID entry for " << addr);
  return -1;
}

ibv_ah_attr self_ah(const Context& ctx, int gid_index) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = ctx.query_gid(kPort, gid_index);
  ah.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
  ah.grh.hop_limit = 1;
  ah.port_num = kPort;
  return ah;
}

QueuePair make_qp(const ProtectionDomain& pd, const CompletionQueue& cq, ibv_qp_type type) {
  ibv_qp_init_attr attr{};
  attr.send_cq = cq.get();
  attr.recv_cq = cq.get();
  attr.qp_type = type;
  attr.cap.max_send_wr = 4;
  attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  return QueuePair(pd, attr);
}

void rc_connect(QueuePair& qp, std::uint32_t remote_qpn, const ibv_ah_attr& ah, ibv_mtu mtu) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = kPort;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  qp.modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "RESET->INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr = ah;
  qp.modify(a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "INIT->RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  qp.modify(a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                   IBV_QP_MAX_QP_RD_ATOMIC, "RTR->RTS");
}

void post_recv(QueuePair& qp, const MemoryRegion& mr, void* buf, std::uint32_t len) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), len, mr.lkey()};
  ibv_recv_wr wr{};
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  REQUIRE(qp.post_recv(wr, &bad) == 0);
}

}  // namespace

TEST_CASE("handConnectedRcQueuePairsDeliverASendThroughTheCompletionChannel") {
  Context ctx = Context::open(test::device());
  const std::string addr = test::address(ctx.name());
  const ibv_port_attr port = ctx.wait_port_active(kPort, std::chrono::seconds(30));
  const ibv_ah_attr ah = self_ah(ctx, ipv4_gid_index(ctx, addr, port.gid_tbl_len));

  // Declared in creation order: destroyed as rc_pingpong does (QP, CQ, MR, PD, channel).
  CompletionChannel channel(ctx);
  ProtectionDomain pd(ctx);
  std::array<char, 64> out{};
  std::array<char, 64> in{};
  std::strcpy(out.data(), "tickrail over a hand-made RC connection");
  MemoryRegion out_mr(pd, out.data(), out.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion in_mr(pd, in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
  CompletionQueue send_cq(ctx, 8);
  CompletionQueue recv_cq(ctx, 8, &channel);
  ibv_qp_init_attr attr{};
  attr.send_cq = send_cq.get();
  attr.recv_cq = recv_cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.cap = {4, 4, 1, 1, 0};
  QueuePair a(pd, attr);
  QueuePair b(pd, attr);
  rc_connect(a, b.num(), ah, port.active_mtu);
  rc_connect(b, a.num(), ah, port.active_mtu);
  REQUIRE(a.state() == IBV_QPS_RTS);
  REQUIRE(b.state() == IBV_QPS_RTS);

  post_recv(b, in_mr, in.data(), static_cast<std::uint32_t>(in.size()));
  recv_cq.request_notify();
  // Nothing sent yet: the bounded wait comes back empty.
  REQUIRE(channel.wait(milliseconds(50)) == nullptr);

  ibv_sge sge{reinterpret_cast<std::uintptr_t>(out.data()), static_cast<std::uint32_t>(out.size()),
              out_mr.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  REQUIRE(a.post_send(wr, &bad) == 0);

  REQUIRE(channel.wait(milliseconds(10000)) == recv_cq.get());
  const ibv_wc got = recv_cq.next(milliseconds(1000), "the SEND's receive");
  check_success(got, "receive");
  REQUIRE(got.opcode == IBV_WC_RECV);
  REQUIRE(got.byte_len == out.size());
  REQUIRE(std::string(in.data()) == out.data());
  check_success(send_cq.next(milliseconds(10000), "the SEND"), "send");
}

TEST_CASE("udQueuePairSendsToItselfThroughAnAddressHandle") {
  Context ctx = Context::open(test::device());
  const std::string addr = test::address(ctx.name());
  const ibv_port_attr port = ctx.wait_port_active(kPort, std::chrono::seconds(30));
  ibv_ah_attr ah_attr = self_ah(ctx, ipv4_gid_index(ctx, addr, port.gid_tbl_len));
  constexpr std::uint32_t kQkey = 0x11111111;

  ProtectionDomain pd(ctx);
  // A UD receive buffer starts with room for the 40-byte GRH.
  std::array<char, 40 + 64> in{};
  std::array<char, 64> out{};
  std::strcpy(out.data(), "one datagram");
  MemoryRegion in_mr(pd, in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion out_mr(pd, out.data(), out.size(), IBV_ACCESS_LOCAL_WRITE);
  CompletionQueue cq(ctx, 8);
  QueuePair qp = make_qp(pd, cq, IBV_QPT_UD);
  AddressHandle ah(pd, ah_attr);

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = kPort;
  a.qkey = kQkey;
  qp.modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "RESET->INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  qp.modify(a, IBV_QP_STATE, "INIT->RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  qp.modify(a, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTR->RTS");

  post_recv(qp, in_mr, in.data(), static_cast<std::uint32_t>(in.size()));
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(out.data()), static_cast<std::uint32_t>(out.size()),
              out_mr.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah.get();
  wr.wr.ud.remote_qpn = qp.num();
  wr.wr.ud.remote_qkey = kQkey;
  ibv_send_wr* bad = nullptr;
  REQUIRE(qp.post_send(wr, &bad) == 0);

  bool sent = false;
  bool received = false;
  while (!sent || !received) {
    const ibv_wc wc = cq.next(milliseconds(10000), "the datagram to self");
    check_success(wc, "UD work request");
    if (wc.opcode == IBV_WC_SEND) sent = true;
    if (wc.opcode == IBV_WC_RECV) {
      received = true;
      REQUIRE(wc.byte_len == 40 + out.size());
      REQUIRE((wc.wc_flags & IBV_WC_GRH) != 0);
      REQUIRE(wc.src_qp == qp.num());
      REQUIRE(std::string(in.data() + 40) == "one datagram");
    }
  }
}

TEST_CASE("movedFromOwnersReleaseNothingAndMoveAssignmentReleasesTheOld") {
  Context first = Context::open(test::device());
  Context ctx = std::move(first);
  REQUIRE(first.get() == nullptr);  // NOLINT(bugprone-use-after-move): the contract under test
  REQUIRE(ctx.name() == test::device());
  ProtectionDomain pd(ctx);
  ProtectionDomain other(std::move(pd));
  REQUIRE(pd.get() == nullptr);  // NOLINT(bugprone-use-after-move)
  REQUIRE(other.get() != nullptr);
  CompletionQueue cq1(ctx, 4);
  CompletionQueue cq2(ctx, 4);
  ibv_cq* second = cq2.get();
  cq1 = std::move(cq2);  // cq1's first CQ is destroyed here; a leak would show under ASan
  REQUIRE(cq1.get() == second);
  REQUIRE(cq2.get() == nullptr);  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("waitingForACompletionThatNeverComesTimesOutNamingIt") {
  Context ctx = Context::open(test::device());
  CompletionQueue cq(ctx, 4);
  try {
    (void)cq.next(milliseconds(20), "a completion nobody posted");
    FAIL("no timeout");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::timed_out);
    REQUIRE_THAT(e.what(), Catch::Matchers::Contains("a completion nobody posted") &&
                               Catch::Matchers::Contains(ctx.name()));
  }
}
