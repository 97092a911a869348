// One publisher, several subscriber threads, millions of ticks: every tick arrives exactly once,
// in order, intact (block); received + lost equals published (drop).
// TICKRAIL_STRESS_TICKS overrides the count (sanitizer builds use fewer).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <thread>
#include <vector>

#include "shm_test_util.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

std::uint64_t stress_ticks() {
  if (const char* e = std::getenv("TICKRAIL_STRESS_TICKS")) return std::strtoull(e, nullptr, 10);
  return 10'000'000;
}

struct Result {
  std::uint64_t received = 0;
  std::uint64_t lost = 0;
  std::uint64_t disorder = 0;
  std::uint64_t corrupt = 0;
  std::uint64_t last_order_ref = 0;
};

void run(SlowConsumerPolicy policy, int n_subs, std::uint64_t total) {
  const auto ch = unique_channel("stress");
  PublisherConfig pc;
  pc.channel = ch;
  pc.ring_capacity = 1024;
  pc.max_subscribers = 8;
  Publisher pub(pc);

  std::vector<std::unique_ptr<Subscriber>> subs;
  for (int i = 0; i < n_subs; ++i) {
    SubscriberConfig sc;
    sc.channel = ch;
    sc.policy = policy;
    subs.push_back(std::make_unique<Subscriber>(sc));
  }
  REQUIRE(wait_for_subscribers(pub, static_cast<std::uint32_t>(n_subs)));
  const std::uint64_t first = pub.next_sequence();

  std::atomic<bool> done{false};
  std::vector<Result> results(static_cast<std::size_t>(n_subs));
  std::vector<std::thread> threads;
  for (int i = 0; i < n_subs; ++i) {
    threads.emplace_back([&, i] {
      Subscriber& s = *subs[static_cast<std::size_t>(i)];
      Result& r = results[static_cast<std::size_t>(i)];
      std::uint64_t expect = first;
      IdleStrategy idle(IdleKind::backoff);
      for (;;) {
        const auto n = s.poll([&](const Tick& t) {
          if (policy == SlowConsumerPolicy::block ? t.seq != expect : t.seq < expect) ++r.disorder;
          if (!payload_ok(t) || t.order_ref != t.seq - first) ++r.corrupt;
          expect = t.seq + 1;
        }, 512);
        idle.idle(static_cast<int>(n));
        if (n == 0 && done.load(std::memory_order_acquire)) {
          if (s.poll([&](const Tick& t) {
                if (t.seq < expect) ++r.disorder;
                if (!payload_ok(t)) ++r.corrupt;
                expect = t.seq + 1;
              }, 1 << 20) == 0) {
            break;
          }
        }
      }
      r.received = s.counters().received;
      r.lost = s.counters().lost;
    });
  }

  std::vector<Tick> batch(64);
  std::uint64_t sent = 0;
  IdleStrategy idle(IdleKind::backoff);
  const auto deadline = std::chrono::steady_clock::now() + 600s;
  while (sent < total && std::chrono::steady_clock::now() < deadline) {
    const std::uint64_t k = std::min<std::uint64_t>(batch.size(), total - sent);
    for (std::uint64_t j = 0; j < k; ++j) batch[j] = payload(sent + j);
    std::uint64_t off = 0;
    while (off < k) {
      const auto r = pub.publish(std::span<const Tick>(batch.data() + off, k - off));
      off += r.published;
      idle.idle(static_cast<int>(r.published));
    }
    sent += k;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();

  REQUIRE(sent == total);
  for (const auto& r : results) {
    CHECK(r.disorder == 0);
    CHECK(r.corrupt == 0);
    if (policy == SlowConsumerPolicy::block) {
      CHECK(r.received == total);
      CHECK(r.lost == 0);
    } else {
      CHECK(r.received + r.lost == total);
    }
  }
}

}  // namespace

TEST_CASE("blockDeliversEveryTickExactlyOnceInOrderToEverySubscriber") {
  run(SlowConsumerPolicy::block, 3, stress_ticks());
}

TEST_CASE("dropAccountsForEveryTickAsReceivedOrLost") {
  run(SlowConsumerPolicy::drop, 3, stress_ticks() / 2);
}
