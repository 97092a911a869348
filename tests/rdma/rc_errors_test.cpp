// Bad input to the RC transport gets a clear error naming what and where, and leaves nothing
// behind (run this suite from a -Db_sanitize=address build dir in the rig: LeakSanitizer
// checks every verbs and rdma_cm object of the failed attempts was freed).
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "rc_test_util.hpp"
#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "transport/rdma/rc/rc_subscriber.hpp"

using namespace tickrail;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

std::string addr() { return rdma::test::address(rdma::test::device()); }

PublisherConfig pub_config() {
  PublisherConfig c;
  c.transport = TransportKind::rc;
  c.channel = "rc-errors";
  c.ring_capacity = 1024;
  c.rdma.address = addr();
  c.rdma.port = 0;
  c.rdma.connect_timeout = 10s;
  return c;
}

SubscriberConfig sub_config(const std::string& address, std::uint16_t port) {
  SubscriberConfig c;
  c.transport = TransportKind::rc;
  c.channel = "rc-errors";
  c.ring_capacity = 256;
  c.rdma.address = address;
  c.rdma.port = port;
  c.rdma.connect_timeout = 5s;
  return c;
}

// Connects T(c) on a helper thread while the publisher's data path runs here; returns the
// Error it threw (or fails the test when it connected).
template <class T = Subscriber, class... Extra>
Error connect_error(Publisher& pub, const SubscriberConfig& c, Extra... extra) {
  auto f = std::async(std::launch::async, [&c, extra...] { return std::make_unique<T>(c, extra...); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (f.wait_for(1ms) != std::future_status::ready) {
    pub.service();
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  try {
    (void)f.get();
  } catch (const Error& e) {
    return e;
  }
  FAIL("connected although it should have been refused");
  return Error(Errc::ok, "");
}

template <class T = Subscriber>
std::unique_ptr<T> connect(Publisher& pub, const SubscriberConfig& c) {
  auto s = rc_test::construct_serving(pub, [&c] { return std::make_unique<T>(c); });
  REQUIRE(s != nullptr);
  return s;
}

}  // namespace

TEST_CASE("unknownDeviceIsNamedWithTheDevicesPresent") {
  PublisherConfig p = pub_config();
  p.rdma.device = "nosuchdev7";
  try {
    Publisher pub(p);
    FAIL("publisher on an unknown device");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::not_found);
    CHECK_THAT(e.what(), Contains("'nosuchdev7'") && Contains(rdma::test::device()));
  }
  SubscriberConfig s = sub_config(addr(), 7471);
  s.rdma.device = "nosuchdev7";
  try {
    Subscriber sub(s);
    FAIL("subscriber on an unknown device");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::not_found);
    CHECK_THAT(e.what(), Contains("'nosuchdev7'") && Contains("devices present"));
  }
}

TEST_CASE("unknownOrUnreachableAddressIsNamed") {
  SECTION("a name that does not resolve") {
    try {
      Subscriber sub(sub_config("no-such-host.invalid", 7471));
      FAIL("connected to a name that does not resolve");
    } catch (const Error& e) {
      CHECK(e.code() == Errc::not_found);
      CHECK_THAT(e.what(), Contains("no-such-host.invalid"));
    }
  }
  SECTION("an address no RDMA device reaches") {
    try {
      Subscriber sub(sub_config("192.0.2.1", 7471));  // TEST-NET-1: no route in the rig
      FAIL("connected to an unreachable address");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == Errc::not_found);
      CHECK_THAT(e.what(), Contains("192.0.2.1"));
    }
  }
  SECTION("a publisher on an address that is not on an RDMA device") {
    PublisherConfig p = pub_config();
    p.rdma.address = "127.0.0.1";
    try {
      Publisher pub(p);
      FAIL("published on loopback");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK_THAT(e.what(), Contains("127.0.0.1"));
    }
  }
}

