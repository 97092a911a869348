#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "shm_test_util.hpp"
#include "tickrail/error.hpp"
#include "transport/shm/segment.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

PublisherConfig pub_config(const std::string& channel, std::uint32_t capacity = 64) {
  PublisherConfig c;
  c.channel = channel;
  c.ring_capacity = capacity;
  c.max_subscribers = 4;
  c.conductor_period = 1ms;
  return c;
}

SubscriberConfig sub_config(const std::string& channel,
                            SlowConsumerPolicy p = SlowConsumerPolicy::block) {
  SubscriberConfig c;
  c.channel = channel;
  c.policy = p;
  return c;
}

// A listener at the channel's path that takes each connection and closes it at once, without an
// answer: what a subscriber meets while the channel's publisher is dying.
class DyingPublisher {
 public:
  explicit DyingPublisher(const std::string& channel)
      : listener_(shm::listen_channel("/dev/shm", channel)) {}
  ~DyingPublisher() { shm::unlink_channel(listener_); }  // only if still ours
  DyingPublisher(const DyingPublisher&) = delete;
  DyingPublisher& operator=(const DyingPublisher&) = delete;
  // Waits (bounded) for one connection and closes it; false when none came.
  bool turn_away(int wait_ms = 5000) {
    pollfd p{listener_.fd.get(), POLLIN, 0};
    if (::poll(&p, 1, wait_ms) != 1) return false;
    const shm::Fd c(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
    return c.get() >= 0;
  }
  // Dead: its socket stays at the path, refusing, until the next publisher replaces it.
  void die() { listener_.fd = shm::Fd(); }

 private:
  shm::Listener listener_;
};

std::vector<Tick> drain(Subscriber& s) {
  std::vector<Tick> out;
  while (s.poll([&](const Tick& t) { out.push_back(t); }, 1000) != 0) {
  }
  return out;
}

}  // namespace

TEST_CASE("subscriberReceivesEveryTickInOrderWithPayload") {
  const auto ch = unique_channel("order");
  Publisher pub(pub_config(ch));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(sub.wait_active(1s));
  REQUIRE(sub.state() == SubscriberState::active);
  const std::uint64_t first = pub.next_sequence();
  for (std::uint64_t i = 0; i < 40; ++i) REQUIRE(pub.publish(payload(i)).ok());
  const auto got = drain(sub);
  REQUIRE(got.size() == 40);
  for (std::uint64_t i = 0; i < 40; ++i) {
    CHECK(got[i].seq == first + i);
    CHECK(got[i].order_ref == i);
    CHECK(payload_ok(got[i]));
    CHECK(got[i].send_ts != 0);
  }
  CHECK(sub.counters().received == 40);
  CHECK(sub.counters().lost == 0);
}

// Endpoints packed as an application would pack them (a vector of subscribers, each polled by a
// core of its own; a publisher beside them) share no cache line pair: each is written or read on
// every call by its own thread. And they still work once moved there.
TEST_CASE("endpointsLieOnLinesOfTheirOwnWhereverTheyArePut") {
  constexpr std::uintptr_t kPair = 2 * kCacheLine;
  const auto pair_of = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) / kPair; };
  const auto apart = [&](const auto& a, const auto& b) {
    const auto* x = reinterpret_cast<const char*>(&a);
    const auto* y = reinterpret_cast<const char*>(&b);
    if (x > y) std::swap(x, y);
    return pair_of(x + sizeof(a) - 1) < pair_of(y);
  };
  const auto ch = unique_channel("apart");
  struct Packed {
    char flag;  // a neighbour of the application's
    Publisher pub;
    std::vector<Subscriber> subs;
  };
  auto packed = std::make_unique<Packed>(Packed{'x', Publisher(pub_config(ch)), {}});
  packed->subs.reserve(2);
  packed->subs.emplace_back(sub_config(ch));
  packed->subs.emplace_back(sub_config(ch));
  CHECK(apart(packed->flag, packed->pub));
  CHECK(apart(packed->subs[0], packed->subs[1]));
  for (const Subscriber& s : packed->subs) CHECK(reinterpret_cast<std::uintptr_t>(&s) % kPair == 0);
  REQUIRE(wait_for_subscribers(packed->pub, 2));
  for (Subscriber& s : packed->subs) REQUIRE(s.wait_active(1s));
  REQUIRE(packed->pub.publish(payload(7)).ok());
  for (Subscriber& s : packed->subs) {
    const auto got = drain(s);
    REQUIRE(got.size() == 1);
    CHECK(got[0].order_ref == 7);
  }
}

