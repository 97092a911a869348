// The rdma_cm owners on a real device: error paths read as words, and a multicast join
// (ud::Membership, as the UD transport joins) delivers what a UD sender needs.
#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include <string>

#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/ud/multicast.hpp"
#include "transport/rdma/verbs.hpp"

using namespace tickrail;
using namespace tickrail::rdma;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;

namespace {

ibv_qp_init_attr qp_attr(ibv_cq* cq, ibv_qp_type type) {
  ibv_qp_init_attr a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = type;
  a.cap = {4, 4, 1, 1, 0};
  return a;
}

}  // namespace

TEST_CASE("connectingToAPortWithoutListenerIsRejectedNamingTheReason") {
  const std::string addr = test::address(test::device());
  EventChannel ch;
  // A port nobody listens on: bind a listener to get a free one, then close it.
  std::uint16_t port = 0;
  {
    CmId probe(ch, RDMA_PS_TCP);
    probe.bind(Address::parse(addr, 0));
    probe.listen(1);
    port = probe.local_port();
  }
  const Address dst = Address::parse(addr, port);
  CmId id(ch, RDMA_PS_TCP);
  resolve(id, ch, dst, milliseconds(5000));
  ProtectionDomain pd(id.verbs());
  CompletionQueue cq(id.verbs(), 8);
  ibv_qp_init_attr attr = qp_attr(cq.get(), IBV_QPT_RC);
  CmQueuePair qp(id, pd.get(), attr);
  rdma_conn_param param{};
  param.retry_count = 1;
  id.connect(param);
  try {
    (void)ch.expect(RDMA_CM_EVENT_ESTABLISHED, milliseconds(20000), "connect to " + dst.str());
    FAIL("connected to a port with no listener");
  } catch (const Error& e) {
    INFO(e.what());
    REQUIRE(e.code() == Errc::rejected);
    REQUIRE_THAT(e.what(), Contains("connect to " + dst.str()) && Contains("REJECTED") &&
                               Contains("no listener"));
  }
}

TEST_CASE("resolvingAnAddressNoDeviceReachesFailsNamingIt") {
  (void)test::device();
  EventChannel ch;
  CmId id(ch, RDMA_PS_TCP);
  // TEST-NET-3 (RFC 5737): never routed to an RDMA device here.
  const Address dst = Address::parse("203.0.113.7", 7471);
  try {
    resolve(id, ch, dst, milliseconds(2000));
    FAIL("resolved " << dst.str());
  } catch (const Error& e) {
    INFO(e.what());
    REQUIRE_THAT(e.what(), Contains("203.0.113.7:7471"));
  }
}

TEST_CASE("multicastJoinDeliversAddressHandleQpnAndQkeyThenLeaves") {
  const std::string addr = test::address(test::device());
  EventChannel ch;
  CmId id(ch, RDMA_PS_UDP);
  id.bind(Address::parse(addr, 0));
  REQUIRE(id.verbs() != nullptr);
  ProtectionDomain pd(id.verbs());
  CompletionQueue cq(id.verbs(), 8);
  ibv_qp_init_attr attr = qp_attr(cq.get(), IBV_QPT_UD);
  CmQueuePair qp(id, pd.get(), attr);
  const Address group = Address::parse("239.77.1.1", 0);
  {
    ud::Membership member(id, ch, group, ud::Membership::Kind::full, milliseconds(10000));
    REQUIRE_FALSE(member.send_only());
    REQUIRE(member.remote_qpn() == 0xFFFFFF);  // the multicast QPN
    REQUIRE(member.qkey() != 0);
    REQUIRE(member.ah_attr().is_global == 1);
    ibv_ah_attr ah_attr = member.ah_attr();
    AddressHandle ah(pd, ah_attr);
    REQUIRE(ah.get() != nullptr);
  }  // left here, before the QP goes
  // Joining again after leaving works: the membership really was given back.
  ud::Membership again(id, ch, group, ud::Membership::Kind::full, milliseconds(10000));
  REQUIRE(again.remote_qpn() == 0xFFFFFF);
}

TEST_CASE("aSendOnlyJoinIsGrantedOrFallsBackToAFullOne") {
  const std::string addr = test::address(test::device());
  EventChannel ch;
  CmId id(ch, RDMA_PS_UDP);
  id.bind(Address::parse(addr, 0));
  ProtectionDomain pd(id.verbs());
  CompletionQueue cq(id.verbs(), 8);
  ibv_qp_init_attr attr = qp_attr(cq.get(), IBV_QPT_UD);
  CmQueuePair qp(id, pd.get(), attr);
  ud::Membership member(id, ch, Address::parse("239.77.1.2", 0), ud::Membership::Kind::send_only,
                        milliseconds(10000));
  // Either way the sender has what it needs.
  INFO("send-only granted: " << member.send_only());
  REQUIRE(member.remote_qpn() == 0xFFFFFF);
  REQUIRE(member.qkey() != 0);
  REQUIRE(member.ah_attr().is_global == 1);
}
