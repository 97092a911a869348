// UD configuration that can never work gets a clear error naming what and where, on a real
// device: a group that is not multicast, a device that does not exist, more ticks per datagram
// than the path MTU carries, several groups for one publisher.
#include <catch2/catch.hpp>

#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "ud_support.hpp"

using namespace tickrail;
using namespace tickrail::rdma::test;
using Catch::Contains;

namespace {

template <class F>
std::pair<std::error_code, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  FAIL("no error thrown");
  return {};
}

}  // namespace

TEST_CASE("aGroupAddressThatIsNotMulticastIsRefused") {
  PublisherConfig pc = ud_publisher_config("10.77.1.200", 7490);
  auto [code, what] = error_of([&] { Publisher p(pc); });
  CHECK(code == Errc::invalid_argument);
  CHECK_THAT(what, Contains("10.77.1.200") && Contains("not a multicast address"));

  SubscriberConfig sc = ud_subscriber_config("239.7.7.30");
  sc.rdma.groups.push_back("192.168.1.1");
  auto [scode, swhat] = error_of([&] { Subscriber s(sc); });
  CHECK(scode == Errc::invalid_argument);
  CHECK_THAT(swhat, Contains("rdma.groups[1]") && Contains("192.168.1.1"));
}

TEST_CASE("anUnknownDeviceIsRefusedNamingTheDevicesPresent") {
  PublisherConfig pc = ud_publisher_config("239.7.7.31", 7491);
  pc.rdma.device = "mlx5_9";
  auto [code, what] = error_of([&] { Publisher p(pc); });
  CHECK(code == Errc::not_found);
  CHECK_THAT(what, Contains("mlx5_9") && Contains(device()));

  SubscriberConfig sc = ud_subscriber_config("239.7.7.31");
  sc.rdma.device = "nosuchdev0";
  auto [scode, swhat] = error_of([&] { Subscriber s(sc); });
  CHECK(scode == Errc::not_found);
  CHECK_THAT(swhat, Contains("nosuchdev0"));
}

TEST_CASE("moreTicksPerDatagramThanThePathMtuCarriesIsRefused") {
  PublisherConfig pc = ud_publisher_config("239.7.7.32", 7492);
  pc.rdma.max_ticks_per_datagram = 64;  // 4160 bytes: more than any RoCE MTU
  auto [code, what] = error_of([&] { Publisher p(pc); });
  CHECK(code == Errc::invalid_argument);
  CHECK_THAT(what, Contains("max_ticks_per_datagram = 64") && Contains("path MTU") &&
                       Contains(device()));
}

TEST_CASE("aPublisherOfSeveralGroupsOrWithoutAddressIsAConfigError") {
  PublisherConfig pc = ud_publisher_config("239.7.7.33", 7493);
  pc.rdma.groups.push_back("239.7.7.34");
  auto [code, what] = error_of([&] { Publisher p(pc); });
  CHECK(code == Errc::config_error);
  CHECK_THAT(what, Contains("rdma.groups"));

  pc = ud_publisher_config("239.7.7.33", 7493);
  pc.rdma.address.clear();
  auto [acode, awhat] = error_of([&] { Publisher p(pc); });
  CHECK(acode == Errc::config_error);
  CHECK_THAT(awhat, Contains("rdma.address"));
}

TEST_CASE("aPublisherAddressOnNoRdmaDeviceIsRefused") {
  PublisherConfig pc = ud_publisher_config("239.7.7.35", 7494);
  pc.rdma.address = "127.0.0.1";  // loopback carries no RoCE
  auto [code, what] = error_of([&] { Publisher p(pc); });
  CHECK(code != std::error_code{});
  CHECK_THAT(what, Contains("127.0.0.1"));
}