// A handler held const (a const lambda, or a const reference to a function object) is taken as
// a non-const one is, on every transport's path: this file does not compile otherwise.
TEST_CASE("pollTakesAConstHandler") {
  const auto ch = unique_channel("consthandler");
  Publisher pub(pub_config(ch));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(sub.wait_active(1s));
  const std::uint64_t first = pub.next_sequence();
  for (std::uint64_t i = 0; i < 5; ++i) REQUIRE(pub.publish(payload(i)).ok());
  std::vector<std::uint64_t> seqs;
  const auto handler = [&seqs](const Tick& t) { seqs.push_back(t.seq); };
  std::size_t got = 0;
  for (int i = 0; i < 100 && got < 5; ++i) got += sub.poll(handler, 2);
  REQUIRE(got == 5);
  CHECK(seqs == std::vector<std::uint64_t>{first, first + 1, first + 2, first + 3, first + 4});
}

TEST_CASE("publishWithNoSubscribersSequencesAndSaysSo") {
  const auto ch = unique_channel("nosub");
  Publisher pub(pub_config(ch));
  const auto r = pub.publish(payload(1));
  REQUIRE(r.status == PublishStatus::no_subscribers);
  REQUIRE(r.published == 1);
  REQUIRE(pub.next_sequence() == 2);
  REQUIRE(pub.counters().unheard == 1);
}

TEST_CASE("lateJoinerStartsAtTheNextTick") {
  const auto ch = unique_channel("late");
  Publisher pub(pub_config(ch));
  for (std::uint64_t i = 0; i < 10; ++i) (void)pub.publish(payload(i));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  const std::uint64_t next = pub.next_sequence();
  REQUIRE(pub.publish(payload(99)).ok());
  const auto got = drain(sub);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].seq == next);
  REQUIRE(got[0].order_ref == 99);
}

TEST_CASE("publisherReportsBackPressureWhenABlockRingIsFull") {
  const auto ch = unique_channel("block");
  Publisher pub(pub_config(ch, 8));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(sub.wait_active(1s));
  std::vector<Tick> batch;
  for (std::uint64_t i = 0; i < 12; ++i) batch.push_back(payload(i));
  auto r = pub.publish(batch);
  REQUIRE(r.status == PublishStatus::back_pressured);
  REQUIRE(r.published == 8);
  r = pub.publish(payload(12));
  REQUIRE(r.status == PublishStatus::back_pressured);
  REQUIRE(r.published == 0);
  REQUIRE(r.blocked != 0);
  // Consuming makes room; nothing was overwritten.
  auto got = drain(sub);
  REQUIRE(got.size() == 8);
  REQUIRE(pub.publish(std::span<const Tick>(batch).subspan(8)).ok());
  got = drain(sub);
  REQUIRE(got.size() == 4);
  REQUIRE(got.back().order_ref == 11);
  REQUIRE(sub.counters().lost == 0);
}

