// CloseGuard (the RC publisher's guard of publish() against close() from another thread): once
// close() returns, no data-path call is running and none starts again, and what the data path
// wrote is visible to the closer. `touched` is a plain variable on purpose: under TSan
// (scripts/test runs this test there) a close() that did not wait would be a reported race.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "transport/rdma/common/close_guard.hpp"

using tickrail::rdma::CloseGuard;

namespace {

constexpr int kRounds = 300;
constexpr std::uint64_t kMaxCalls = 50'000'000;  // bounds a data path that never sees close()

// Spins (bounded) until `flag` is set.
bool wait_for(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!flag.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_CASE("closeWaitsForTheCallInProgressAndNoCallStartsAfter") {
  for (int round = 0; round < kRounds; ++round) {
    CloseGuard guard;
    std::uint64_t touched = 0;  // data-path state: the publishing thread's until close()
    std::atomic<bool> running{false};
    std::jthread data_path([&] {
      for (std::uint64_t i = 0; i < kMaxCalls; ++i) {
        if (!guard.enter()) return;
        ++touched;
        running.store(true, std::memory_order_release);
        guard.leave();
      }
    });
    REQUIRE(wait_for(running));
    if (round % 2 == 1) std::this_thread::yield();  // close at other points of the loop too
    REQUIRE(guard.close());
    // The data path is ours now: it must not move under us.
    const std::uint64_t seen = touched;
    touched += 1000;
    data_path.join();
    REQUIRE(touched == seen + 1000);
    REQUIRE(seen < kMaxCalls);  // the data path stopped because of close(), not the bound
    REQUIRE_FALSE(guard.enter());
    REQUIRE_FALSE(guard.close());
    REQUIRE(guard.closing());
  }
}

TEST_CASE("closeWithNoCallInProgressReturnsAtOnceOnAnyThread") {
  CloseGuard guard;
  REQUIRE_FALSE(guard.closing());
  REQUIRE(guard.enter());
  guard.leave();
  REQUIRE(guard.close());  // the publishing thread itself, between calls
  REQUIRE_FALSE(guard.enter());

  CloseGuard other;
  std::atomic<bool> closed{false};
  std::jthread closer([&] { closed.store(other.close(), std::memory_order_release); });
  closer.join();
  REQUIRE(closed.load());
  REQUIRE_FALSE(other.enter());
}
