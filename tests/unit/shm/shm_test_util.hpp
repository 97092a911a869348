// Helpers shared by the shared-memory tests.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/stats.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::test {

inline std::string unique_channel(const std::string& base) {
  static std::atomic<int> n{0};
  return "test-" + base + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

// A process killed on purpose leaves its counters file behind (kept for tickrail-stat, which
// shows a dead process's last counters until --remove-dead): the tests remove their own.
inline void remove_counters_file(pid_t pid) { ::unlink(stats::stat_path(stats::stat_dir(), pid).c_str()); }

// Serves `pub` until it serves exactly `want` subscribers (activation and reclaiming happen on
// the publishing thread), bounded by `timeout`.
inline bool wait_for_subscribers(Publisher& pub, std::uint32_t want,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Down to `want` first, as subscribers leave; then up to it.
  for (pub.service(); pub.subscriber_count() > want; pub.service()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return pub.wait_subscribers(want, std::max(left, std::chrono::milliseconds(0))) == want;
}

// Polls until `pred()` or the timeout; returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

inline Tick payload(std::uint64_t i, std::uint32_t producer = 0) {
  Tick t{};
  t.order_ref = i;
  t.instrument = producer;
  t.aux = (i + 1) * 0x9E3779B97F4A7C15ULL ^ producer;
  t.price = static_cast<std::int64_t>(i % 1000000) * 100;
  t.kind = TickKind::Add;
  return t;
}

inline bool payload_ok(const Tick& t) {
  return t.aux == ((t.order_ref + 1) * 0x9E3779B97F4A7C15ULL ^ t.instrument) &&
         t.price == static_cast<std::int64_t>(t.order_ref % 1000000) * 100 && t.kind == TickKind::Add;
}

}  // namespace tickrail::test