// One tick at a time takes the publisher's inline lane (publisher.hpp): it must stop where a
// batch would, at a full block ring, and go on once the subscriber has read.
TEST_CASE("singleTicksStopAtAFullBlockRingAndGoOnOnceItIsRead") {
  const auto ch = unique_channel("block-one");
  Publisher pub(pub_config(ch, 8));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(sub.wait_active(1s));
  const std::uint64_t first = pub.next_sequence();
  for (std::uint64_t i = 0; i < 8; ++i) REQUIRE(pub.publish(payload(i)).ok());
  auto r = pub.publish(payload(8));
  REQUIRE(r.status == PublishStatus::back_pressured);
  REQUIRE(r.published == 0);
  REQUIRE(r.blocked != 0);
  REQUIRE(sub.poll([](const Tick&) {}, 3) == 3);
  for (std::uint64_t i = 8; i < 11; ++i) REQUIRE(pub.publish(payload(i)).ok());
  REQUIRE(pub.publish(payload(11)).status == PublishStatus::back_pressured);
  const auto got = drain(sub);
  REQUIRE(got.size() == 8);
  for (std::uint64_t i = 0; i < 8; ++i) {
    CHECK(got[i].seq == first + 3 + i);
    CHECK(got[i].order_ref == 3 + i);
    CHECK(payload_ok(got[i]));
  }
  CHECK(pub.counters().published == 11);
  CHECK(pub.counters().back_pressured == 2);
  CHECK(sub.counters().lost == 0);
}

// A subscriber that attaches while single ticks flow is served by the publish calls alone: the
// seat change reaches the lane, and the newcomer gets every tick from its start on. The first
// subscriber drops: a block one's credit would send a publish out of line every ring's length,
// where the seat change would be found without the lane.
TEST_CASE("aSubscriberAttachingWhileSingleTicksFlowGetsEveryTickFromItsStart") {
  const auto ch = unique_channel("join-flow");
  Publisher pub(pub_config(ch));
  Subscriber a(sub_config(ch, SlowConsumerPolicy::drop));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(a.wait_active(1s));
  std::vector<Tick> got_a;
  std::vector<Tick> got_b;
  auto keep = [](std::vector<Tick>& v) { return [&v](const Tick& t) { v.push_back(t); }; };
  const std::uint64_t first = pub.next_sequence();
  std::uint64_t i = 0;
  for (; i < 5; ++i) REQUIRE(pub.publish(payload(i)).ok());
  Subscriber b(sub_config(ch));
  // No service() nor wait_subscribers() here: only publish() may take the newcomer in.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (got_b.size() < 5 && std::chrono::steady_clock::now() < deadline) {
    REQUIRE(pub.publish(payload(i++)).ok());
    (void)a.poll(keep(got_a));
    (void)b.poll(keep(got_b));
    std::this_thread::sleep_for(100us);
  }
  REQUIRE(got_b.size() >= 5);
  CHECK(pub.subscriber_count() == 2);
  while (a.poll(keep(got_a)) != 0) {
  }
  while (b.poll(keep(got_b)) != 0) {
  }
  REQUIRE(got_a.size() == i);
  for (std::uint64_t k = 0; k < i; ++k) CHECK(got_a[k].seq == first + k);
  CHECK(b.counters().lost == 0);
  CHECK(got_b.back().seq == first + i - 1);
  for (std::size_t k = 1; k < got_b.size(); ++k) CHECK(got_b[k].seq == got_b[k - 1].seq + 1);
  for (const Tick& t : got_b) CHECK(t.order_ref == t.seq - first);
}

// Likewise a subscriber that leaves: only publish() lets go of its seat.
TEST_CASE("aSubscriberLeavingWhileSingleTicksFlowIsLetGoByThePublishCallsAlone") {
  const auto ch = unique_channel("leave-flow");
  Publisher pub(pub_config(ch));
  Subscriber a(sub_config(ch, SlowConsumerPolicy::drop));
  auto b = std::make_unique<Subscriber>(sub_config(ch, SlowConsumerPolicy::drop));
  REQUIRE(wait_for_subscribers(pub, 2));
  std::uint64_t i = 0;
  for (; i < 5; ++i) REQUIRE(pub.publish(payload(i)).ok());
  b.reset();
  std::vector<Tick> got;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (pub.subscriber_count() != 1 && std::chrono::steady_clock::now() < deadline) {
    REQUIRE(pub.publish(payload(i++)).ok());
    (void)a.poll([&](const Tick& t) { got.push_back(t); });
    std::this_thread::sleep_for(100us);
  }
  REQUIRE(pub.subscriber_count() == 1);
  const auto rest = drain(a);
  got.insert(got.end(), rest.begin(), rest.end());
  REQUIRE(got.size() == i);
  CHECK(a.counters().lost == 0);
}