TEST_CASE("portWithoutListenerIsNotFoundNamingAddressAndPort") {
  try {
    Subscriber sub(sub_config(addr(), 7399));
    FAIL("connected to a port nobody listens on");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == Errc::not_found);
    CHECK_THAT(e.what(), Contains(addr() + ":7399") && Contains("no publisher is listening"));
  }
}

// A publisher still starting is a channel that has not appeared yet: the subscriber retries
// until its attach_timeout, as on shared memory (tickrail-jitter started before tickrail-replay
// listened used to fail at once).
TEST_CASE("subscriberWaitsUpToAttachTimeoutForAPublisherToListen") {
  SubscriberConfig s = sub_config(addr(), 7398);
  s.attach_timeout = 20s;
  auto sub = std::async(std::launch::async, [&s] { return std::make_unique<Subscriber>(s); });
  std::this_thread::sleep_for(500ms);  // the subscriber's first attempts find nobody
  REQUIRE(sub.wait_for(0ms) != std::future_status::ready);
  PublisherConfig p = pub_config();
  p.rdma.port = 7398;
  Publisher pub(p);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (sub.wait_for(1ms) != std::future_status::ready) {
    pub.service();
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  std::unique_ptr<Subscriber> got;
  REQUIRE_NOTHROW(got = sub.get());  // it gave up if it threw
  CHECK(got->state() != SubscriberState::publisher_gone);
}

TEST_CASE("publisherRefusesWrongTokenChannelAndAddress") {
  PublisherConfig p = pub_config();
  p.rdma.token = "open sesame";
  Publisher pub(p);
  SubscriberConfig s = sub_config(addr(), pub.config().rdma.port);

  s.rdma.token = "guess";
  Error e = connect_error(pub, s);
  CHECK(e.code() == Errc::rejected);
  CHECK_THAT(e.what(), Contains("wrong access token") && Contains(addr()));

  s.rdma.token.clear();
  e = connect_error(pub, s);
  CHECK_THAT(e.what(), Contains("required"));

  s.rdma.token = "open sesame";
  s.channel = "other";
  e = connect_error(pub, s);
  CHECK_THAT(e.what(), Contains("wrong channel") && Contains("'rc-errors'"));

  s.channel = "rc-errors";
  auto ok = connect(pub, s);
  CHECK(ok->state() == SubscriberState::active);
  ok.reset();

  PublisherConfig q = pub_config();
  q.channel = "rc-errors";
  q.rdma.allow = {"10.77.1.99"};
  Publisher strict(q);
  SubscriberConfig t = sub_config(addr(), strict.config().rdma.port);
  e = connect_error(strict, t);
  CHECK_THAT(e.what(), Contains("allow-list"));
}

// A subscriber that may read must not be able to stop the channel: with policy block (or
// disconnect) one that stops reading would hold the publisher and every other subscriber back.
TEST_CASE("onlyAddressesInWaitForMayHoldThePublisherBack") {
  PublisherConfig p = pub_config();
  p.rdma.wait_for = {"10.77.1.99"};
  Publisher pub(p);
  SubscriberConfig s = sub_config(addr(), pub.config().rdma.port);
  for (const auto policy : {SlowConsumerPolicy::block, SlowConsumerPolicy::disconnect}) {
    s.policy = policy;
    const Error e = connect_error(pub, s);
    CHECK_THAT(e.what(), Contains(std::string("policy ") + to_string(policy)) && Contains("rdma.wait_for") &&
                             Contains("drop or conflate"));
  }
  s.policy = SlowConsumerPolicy::drop;
  auto ok = connect(pub, s);
  CHECK(ok->state() == SubscriberState::active);
  ok.reset();

  p.rdma.wait_for = {addr()};
  Publisher trusting(p);
  SubscriberConfig b = sub_config(addr(), trusting.config().rdma.port);
  b.policy = SlowConsumerPolicy::block;
  auto blocking = connect(trusting, b);
  CHECK(blocking->state() == SubscriberState::active);
}

TEST_CASE("versionMismatchAndAbsurdRingsAreRejectedInWords") {
  Publisher pub(pub_config());
  SubscriberConfig s = sub_config(addr(), pub.config().rdma.port);
  using Over = rdma::rc::RcSubscriber::Overrides;

  Error e = connect_error<rdma::rc::RcSubscriber>(pub, s, Over{std::uint16_t{99}, std::nullopt});
  CHECK(e.code() == Errc::version_mismatch);
  CHECK_THAT(e.what(), Contains("version " + std::to_string(rdma::rc::kVersion)) && Contains("99"));

  e = connect_error<rdma::rc::RcSubscriber>(pub, s, Over{std::nullopt, std::uint8_t{40}});
  CHECK(e.code() == Errc::geometry_mismatch);
  CHECK_THAT(e.what(), Contains("absurd ring of 2^40"));

  s.ring_capacity = 4096;
  e = connect_error(pub, s);
  CHECK(e.code() == Errc::geometry_mismatch);
  CHECK_THAT(e.what(), Contains("4096") && Contains("ring_capacity 1024"));

  // Left to the publisher (0), the ring takes the size the publisher names.
  s.ring_capacity = 0;
  auto sub = connect<rdma::rc::RcSubscriber>(pub, s);
  CHECK(sub->capacity() == 1024);
}

TEST_CASE("fullPublisherRejectsOneSubscriberTooMany") {
  PublisherConfig p = pub_config();
  p.max_subscribers = 1;
  Publisher pub(p);
  SubscriberConfig s = sub_config(addr(), pub.config().rdma.port);
  auto first = connect(pub, s);
  const Error e = connect_error(pub, s);
  CHECK(e.code() == Errc::no_capacity);
  CHECK_THAT(e.what(), Contains("max_subscribers"));
}

TEST_CASE("portInUseIsNamed") {
  Publisher pub(pub_config());
  PublisherConfig p = pub_config();
  p.rdma.port = pub.config().rdma.port;
  try {
    Publisher second(p);
    FAIL("two publishers on one port");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK_THAT(e.what(), Contains(addr() + ":" + std::to_string(p.rdma.port)));
  }
}

TEST_CASE("tooLittleLockedMemoryNamesSizesAndFixes") {
  const char* peer = std::getenv("TICKRAIL_RC_PEER");
  REQUIRE(peer != nullptr);
  SECTION("the subscriber's ring") {
    Publisher pub(pub_config());
    // A process of its own: CAP_IPC_LOCK dropped and RLIMIT_MEMLOCK at 64 KiB before it
    // registers a 1024-slot ring (64 KiB + 256 bytes).
    rc_test::Child sub(peer, {"sub", "--addr", addr(), "--port",
                              std::to_string(pub.config().rdma.port), "--channel", "rc-errors",
                              "--capacity", "1024", "--memlock-bytes", "65536"});
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    std::optional<int> status;
    while (!status && std::chrono::steady_clock::now() < deadline) {
      pub.service();
      status = sub.try_wait();
      std::this_thread::sleep_for(1ms);
    }
    INFO(sub.output());
    CHECK(status == 2);
    CHECK_THAT(sub.output(), Contains("locked_memory") && Contains("1024 slots") &&
                                 Contains("65792 bytes") && Contains("ulimit -l") &&
                                 Contains("64 KiB"));
  }
  SECTION("the publisher's staging ring, registered per connection") {
    rc_test::Child pubp(peer, {"pub", "--addr", addr(), "--channel", "rc-errors", "--capacity",
                               "4096", "--subs", "1", "--timeout-ms", "20000", "--memlock-bytes",
                               "65536"});
    const auto port = pubp.expect(R"(listening (\d+))", 20s);
    REQUIRE(port);
    try {
      Subscriber sub(sub_config(addr(), static_cast<std::uint16_t>(std::stoi((*port)[1]))));
      FAIL("connected to a publisher that cannot register its staging ring");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == Errc::rejected);
      CHECK_THAT(e.what(), Contains("out of resources") && Contains("locked-memory limit"));
    }
  }
}
