#include "tickrail/config.hpp"

#include "tickrail/error.hpp"
#include "tickrail/ring.hpp"

namespace tickrail {
namespace {
[[noreturn]] void bad(std::string_view key, const std::string& why) {
  throw Error(Errc::config_error, std::string(key) + ": " + why);
}
}  // namespace

const char* to_string(TransportKind t) noexcept {
  switch (t) {
    case TransportKind::shm: return "shm";
    case TransportKind::rc: return "rc";
    case TransportKind::ud: return "ud";
  }
  return "unknown";
}

const char* to_string(SlowConsumerPolicy p) noexcept {
  switch (p) {
    case SlowConsumerPolicy::block: return "block";
    case SlowConsumerPolicy::drop: return "drop";
    case SlowConsumerPolicy::disconnect: return "disconnect";
  }
  return "unknown";
}

const char* to_string(RcPolling p) noexcept {
  switch (p) {
    case RcPolling::memory: return "memory";
    case RcPolling::cq: return "cq";
  }
  return "unknown";
}

RcPolling parse_rc_polling(std::string_view s, std::string_view key) {
  if (s == "memory") return RcPolling::memory;
  if (s == "cq") return RcPolling::cq;
  bad(key, "unknown polling mode '" + std::string(s) + "' (expected memory or cq)");
}

TransportKind parse_transport(std::string_view s, std::string_view key) {
  if (s == "shm") return TransportKind::shm;
  if (s == "rc") return TransportKind::rc;
  if (s == "ud") return TransportKind::ud;
  bad(key, "unknown transport '" + std::string(s) + "' (expected shm, rc or ud)");
}

SlowConsumerPolicy parse_policy(std::string_view s, std::string_view key) {
  if (s == "block") return SlowConsumerPolicy::block;
  if (s == "drop") return SlowConsumerPolicy::drop;
  if (s == "disconnect") return SlowConsumerPolicy::disconnect;
  bad(key, "unknown policy '" + std::string(s) + "' (expected block, drop or disconnect)");
}

void PublisherConfig::validate() const {
  if (channel.empty()) bad("channel", "must not be empty");
  if (max_subscribers == 0 || max_subscribers > kMaxSubscribers) {
    bad("max_subscribers", std::to_string(max_subscribers) + " is outside 1.." +
                               std::to_string(kMaxSubscribers));
  }
  if (!is_valid_ring_capacity(ring_capacity)) {
    bad("ring_capacity", std::to_string(ring_capacity) + " is not a power of two from 2 to 2^30");
  }
  if (conductor_period.count() <= 0 || conductor_period.count() > 1000) {
    bad("conductor_period_ms", std::to_string(conductor_period.count()) + " is outside 1..1000");
  }
  if (shm_dir.empty()) bad("shm_dir", "must not be empty");
}

void SubscriberConfig::validate() const {
  if (channel.empty()) bad("channel", "must not be empty");
  if (ring_capacity != 0 && !is_valid_ring_capacity(ring_capacity)) {
    bad("ring_capacity", std::to_string(ring_capacity) + " is not 0 or a power of two from 2 to 2^30");
  }
  if (disconnect_after.count() <= 0) bad("disconnect_after_ms", "must be positive");
  if (attach_timeout.count() < 0) bad("attach_timeout_ms", "must not be negative");
  if (publisher_timeout.count() <= 0) bad("publisher_timeout_ms", "must be positive");
  if (shm_dir.empty()) bad("shm_dir", "must not be empty");
}

}  // namespace tickrail