TEST_CASE("aPublisherClosedFromAnotherThreadRefusesItsNextTickAndLosesNone") {
  const auto ch = unique_channel("close-flow");
  Publisher pub(pub_config(ch));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(sub.wait_active(1s));
  for (std::uint64_t i = 0; i < 5; ++i) REQUIRE(pub.publish(payload(i)).ok());
  std::thread([&pub] { pub.close(); }).join();  // close() may come from any thread
  const auto r = pub.publish(payload(5));
  CHECK(r.status == PublishStatus::closed);
  CHECK(r.published == 0);
  CHECK(pub.counters().published == 5);
  const auto got = drain(sub);
  REQUIRE(got.size() == 5);
  CHECK(got.back().order_ref == 4);
  CHECK(sub.state() == SubscriberState::publisher_gone);
}

TEST_CASE("sendTimeIsStampedOrPassedOnAsConfigured") {
  for (const bool stamp : {false, true}) {
    CAPTURE(stamp);
    const auto ch = unique_channel("stamp");
    auto pc = pub_config(ch);
    pc.stamp_send_time = stamp;
    Publisher pub(pc);
    Subscriber sub(sub_config(ch));
    REQUIRE(wait_for_subscribers(pub, 1));
    REQUIRE(sub.wait_active(1s));
    const std::uint64_t before = Clock::now();
    for (std::uint64_t i = 0; i < 5; ++i) {
      Tick t = payload(i);
      t.send_ts = 1000 + i;
      REQUIRE(pub.publish(t).ok());
    }
    const std::uint64_t after = Clock::now();
    const auto got = drain(sub);
    REQUIRE(got.size() == 5);
    for (std::uint64_t i = 0; i < 5; ++i) {
      if (stamp) {
        CHECK(got[i].send_ts >= before);
        CHECK(got[i].send_ts <= after);
      } else {
        CHECK(got[i].send_ts == 1000 + i);
      }
    }
  }
}

// How far ahead the publisher prefetches: as configured, but at most a quarter of the ring.
TEST_CASE("thePrefetchDistanceIsAtMostAQuarterOfTheRing") {
  CHECK(shm::prefetch_distance(16, 16384) == 16);
  CHECK(shm::prefetch_distance(1024, 4096) == 1024);
  CHECK(shm::prefetch_distance(1024, 2048) == 512);
  CHECK(shm::prefetch_distance(16, 64) == 16);
  CHECK(shm::prefetch_distance(16, 32) == 8);
  CHECK(shm::prefetch_distance(16, 8) == 2);
  CHECK(shm::prefetch_distance(16, 4) == 1);
  CHECK(shm::prefetch_distance(16, 2) == 0);
  CHECK(shm::prefetch_distance(0, 16384) == 0);
}

// A smoke test: the prefetch is a hint, which no test can see, about a slot ahead (here at most
// a quarter of an 8-slot ring: 1024 and the default are cut to 2), one the subscriber may not
// have read yet; every tick still arrives, once and whole, from single publishes and batches,
// lap after lap.
TEST_CASE("aPrefetchingPublisherDeliversEveryTickAcrossLaps") {
  const std::uint32_t ahead = GENERATE(PublisherConfig{}.prefetch_ahead, 1024U, 3U, 0U);
  INFO("prefetch_ahead " << ahead);
  const auto ch = unique_channel("prefetch");
  auto pc = pub_config(ch);
  pc.ring_capacity = 8;
  pc.prefetch_ahead = ahead;
  Publisher pub(pc);
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(sub.wait_active(1s));
  std::vector<Tick> got;
  std::uint64_t i = 0;
  for (int lap = 0; lap < 20; ++lap) {
    for (int k = 0; k < 5; ++k) REQUIRE(pub.publish(payload(i++)).ok());
    const std::vector<Tick> two{payload(i), payload(i + 1)};
    i += 2;
    REQUIRE(pub.publish(std::span<const Tick>(two)).published == 2);
    (void)sub.poll([&](const Tick& t) { got.push_back(t); });
  }
  REQUIRE(got.size() == i);
  for (std::uint64_t k = 0; k < i; ++k) {
    CHECK(got[k].seq == k + 1);
    CHECK(got[k].order_ref == k);
    CHECK(payload_ok(got[k]));
  }
}

