#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "shm_test_util.hpp"
#include "tickrail/error.hpp"
#include "tickrail/threaded_publisher.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

TEST_CASE("threadedPublisherForwardsEveryProducersTicksInProducerOrder") {
  const auto ch = unique_channel("threaded");
  PublisherConfig pc;
  pc.channel = ch;
  pc.ring_capacity = 256;
  ThreadedPublisherOptions opt;
  opt.queue_capacity = 128;
  opt.idle = IdleKind::backoff;
  ThreadedPublisher tp(pc, opt);

  SubscriberConfig sc;
  sc.channel = ch;
  Subscriber sub(sc);
  REQUIRE(sub.wait_active(5s));

  constexpr std::uint32_t kProducers = 3;
  constexpr std::uint64_t kEach = 50'000;
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    auto& prod = tp.add_producer();
    producers.emplace_back([&prod, p] {
      for (std::uint64_t i = 0; i < kEach;) {
        if (prod.offer(payload(i, p))) {
          ++i;
        } else {
          std::this_thread::yield();
        }
      }
    });
  }

  std::vector<std::uint64_t> next(kProducers, 0);
  std::uint64_t received = 0;
  std::uint64_t bad = 0;
  std::uint64_t last_seq = 0;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (received < kProducers * kEach && std::chrono::steady_clock::now() < deadline) {
    const auto n = sub.poll([&](const Tick& t) {
      if (t.instrument >= kProducers || t.order_ref != next[t.instrument] || !payload_ok(t) ||
          (last_seq != 0 && t.seq != last_seq + 1)) {
        ++bad;
      }
      if (t.instrument < kProducers) next[t.instrument] = t.order_ref + 1;
      last_seq = t.seq;
    });
    received += n;
    if (n == 0) std::this_thread::yield();
  }
  for (auto& t : producers) t.join();
  tp.stop();
  REQUIRE(bad == 0);
  REQUIRE(received == kProducers * kEach);
  REQUIRE(tp.counters().forwarded == kProducers * kEach);
  REQUIRE(tp.counters().abandoned == 0);
}

TEST_CASE("threadedPublisherRefusesProducersPastItsLimit") {
  PublisherConfig pc;
  pc.channel = unique_channel("threaded-limit");
  ThreadedPublisherOptions opt;
  opt.max_producers = 1;
  opt.idle = IdleKind::backoff;
  ThreadedPublisher tp(pc, opt);
  (void)tp.add_producer();
  REQUIRE_THROWS_AS(tp.add_producer(), Error);
}
