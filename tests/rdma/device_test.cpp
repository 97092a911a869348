// (a) The rig is real: a verbs device is found through libibverbs and its port is ACTIVE.
#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include <cstring>
#include <iostream>

#include "rig_env.hpp"
#include "transport/rdma/verbs.hpp"

using namespace tickrail::rdma;

TEST_CASE("deviceIsFoundThroughLibibverbsWithItsPortActive") {
  const std::string dev = test::device();  // fails with "no RDMA device: run scripts/rig"
  Context ctx = Context::open(dev);
  REQUIRE(ctx.name() == dev);

  const ibv_port_attr port = ctx.wait_port_active(1, std::chrono::seconds(30));
  REQUIRE(port.state == IBV_PORT_ACTIVE);
  const ibv_device_attr attr = ctx.query_device();
  REQUIRE(attr.phys_port_cnt >= 1);
  REQUIRE(attr.max_qp > 0);
  REQUIRE(attr.max_cqe > 0);
  REQUIRE(attr.max_mr_size > 0);

  std::cout << "device " << dev << ": port 1 " << ibv_port_state_str(port.state)
            << ", link layer " << (port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "IB")
            << ", active_mtu " << (128 << port.active_mtu) << ", max_qp " << attr.max_qp
            << ", max_mr_size " << attr.max_mr_size << ", max_mw " << attr.max_mw << "\n";
}

TEST_CASE("deviceCarriesTheRigAddressInItsGidTable") {
  const std::string dev = test::device();
  const std::string addr = test::address(dev);
  Context ctx = Context::open(dev);
  const ibv_port_attr port = ctx.wait_port_active(1, std::chrono::seconds(30));
  if (port.link_layer != IBV_LINK_LAYER_ETHERNET) {
    SUCCEED("InfiniBand port: GIDs are not derived from IP addresses");
    return;
  }
  // RoCE v2 GIDs of IPv4 addresses are IPv4-mapped IPv6 (::ffff:a.b.c.d).
  in_addr want{};
  REQUIRE(inet_pton(AF_INET, addr.c_str(), &want) == 1);
  bool found = false;
  for (int i = 0; i < port.gid_tbl_len && !found; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx.get(), 1, i, &gid) != 0) continue;
    const auto* raw = gid.raw;
    found = raw[10] == 0xff && raw[11] == 0xff && std::memcmp(raw + 12, &want, 4) == 0;
  }
  INFO("device " << dev << " address " << addr);
  REQUIRE(found);
}
