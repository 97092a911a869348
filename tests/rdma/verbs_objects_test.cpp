// The verbs owners on a real device, with QPs made on rdma_cm ids as the transports make them:
// an RC connection (create_qp with its inline request, connection_param) carries a SEND from a
// registered buffer and an inline one; a UD QP sends to itself through an AddressHandle;
// moved-from owners release nothing twice; bounded waits time out.
#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/common/connection.hpp"
#include "transport/rdma/verbs.hpp"

using namespace tickrail;
using namespace tickrail::rdma;
using std::chrono::milliseconds;

namespace {

// The GID index that carries the rig's IPv4 address (RoCE v2), as rdma_cm would pick.
int ipv4_gid_index(ibv_context* ctx, std::uint8_t port, const std::string& addr) {
  in_addr want{};
  REQUIRE(inet_pton(AF_INET, addr.c_str(), &want) == 1);
  ibv_port_attr pa{};
  REQUIRE(ibv_query_port(ctx, port, &pa) == 0);
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx, port, i, &gid) != 0) continue;
    if (gid.raw[10] == 0xff && gid.raw[11] == 0xff && std::memcmp(gid.raw + 12, &want, 4) == 0) {
      return i;
    }
  }
  FAIL("no GID entry for " << addr);
  return -1;
}

ibv_qp_init_attr qp_attr(const CompletionQueue& send_cq, const CompletionQueue& recv_cq,
                         ibv_qp_type type) {
  ibv_qp_init_attr attr{};
  attr.send_cq = send_cq.get();
  attr.recv_cq = recv_cq.get();
  attr.qp_type = type;
  attr.cap.max_send_wr = 4;
  attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  return attr;
}

void post_recv(ibv_qp* qp, const MemoryRegion& mr, void* buf, std::uint32_t len) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), len, mr.lkey()};
  ibv_recv_wr wr{};
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  REQUIRE(ibv_post_recv(qp, &wr, &bad) == 0);
}

void post_send(ibv_qp* qp, const MemoryRegion& mr, const char* text, unsigned flags) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(text),
              static_cast<std::uint32_t>(std::strlen(text) + 1), mr.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | flags;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
}

}  // namespace

