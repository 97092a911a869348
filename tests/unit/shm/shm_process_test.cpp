// Other processes that die mid-stream: kill -9 of a subscriber or of the publisher.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "peer.hpp"
#include "shm_test_util.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

TEST_CASE("killedSubscriberProcessIsReclaimedAndOthersCarryOn") {
  const auto ch = unique_channel("kill-sub");
  PublisherConfig pc;
  pc.channel = ch;
  pc.ring_capacity = 64;
  pc.conductor_period = 1ms;
  Publisher pub(pc);
  SubscriberConfig sc;
  sc.channel = ch;
  Subscriber local(sc);
  Peer peer({"sub", ch, "block"});
  REQUIRE(wait_for_subscribers(pub, 2));

  // The peer consumes one tick a millisecond: fill its ring so it back-pressures us.
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t expect = pub.next_sequence();
  bool in_order = true;
  auto consume = [&] {
    received += local.poll([&](const Tick& t) {
      in_order = in_order && t.seq == expect;
      expect = t.seq + 1;
    });
  };
  REQUIRE(eventually([&] {
    consume();
    const auto r = pub.publish(payload(sent));
    sent += r.published;
    return r.status == PublishStatus::back_pressured;
  }));

  peer.kill9();
  // Within a conductor period the dead subscriber is found and its ring reclaimed.
  REQUIRE(eventually([&] {
    consume();
    const auto r = pub.publish(payload(sent));
    sent += r.published;
    return pub.counters().reclaimed == 1;
  }));
  for (int i = 0; i < 500; ++i) {
    consume();
    const auto r = pub.publish(payload(sent));
    REQUIRE(r.status == PublishStatus::ok);
    sent += r.published;
  }
  REQUIRE(eventually([&] {
    consume();
    return received == sent;
  }));
  REQUIRE(in_order);
  REQUIRE(pub.subscriber_count() == 1);
  REQUIRE(pub.subscribers().size() == 1);
}

TEST_CASE("killedPublisherIsReportedWithinTheTimeoutAndDeliveredTicksStay") {
  const auto ch = unique_channel("kill-pub");
  Peer peer({"pub", ch});
  SubscriberConfig sc;
  sc.channel = ch;
  sc.publisher_timeout = 200ms;
  Subscriber sub(sc);
  REQUIRE(sub.wait_active(5s));
  std::uint64_t before = 0;
  REQUIRE(eventually([&] {
    before += sub.poll([](const Tick&) {});
    return before >= 3;
  }));
  peer.kill9();
  REQUIRE(eventually([&] { return sub.state() == SubscriberState::publisher_gone; }, 5s));
  REQUIRE_THAT(sub.reason(), Catch::Contains("silent"));
  // The dead publisher's channel can be published again by a new process.
  PublisherConfig pc;
  pc.channel = ch;
  Publisher again(pc);
}

TEST_CASE("aHostThatWasStoppedDoesNotMakeItsPublisherLookDead") {
  // As when a VM is paused: the publisher stops, and so do we (we do not look) for longer than
  // publisher_timeout. Our first look after that is no verdict; the publisher, resumed, is heard.
  const auto ch = unique_channel("stopped-host");
  Peer peer({"pub", ch});
  SubscriberConfig sc;
  sc.channel = ch;
  sc.publisher_timeout = 200ms;
  Subscriber sub(sc);
  REQUIRE(sub.wait_active(5s));
  std::uint64_t received = 0;
  REQUIRE(eventually([&] {
    received += sub.poll([](const Tick&) {});
    return received >= 3;
  }));
  REQUIRE(::kill(peer.pid, SIGSTOP) == 0);
  std::this_thread::sleep_for(1s);
  CHECK(sub.state() == SubscriberState::active);
  REQUIRE(::kill(peer.pid, SIGCONT) == 0);
  const std::uint64_t before = received;
  CHECK(eventually([&] {
    received += sub.poll([](const Tick&) {});
    return received > before + 3 && sub.state() == SubscriberState::active;
  }, 5s));

  // Stopped while we look: silent after the timeout, as before.
  REQUIRE(::kill(peer.pid, SIGSTOP) == 0);
  CHECK(eventually([&] { return sub.state() == SubscriberState::publisher_gone; }, 5s));
  CHECK_THAT(sub.reason(), Catch::Contains("silent"));
  ::kill(peer.pid, SIGCONT);
}