TEST_CASE("aMovedPublisherGoesOnPublishingOnItsChannel") {
  const auto ch = unique_channel("moved");
  Publisher first(pub_config(ch));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(first, 1));
  REQUIRE(sub.wait_active(1s));
  for (std::uint64_t i = 0; i < 3; ++i) REQUIRE(first.publish(payload(i)).ok());
  Publisher second(std::move(first));
  for (std::uint64_t i = 3; i < 6; ++i) REQUIRE(second.publish(payload(i)).ok());
  // A subscriber on the channel that `third` gives up: a lane kept into its rings would write
  // into memory gone with it.
  const auto over = unique_channel("moved-over");
  Publisher third(pub_config(over));
  Subscriber on_over(sub_config(over));
  REQUIRE(wait_for_subscribers(third, 1));
  REQUIRE(third.publish(payload(100)).ok());
  REQUIRE(third.publish(payload(101)).ok());
  third = std::move(second);
  for (std::uint64_t i = 6; i < 9; ++i) REQUIRE(third.publish(payload(i)).ok());
  const auto got = drain(sub);
  REQUIRE(got.size() == 9);
  for (std::uint64_t i = 0; i < 9; ++i) CHECK(got[i].order_ref == i);
  CHECK(third.counters().published == 9);
  CHECK(drain(on_over).size() == 2);
  CHECK(on_over.state() == SubscriberState::publisher_gone);
}

TEST_CASE("eachSubscriberShowsHowOftenItsRingHeldThePublisherBack") {
  const auto ch = unique_channel("bp-rows");
  Publisher pub(pub_config(ch, 8));
  Subscriber slow(sub_config(ch));
  Subscriber fast(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 2));
  REQUIRE(slow.wait_active(1s));
  REQUIRE(fast.wait_active(1s));
  std::vector<Tick> batch;
  for (std::uint64_t i = 0; i < 12; ++i) batch.push_back(payload(i));
  // Both rings hold 8 of the 12: both held this call back.
  REQUIRE(pub.publish(batch).status == PublishStatus::back_pressured);
  drain(fast);
  // Only the slow one is full now; a part of the batch fits the fast one, none the slow one.
  REQUIRE(pub.publish(std::span<const Tick>(batch).subspan(8)).status == PublishStatus::back_pressured);
  drain(slow);
  REQUIRE(pub.publish(std::span<const Tick>(batch).subspan(8)).ok());  // room in both
  drain(fast);
  REQUIRE(slow.poll([](const Tick&) {}, 1) == 1);  // 3 unread in slow: room for 5
  std::vector<Tick> six(batch.begin(), batch.begin() + 6);
  REQUIRE(pub.publish(six).status == PublishStatus::back_pressured);
  REQUIRE(pub.counters().back_pressured == 3);
  std::vector<std::uint64_t> rows;
  for (const SubscriberStatus& s : pub.subscribers()) rows.push_back(s.back_pressure);
  std::sort(rows.begin(), rows.end());
  // fast: the first call only; slow: all three, also the last, where it had some room.
  CHECK(rows == std::vector<std::uint64_t>{1, 3});
}

