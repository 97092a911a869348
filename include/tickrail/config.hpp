// Typed configuration of publishers and subscribers, built in code or loaded from TOML.
//
// Every field has a default that works on one host with shared memory; a value that can never
// work is rejected by validate() (and so by the Publisher/Subscriber constructors) with
// Errc::config_error naming the key.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tickrail/idle.hpp"

namespace tickrail {

enum class TransportKind : std::uint8_t { shm, rc, ud };

// What the publisher does when this subscriber's ring is full.
enum class SlowConsumerPolicy : std::uint8_t {
  block,       // never overwrite unconsumed ticks: publish reports back-pressure for everyone
  drop,        // never wait: the subscriber is lapped and counts exactly what it lost
  disconnect,  // as block, until the ring has stayed full for disconnect_after: then evict it
};

[[nodiscard]] const char* to_string(TransportKind t) noexcept;
[[nodiscard]] const char* to_string(SlowConsumerPolicy p) noexcept;
// Throw Errc::config_error naming `key` and the accepted values.
[[nodiscard]] TransportKind parse_transport(std::string_view s, std::string_view key = "transport");
[[nodiscard]] SlowConsumerPolicy parse_policy(std::string_view s, std::string_view key = "policy");

inline constexpr std::uint32_t kMaxSubscribers = 64;

struct PublisherConfig {
  TransportKind transport = TransportKind::shm;
  std::string channel = "tickrail";  // shm: the segment /dev/shm/tickrail.<channel>
  std::uint32_t max_subscribers = 8;          // 1..kMaxSubscribers
  std::uint32_t ring_capacity = 16384;        // slots per subscriber ring, power of two
  bool stamp_send_time = true;                // overwrite Tick::send_ts with Clock::now()
  bool lock_memory = false;                   // mlock the rings (needs RLIMIT_MEMLOCK)
  std::chrono::milliseconds conductor_period{5};  // liveness checks, heartbeats
  std::string shm_dir = "/dev/shm";

  void validate() const;  // throws Error(config_error)
};

struct SubscriberConfig {
  TransportKind transport = TransportKind::shm;
  std::string channel = "tickrail";
  SlowConsumerPolicy policy = SlowConsumerPolicy::block;
  std::chrono::milliseconds disconnect_after{1000};  // policy = disconnect
  std::chrono::milliseconds attach_timeout{0};  // wait this long for the channel to appear
  std::chrono::milliseconds publisher_timeout{1000};  // silence after which the publisher is gone
  std::uint32_t ring_capacity = 0;  // 0: accept the channel's; else must match it
  bool lock_memory = false;
  IdleKind idle = IdleKind::busy_spin;  // for the library's own waits (wait_active)
  std::string shm_dir = "/dev/shm";

  void validate() const;
};

}  // namespace tickrail