TEST_CASE("rdmaCmConnectionWithInlineRequestDeliversSends") {
  const std::string addr = test::address(test::device());
  // Declared in creation order on each side: destroyed as rc_pingpong does (QP, CQ, MR, PD),
  // then the ids and their channels.
  EventChannel server_ch;
  CmId listener(server_ch, RDMA_PS_TCP);
  listener.bind(Address::parse(addr, 0));
  listener.listen(1);
  const Address dst = Address::parse(addr, listener.local_port());

  EventChannel client_ch;
  CmId client(client_ch, RDMA_PS_TCP);
  resolve(client, client_ch, dst, milliseconds(5000));
  ProtectionDomain client_pd(client.verbs());
  std::array<char, 64> out{};
  MemoryRegion out_mr(client_pd, out.data(), out.size(), IBV_ACCESS_LOCAL_WRITE);
  CompletionQueue client_cq(client.verbs(), 8);
  ibv_qp_init_attr client_attr = qp_attr(client_cq, client_cq, IBV_QPT_RC);
  client_attr.cap.max_inline_data = 64;
  CmQueuePair client_qp = create_qp(client, client_pd.get(), client_attr, 64);
  const std::uint32_t inline_bytes = client_attr.cap.max_inline_data;
  // Granted as asked, or none at all (min_inline = what was asked: no halving).
  REQUIRE((inline_bytes >= 64 || inline_bytes == 0));
  rdma_conn_param connect_param = connection_param({}, 1, 1);
  client.connect(connect_param);

  rdma_cm_id* raw = nullptr;
  {
    CmEvent req = server_ch.expect(RDMA_CM_EVENT_CONNECT_REQUEST, milliseconds(20000),
                                   "connect request from " + client.describe());
    raw = req.id();
  }  // acknowledged before its id is adopted: rdma_destroy_id waits for that
  CmId conn = CmId::adopt(raw);
  ProtectionDomain server_pd(conn.verbs());
  std::array<char, 64> in{};
  MemoryRegion in_mr(server_pd, in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
  CompletionQueue send_cq(conn.verbs(), 8);
  CompletionQueue recv_cq(conn.verbs(), 8);
  ibv_qp_init_attr server_attr = qp_attr(send_cq, recv_cq, IBV_QPT_RC);
  CmQueuePair server_qp = create_qp(conn, server_pd.get(), server_attr, 0);
  post_recv(server_qp.get(), in_mr, in.data(), static_cast<std::uint32_t>(in.size()));
  post_recv(server_qp.get(), in_mr, in.data(), static_cast<std::uint32_t>(in.size()));
  rdma_conn_param accept_param = connection_param({}, 1, 1);
  conn.accept(accept_param);
  (void)client_ch.expect(RDMA_CM_EVENT_ESTABLISHED, milliseconds(20000), "client established");
  (void)server_ch.expect(RDMA_CM_EVENT_ESTABLISHED, milliseconds(20000), "server established");

  std::strcpy(out.data(), "tickrail over an rdma_cm RC connection");
  post_send(client_qp.get(), out_mr, out.data(), 0);
  check_success(client_cq.next(milliseconds(10000), "the SEND"), "send");
  ibv_wc got = recv_cq.next(milliseconds(10000), "the SEND's receive");
  check_success(got, "receive");
  REQUIRE(got.opcode == IBV_WC_RECV);
  REQUIRE(got.byte_len == std::strlen(out.data()) + 1);
  REQUIRE(std::string(in.data()) == out.data());

  if (inline_bytes != 0) {
    // Inline: the bytes travel in the work request, so the buffer may change once posted.
    char text[] = "inline";
    post_send(client_qp.get(), out_mr, text, IBV_SEND_INLINE);
    std::strcpy(text, "XXXXXX");
    check_success(client_cq.next(milliseconds(10000), "the inline SEND"), "inline send");
    got = recv_cq.next(milliseconds(10000), "the inline SEND's receive");
    check_success(got, "inline receive");
    REQUIRE(std::string(in.data()) == "inline");
  }
  client.disconnect();
}

TEST_CASE("udQueuePairSendsToItselfThroughAnAddressHandle") {
  const std::string addr = test::address(test::device());
  EventChannel ch;
  CmId id(ch, RDMA_PS_UDP);
  id.bind(Address::parse(addr, 0));
  REQUIRE(id.verbs() != nullptr);
  const std::uint8_t port = id.get()->port_num;
  ibv_ah_attr ah_attr{};
  ah_attr.is_global = 1;
  const int gid_index = ipv4_gid_index(id.verbs(), port, addr);
  REQUIRE(ibv_query_gid(id.verbs(), port, gid_index, &ah_attr.grh.dgid) == 0);
  ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
  ah_attr.grh.hop_limit = 1;
  ah_attr.port_num = port;

  ProtectionDomain pd(id.verbs());
  // A UD receive buffer starts with room for the 40-byte GRH.
  std::array<char, 40 + 64> in{};
  std::array<char, 64> out{};
  std::strcpy(out.data(), "one datagram");
  MemoryRegion in_mr(pd, in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion out_mr(pd, out.data(), out.size(), IBV_ACCESS_LOCAL_WRITE);
  CompletionQueue cq(id.verbs(), 8);
  ibv_qp_init_attr attr = qp_attr(cq, cq, IBV_QPT_UD);
  CmQueuePair qp(id, pd.get(), attr);  // rdma_cm takes a UD QP to RTS with its own qkey
  AddressHandle ah(pd, ah_attr);

  post_recv(qp.get(), in_mr, in.data(), static_cast<std::uint32_t>(in.size()));
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
  wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(qp.get(), &wr, &bad) == 0);

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