TEST_CASE("dropSubscriberIsLappedAndCountsItsExactLoss") {
  const auto ch = unique_channel("drop");
  Publisher pub(pub_config(ch, 16));
  Subscriber slow(sub_config(ch, SlowConsumerPolicy::drop));
  Subscriber fast(sub_config(ch, SlowConsumerPolicy::block));
  REQUIRE(wait_for_subscribers(pub, 2));
  REQUIRE(slow.wait_active(1s));
  REQUIRE(fast.wait_active(1s));
  std::uint64_t published = 0;
  std::uint64_t fast_got = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    REQUIRE(pub.publish(payload(i)).ok());  // the drop subscriber never holds anyone back
    ++published;
    fast_got += fast.poll([](const Tick&) {});
    if (i % 100 == 0) slow.poll([](const Tick&) {}, 3);
  }
  fast_got += drain(fast).size();
  drain(slow);
  REQUIRE(fast_got == published);
  REQUIRE(fast.counters().lost == 0);
  const auto c = slow.counters();
  REQUIRE(c.lost > 0);
  REQUIRE(c.received + c.lost == published);
}

TEST_CASE("disconnectPolicyEvictsAStuckSubscriberAndTellsIt") {
  const auto ch = unique_channel("evict");
  Publisher pub(pub_config(ch, 8));
  auto cfg = sub_config(ch, SlowConsumerPolicy::disconnect);
  cfg.disconnect_after = 20ms;
  Subscriber stuck(cfg);
  Subscriber ok(sub_config(ch, SlowConsumerPolicy::block));
  REQUIRE(wait_for_subscribers(pub, 2));
  REQUIRE(stuck.wait_active(1s));
  std::uint64_t i = 0;
  // Until eviction the stuck subscriber back-pressures; then publishing goes on without it.
  REQUIRE(eventually([&] {
    ok.poll([](const Tick&) {});
    if (pub.publish(payload(i)).published == 1) ++i;
    return pub.counters().evictions == 1;
  }));
  REQUIRE(stuck.state() == SubscriberState::evicted);
  REQUIRE_THAT(stuck.reason(), Catch::Contains("disconnect_after"));
  // What reached its ring before the eviction is still delivered.
  const auto got = drain(stuck);
  REQUIRE(got.size() == 8);
  REQUIRE(pub.publish(payload(i)).ok());
}

TEST_CASE("publisherCloseLetsSubscribersDrainThenReportsIt") {
  const auto ch = unique_channel("close");
  auto pub = std::make_unique<Publisher>(pub_config(ch));
  Subscriber sub(sub_config(ch));
  REQUIRE(wait_for_subscribers(*pub, 1));
  for (std::uint64_t i = 0; i < 20; ++i) REQUIRE(pub->publish(payload(i)).ok());
  pub.reset();
  REQUIRE(sub.state() == SubscriberState::publisher_gone);
  REQUIRE_THAT(sub.reason(), Catch::Contains("closed"));
  REQUIRE(drain(sub).size() == 20);
}

TEST_CASE("closedPublisherRefusesToPublish") {
  const auto ch = unique_channel("closed");
  Publisher pub(pub_config(ch));
  pub.close();
  REQUIRE(pub.publish(payload(1)).status == PublishStatus::closed);
}

TEST_CASE("detachedSubscriberFreesItsEntry") {
  const auto ch = unique_channel("detach");
  Publisher pub(pub_config(ch));
  {
    Subscriber sub(sub_config(ch));
    REQUIRE(wait_for_subscribers(pub, 1));
  }
  REQUIRE(wait_for_subscribers(pub, 0));
  REQUIRE(pub.subscribers().empty());
}

TEST_CASE("fullChannelRejectsAnotherSubscriberClearly") {
  const auto ch = unique_channel("full");
  auto cfg = pub_config(ch);
  cfg.max_subscribers = 2;
  Publisher pub(cfg);
  Subscriber a(sub_config(ch));
  Subscriber b(sub_config(ch));
  try {
    Subscriber c(sub_config(ch));
    FAIL("third subscriber attached");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::no_capacity);
    REQUIRE_THAT(e.what(), Catch::Contains("max_subscribers"));
  }
}

