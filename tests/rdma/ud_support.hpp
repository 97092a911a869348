// Shared by the UD rig tests: configurations on the rig's device, ticks whose content follows
// from their sequence (so a receiver can check every byte), and bounded polling.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "rig_env.hpp"
#include "tickrail/config.hpp"
#include "tickrail/tick.hpp"

namespace tickrail::rdma::test {

inline constexpr const char* kUdGroup = "239.7.7.1";

// The tick published as the i-th (1-based: its sequence will be i for a fresh publisher).
inline Tick ud_tick(std::uint64_t i) {
  Tick t{};
  t.exch_ts = i * 1000;
  t.order_ref = i ^ 0x5eed5eed5eedULL;
  t.price = static_cast<std::int64_t>(i) * 3;
  t.qty = static_cast<std::uint32_t>(i % 997);
  t.instrument = static_cast<std::uint32_t>(i % 31);
  t.kind = TickKind::Add;
  t.side = (i & 1) != 0 ? Side::Buy : Side::Sell;
  // Every third with kTickFromTable set, as a careless or lying publisher would: the subscriber
  // must clear it, on the direct path and through the reorder window and recovery alike.
  t.flags = static_cast<std::uint16_t>(i % 3 == 0 ? kTickFromTable | 0x41 : 0x41);
  return t;
}

// True when `t` carries what ud_tick(t.seq) put there.
inline bool ud_tick_ok(const Tick& t) {
  const Tick want = ud_tick(t.seq);
  return t.exch_ts == want.exch_ts && t.order_ref == want.order_ref && t.price == want.price &&
         t.qty == want.qty && t.instrument == want.instrument && t.kind == want.kind &&
         t.side == want.side && t.flags == (want.flags & ~kTickFromTable);
}

inline PublisherConfig ud_publisher_config(const std::string& group = kUdGroup,
                                           std::uint16_t port = 7480) {
  PublisherConfig c;
  c.transport = TransportKind::ud;
  c.rdma.device = device();
  c.rdma.address = address(c.rdma.device);
  c.rdma.port = port;
  c.rdma.groups = {group};
  return c;
}

inline SubscriberConfig ud_subscriber_config(const std::string& group = kUdGroup) {
  SubscriberConfig c;
  c.transport = TransportKind::ud;
  c.rdma.device = device();
  c.rdma.groups = {group};
  return c;
}

// Calls step() until done() or `timeout` passes; returns done().
inline bool poll_until(const std::function<bool()>& done, const std::function<void()>& step,
                       std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    step();
  }
  return true;
}

}  // namespace tickrail::rdma::test
