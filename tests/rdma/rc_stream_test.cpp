// The RC transport in one process, on the rig's device: publisher and subscribers driven from
// the test thread (the subscriber connects from a helper thread, since connecting needs the
// publisher's data path to take it in).
#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <memory>
#include <thread>

#include "rc_test_util.hpp"
#include "rig_env.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "transport/rdma/rc/rc_subscriber.hpp"

using namespace tickrail;
using namespace std::chrono_literals;
using rc_test::payload;
using rc_test::payload_ok;

namespace {

PublisherConfig pub_config(std::uint32_t capacity = 1024) {
  PublisherConfig c;
  c.transport = TransportKind::rc;
  c.channel = "rc-stream";
  c.ring_capacity = capacity;
  c.rdma.address = rdma::test::address(rdma::test::device());
  c.rdma.port = 0;  // ephemeral
  c.rdma.heartbeat_interval = 20ms;
  c.rdma.connect_timeout = 20s;
  return c;
}

SubscriberConfig sub_config(const Publisher& pub, RcPolling polling,
                            SlowConsumerPolicy policy = SlowConsumerPolicy::block) {
  SubscriberConfig c;
  c.transport = TransportKind::rc;
  c.channel = pub.config().channel;
  c.policy = policy;
  c.ring_capacity = 256;
  c.disconnect_after = 200ms;
  c.publisher_timeout = 5s;
  c.rdma.address = pub.config().rdma.address;
  c.rdma.port = pub.config().rdma.port;
  c.rdma.polling = polling;
  c.rdma.split_commit = true;  // memory polling also where the device does not report order
  c.rdma.connect_timeout = 20s;
  return c;
}

// Builds T(config) on a helper thread while this thread serves the publisher (bounded).
template <class T>
std::unique_ptr<T> connect(Publisher& pub, const SubscriberConfig& c) {
  auto s = rc_test::construct_serving(pub, [&c] { return std::make_unique<T>(c); });
  REQUIRE(s != nullptr);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  // Activation happens on the publishing thread, after ESTABLISHED.
  auto all_active = [&pub] {
    const auto list = pub.subscribers();
    return std::all_of(list.begin(), list.end(), [](const auto& x) { return x.state == "active"; });
  };
  while (!all_active()) {
    pub.service();
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  return s;
}

template <class Pred>
bool serve_until(Publisher& pub, Pred pred, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    pub.service();
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(100us);
  }
  return true;
}

struct Check {
  std::uint64_t expected = 0;
  std::uint64_t seen = 0;
  std::uint64_t bad = 0;
  bool gaps = false;
  void operator()(const Tick& t) {
    if ((t.seq != expected && !(gaps && t.seq > expected)) || !payload_ok(t)) ++bad;
    expected = t.seq + 1;
    ++seen;
  }
};

// Publishes `n` ticks in batches of `batch`, polling `sub` whenever the publisher is
// back-pressured and at the end, until everything has arrived.
void stream(Publisher& pub, Subscriber& sub, Check& check, std::uint64_t n, std::size_t batch) {
  std::vector<Tick> buf(batch);
  std::uint64_t sent = 0;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (sent < n) {
    const std::size_t k = std::min<std::uint64_t>(batch, n - sent);
    const std::uint64_t seq = pub.next_sequence();
    for (std::size_t i = 0; i < k; ++i) buf[i] = payload(seq + i);
    const PublishResult r = pub.publish(std::span<const Tick>(buf.data(), k));
    REQUIRE(r.status != PublishStatus::closed);
    sent += r.published;
    (void)sub.poll(check, 512);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  const std::uint64_t end = pub.next_sequence();
  REQUIRE(serve_until(pub, [&] {
    (void)sub.poll(check, 512);
    return sub.next_sequence() == end;
  }));
}

}  // namespace

TEST_CASE("everyTickArrivesOnceInOrderIntactInBothPollingModes") {
  const auto polling = GENERATE(RcPolling::memory, RcPolling::cq);
  const std::size_t batch = GENERATE(1, 7, 64);
  INFO("polling " << to_string(polling) << ", batches of " << batch);
  Publisher pub(pub_config());
  auto sub = connect<Subscriber>(pub, sub_config(pub, polling));
  Check check;
  check.expected = sub->next_sequence();
  REQUIRE(check.expected == pub.next_sequence());
  stream(pub, *sub, check, 20000, batch);
  CHECK(check.bad == 0);
  CHECK(check.seen == 20000);
  CHECK(sub->counters().received == 20000);
  CHECK(sub->counters().lost == 0);
  CHECK(sub->state() == SubscriberState::active);
}

TEST_CASE("memoryPollingUsesInOrderPlacementOrFallsBackAsConfigured") {
  Publisher pub(pub_config());
  SubscriberConfig c = sub_config(pub, RcPolling::memory);
  c.rdma.split_commit = false;
  auto plain = connect<rdma::rc::RcSubscriber>(pub, c);
  // Where the device reports in-order placement, memory polling; elsewhere CQ polling.
  CHECK(plain->mode() != rdma::rc::WriteMode::memory_split);
  CHECK((plain->ring() == nullptr) == (plain->mode() == rdma::rc::WriteMode::cq));
  const bool in_order = plain->mode() == rdma::rc::WriteMode::memory;
  plain.reset();
  c.rdma.split_commit = true;
  auto split = connect<rdma::rc::RcSubscriber>(pub, c);
  CHECK(split->mode() == (in_order ? rdma::rc::WriteMode::memory : rdma::rc::WriteMode::memory_split));
  CHECK(split->ring() != nullptr);
  c.rdma.polling = RcPolling::cq;
  auto cq = connect<rdma::rc::RcSubscriber>(pub, c);
  CHECK(cq->mode() == rdma::rc::WriteMode::cq);
  CHECK(cq->ring() == nullptr);
}

TEST_CASE("lateJoinerStartsAtTheNextTickAndGetsWhatWasPublishedWhileItConnected") {
  const auto polling = GENERATE(RcPolling::memory, RcPolling::cq);
  INFO("polling " << to_string(polling));
  Publisher pub(pub_config());
  std::vector<Tick> buf(100);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = payload(pub.next_sequence() + i);
  CHECK(pub.publish(buf).status == PublishStatus::no_subscribers);
  // Keep publishing while it connects: the ticks between its first sequence (chosen when the
  // publisher takes its request) and ESTABLISHED reach it from the staging ring.
  const SubscriberConfig c = sub_config(pub, polling);
  auto f = std::async(std::launch::async, [&c] { return std::make_unique<Subscriber>(c); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (f.wait_for(2ms) != std::future_status::ready) {
    const Tick t = payload(pub.next_sequence());
    REQUIRE(pub.publish(t).status != PublishStatus::closed);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  auto sub = f.get();
  const std::uint64_t first = sub->next_sequence();
  CHECK(first >= 101);
  Check check;
  check.expected = first;
  stream(pub, *sub, check, 3000, 16);
  CHECK(check.bad == 0);
  CHECK(check.seen == pub.next_sequence() - first);
  CHECK(sub->counters().lost == 0);
}

TEST_CASE("dropSubscriberThatStopsReadingCountsExactlyWhatItLost") {
  const auto polling = GENERATE(RcPolling::memory, RcPolling::cq);
  INFO("polling " << to_string(polling));
  Publisher pub(pub_config());
  auto sub = connect<Subscriber>(pub, sub_config(pub, polling, SlowConsumerPolicy::drop));
  const std::uint64_t first = sub->next_sequence();
  // It does not poll while 10 rings' worth are published: the publisher never waits for it.
  std::vector<Tick> buf(64);
  const std::uint64_t total = 2560;  // 40 batches
  for (std::uint64_t sent = 0; sent < total; sent += buf.size()) {
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = payload(pub.next_sequence() + i);
    const PublishResult r = pub.publish(buf);
    REQUIRE(r.status == PublishStatus::ok);
    REQUIRE(r.published == buf.size());
  }
  Check check;
  check.expected = first;
  check.gaps = true;
  const std::uint64_t end = pub.next_sequence();
  REQUIRE(serve_until(pub, [&] {
    (void)sub->poll(check, 512);
    return sub->next_sequence() == end;
  }));
  const SubscriberCounters k = sub->counters();
  CHECK(check.bad == 0);
  CHECK(k.received == check.seen);
  CHECK(k.lost > 0);
  CHECK(k.laps == (k.lost + 255) / 256);  // whole rings of its 256 slots, not skip steps
  CHECK(k.skips >= 1);
  CHECK(k.received + k.lost == total);
  CHECK(k.received >= 256);  // what its ring held when it came back
}

TEST_CASE("blockSubscriberThatStopsReadingShowsTheCallsItHeldBack") {
  const auto polling = GENERATE(RcPolling::memory, RcPolling::cq);
  INFO("polling " << to_string(polling));
  Publisher pub(pub_config());
  auto sub = connect<Subscriber>(pub, sub_config(pub, polling));
  // Its ring holds 256: the third call of 100 fits only in part, the later ones not at all.
  std::vector<Tick> buf(100);
  std::uint64_t held = 0;
  for (int call = 0; call < 5; ++call) {
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = payload(pub.next_sequence() + i);
    if (pub.publish(buf).status == PublishStatus::back_pressured) ++held;
  }
  REQUIRE(held >= 3);
  CHECK(pub.counters().back_pressured == held);
  const auto rows = pub.subscribers();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].back_pressure == held);
}

TEST_CASE("disconnectPolicyEvictsAStoppedSubscriberAndTellsIt") {
  const auto polling = GENERATE(RcPolling::memory, RcPolling::cq);
  INFO("polling " << to_string(polling));
  Publisher pub(pub_config());
  auto sub = connect<Subscriber>(pub, sub_config(pub, polling, SlowConsumerPolicy::disconnect));
  std::vector<Tick> buf(32);
  bool evicted = false;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!evicted && std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = payload(pub.next_sequence() + i);
    (void)pub.publish(buf);
    evicted = pub.counters().evictions == 1;
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(evicted);
  // It learns why once it looks, and can still drain what reached it.
  REQUIRE(serve_until(pub, [&] { return sub->state() == SubscriberState::evicted; }));
  CHECK_THAT(sub->reason(), Catch::Contains("evicted") && Catch::Contains("disconnect_after"));
  Check check;
  check.expected = 1;
  while (sub->poll(check, 512) != 0) {
  }
  CHECK(check.bad == 0);
  CHECK(check.seen == 256);
  // The publisher frees the connection; publishing carries on without it.
  REQUIRE(serve_until(pub, [&] { return pub.subscribers().empty(); }));
  CHECK(pub.publish(buf).status == PublishStatus::no_subscribers);
}

// The data path frees an evicted subscriber's place without waking the CM thread, which sleeps up
// to a second while nothing is due: a connection request in that second must still find the
// place free, not a full house.
TEST_CASE("theNextSubscriberTakesAnEvictedSubscribersPlaceAtOnce") {
  PublisherConfig pc = pub_config();
  pc.channel = "rc-place";
  pc.max_subscribers = 1;
  Publisher pub(pc);
  auto first = connect<Subscriber>(pub, sub_config(pub, RcPolling::cq, SlowConsumerPolicy::disconnect));
  std::vector<Tick> buf(32);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (pub.counters().evictions == 0 && std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = payload(pub.next_sequence() + i);
    (void)pub.publish(buf);
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(pub.counters().evictions == 1);
  // Retired by the data path: the place is the CM thread's to free.
  REQUIRE(serve_until(pub, [&] {
    const auto list = pub.subscribers();
    return list.size() == 1 && list[0].state == "retired";
  }));
  auto second = connect<Subscriber>(pub, sub_config(pub, RcPolling::cq));
  CHECK(second->state() == SubscriberState::active);
  CHECK(pub.subscribers().size() == 1);
}

TEST_CASE("publisherCloseIsReportedAndSubscriberCloseFreesItsConnection") {
  Publisher pub(pub_config());
  auto a = connect<Subscriber>(pub, sub_config(pub, RcPolling::memory));
  auto b = connect<Subscriber>(pub, sub_config(pub, RcPolling::cq));
  REQUIRE(pub.subscriber_count() == 2);
  b->close();
  CHECK(b->state() == SubscriberState::closed);
  REQUIRE(serve_until(pub, [&] { return pub.subscribers().size() == 1; }));
  CHECK(pub.subscriber_count() == 1);
  CHECK(pub.counters().reclaimed == 1);
  pub.close();
  CHECK(a->state() == SubscriberState::publisher_gone);
  CHECK_THAT(a->reason(), Catch::Contains("closed"));
}