TEST_CASE("secondPublisherOnALiveChannelIsRejected") {
  const auto ch = unique_channel("twice");
  Publisher pub(pub_config(ch));
  try {
    Publisher again(pub_config(ch));
    FAIL("second publisher created");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::rejected);
    REQUIRE_THAT(e.what(), Catch::Contains(std::to_string(::getpid())));
  }
}

TEST_CASE("attachingToAMissingChannelNamesIt") {
  auto cfg = sub_config(unique_channel("missing"));
  try {
    Subscriber s(cfg);
    FAIL("attached to nothing");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::not_found);
    REQUIRE_THAT(e.what(), Catch::Contains(cfg.channel));
  }
}

TEST_CASE("attachWaitsForAPublisherThatStartsLate") {
  const auto ch = unique_channel("wait");
  auto cfg = sub_config(ch);
  cfg.attach_timeout = 5s;
  std::unique_ptr<Publisher> pub;
  std::thread starter([&] {
    std::this_thread::sleep_for(50ms);
    pub = std::make_unique<Publisher>(pub_config(ch));
  });
  Subscriber sub(cfg);
  starter.join();
  REQUIRE(wait_for_subscribers(*pub, 1));
}

TEST_CASE("ringGeometryMismatchIsRejected") {
  const auto ch = unique_channel("geom");
  Publisher pub(pub_config(ch, 64));
  auto cfg = sub_config(ch);
  cfg.ring_capacity = 128;
  REQUIRE_THROWS_AS(Subscriber(cfg), Error);
}

TEST_CASE("badConfigurationNamesTheKey") {
  PublisherConfig c;
  c.ring_capacity = 1000;
  try {
    Publisher p(c);
    FAIL("accepted ring_capacity 1000");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::config_error);
    REQUIRE_THAT(e.what(), Catch::Contains("ring_capacity"));
  }
  c = PublisherConfig{};
  c.channel = "../etc";
  REQUIRE_THROWS_AS(Publisher(c), Error);
  REQUIRE_THROWS_AS(parse_policy("sometimes"), Error);
  REQUIRE(parse_policy("drop") == SlowConsumerPolicy::drop);
  REQUIRE(parse_transport("rc") == TransportKind::rc);
}

TEST_CASE("waitSubscribersServesTheChannelUntilEnoughAreActive") {
  const auto ch = unique_channel("wait-subs");
  Publisher pub(pub_config(ch));
  // Nobody there: bounded, and says how many came.
  CHECK(pub.wait_subscribers(1, 20ms) == 0);
  CHECK(pub.wait_subscribers(0, 10s) == 0);  // already reached

  // Two subscribers attach from other threads while the publisher waits: only its serving
  // (service() inside the wait) makes them active.
  std::vector<std::unique_ptr<Subscriber>> subs(2);
  std::vector<std::thread> attach;
  for (std::size_t i = 0; i < subs.size(); ++i) {
    attach.emplace_back([&, i] {
      std::this_thread::sleep_for(10ms);
      subs[i] = std::make_unique<Subscriber>(sub_config(ch));
    });
  }
  const std::uint32_t have = pub.wait_subscribers(2, 10s);
  for (std::thread& t : attach) t.join();
  REQUIRE(have == 2);
  CHECK(pub.subscriber_count() == 2);
  for (auto& s : subs) CHECK(s->wait_active(1s));
  const std::uint64_t first = pub.next_sequence();
  REQUIRE(pub.publish(payload(7)).ok());
  for (auto& s : subs) {
    const auto got = drain(*s);
    REQUIRE(got.size() == 1);
    CHECK(got[0].seq == first);
  }
}

TEST_CASE("waitSubscribersEndsWhenAskedToStop") {
  const auto ch = unique_channel("wait-stop");
  Publisher pub(pub_config(ch));
  std::atomic<bool> stop{true};
  // A stop already requested ends a wait that would otherwise last an hour.
  CHECK(pub.wait_subscribers(1, std::chrono::hours(1), &stop) == 0);
  stop = false;
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);
    stop = true;
  });
  CHECK(pub.wait_subscribers(1, std::chrono::hours(1), &stop) == 0);
  stopper.join();
}

TEST_CASE("attachTriesAgainWhenThePublisherVanishesDuringTheHandshake") {
  const auto ch = unique_channel("vanish");
  DyingPublisher dying(ch);
  int turned_away = 0;
  std::unique_ptr<Publisher> pub;
  std::thread publisher([&] {
    // Two attempts meet the dying publisher; then a live one takes over the channel.
    while (turned_away < 2 && dying.turn_away()) ++turned_away;
    dying.die();
    pub = std::make_unique<Publisher>(pub_config(ch));
  });
  auto cfg = sub_config(ch);
  cfg.attach_timeout = 20s;
  std::optional<Subscriber> sub;
  std::string failure;
  try {
    sub.emplace(cfg);
  } catch (const Error& e) {
    failure = e.what();
  }
  publisher.join();
  INFO(failure);
  REQUIRE(sub.has_value());
  CHECK(turned_away == 2);
  REQUIRE(pub->wait_subscribers(1, 10s) == 1);
  REQUIRE(sub->wait_active(5s));
  REQUIRE(pub->publish(payload(3)).ok());
  CHECK(drain(*sub).size() == 1);
}

TEST_CASE("attachWithoutATimeoutTriesOnce") {
  const auto ch = unique_channel("vanish-once");
  DyingPublisher dying(ch);
  int turned_away = 0;
  std::thread turner([&] {
    while (dying.turn_away(500)) ++turned_away;
  });
  try {
    Subscriber sub(sub_config(ch));  // attach_timeout 0
    FAIL("attached to a dying publisher");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::peer_gone);
    CHECK_THAT(e.what(), Catch::Contains(ch));
  }
  turner.join();
  CHECK(turned_away == 1);
}

TEST_CASE("attachServesTheCallerBetweenAttempts") {
  // The channel's live publisher starts only from the caller's own work between attempts, as
  // ping-pong's far end publishes only once subscribed to the caller's publisher.
  const auto ch = unique_channel("between");
  DyingPublisher dying(ch);
  std::atomic<bool> stop{false};
  std::thread turner([&] {
    while (!stop) (void)dying.turn_away(10);
  });
  std::unique_ptr<Publisher> pub;
  int calls = 0;
  auto cfg = sub_config(ch);
  cfg.attach_timeout = 20s;
  std::optional<Subscriber> sub;
  std::string failure;
  try {
    sub.emplace(cfg, [&] {
      if (calls++ != 0) return;
      stop = true;
      turner.join();
      dying.die();
      pub = std::make_unique<Publisher>(pub_config(ch));
    });
  } catch (const Error& e) {
    failure = e.what();
  }
  stop = true;
  if (turner.joinable()) turner.join();
  INFO(failure);
  REQUIRE(sub.has_value());
  CHECK(calls >= 1);
  REQUIRE(pub != nullptr);
  REQUIRE(pub->wait_subscribers(1, 10s) == 1);
  REQUIRE(sub->wait_active(5s));
}

TEST_CASE("attachDoesNotWaitOutWhatNoRetryChanges") {
  // A full channel, with an hour to wait: thrown at once.
  const auto ch = unique_channel("full-wait");
  auto pc = pub_config(ch);
  pc.max_subscribers = 1;
  Publisher pub(pc);
  Subscriber a(sub_config(ch));
  auto cfg = sub_config(ch);
  cfg.attach_timeout = std::chrono::hours(1);
  int calls = 0;
  try {
    Subscriber b(cfg, [&] { ++calls; });
    FAIL("attached to a full channel");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::no_capacity);
  }
  CHECK(calls == 0);
}
