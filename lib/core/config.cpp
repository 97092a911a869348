#include "tickrail/config.hpp"

#include "tickrail/affinity.hpp"
#include "tickrail/error.hpp"
#include "tickrail/ring.hpp"
#include "core/enum_names.hpp"

namespace tickrail {
namespace {
[[noreturn]] void bad(std::string_view key, const std::string& why) {
  throw Error(Errc::config_error, std::string(key) + ": " + why);
}
// A duration key: from `min` (0 or 1 of its unit) up to kMaxDuration.
template <class Rep, class Period>
void check_duration(std::string_view key, std::chrono::duration<Rep, Period> d, Rep min) {
  const auto max = std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(kMaxDuration);
  if (d.count() < min || d > max) {
    bad(key, std::to_string(d.count()) + " is outside " + std::to_string(min) + ".." +
                 std::to_string(max.count()) + " (24 h)");
  }
}
// Its form only: whether the cpus exist here is checked when an endpoint starts its threads.
void validate_housekeeping_cpus(std::string_view text) {
  try {
    (void)parse_cpu_list(text);
  } catch (const Error&) {
    bad("housekeeping_cpus", "'" + std::string(text) + "' is not a cpu list like 2-3,6");
  }
}
}  // namespace

void validate_duration(std::string_view key, std::chrono::milliseconds d, std::int64_t min) {
  check_duration(key, d, static_cast<std::chrono::milliseconds::rep>(min));
}

constexpr detail::EnumName<TransportKind> kTransportNames[] = {
    {TransportKind::shm, "shm"}, {TransportKind::rc, "rc"}, {TransportKind::ud, "ud"}};
constexpr detail::EnumName<SlowConsumerPolicy> kPolicyNames[] = {
    {SlowConsumerPolicy::block, "block"},
    {SlowConsumerPolicy::drop, "drop"},
    {SlowConsumerPolicy::disconnect, "disconnect"},
    {SlowConsumerPolicy::conflate, "conflate"}};
constexpr detail::EnumName<StartMode> kStartNames[] = {{StartMode::live, "live"},
                                                       {StartMode::snapshot, "snapshot"}};
constexpr detail::EnumName<RcPolling> kPollingNames[] = {{RcPolling::memory, "memory"},
                                                         {RcPolling::cq, "cq"}};

const char* to_string(TransportKind t) noexcept { return detail::name_of(kTransportNames, t); }
const char* to_string(SlowConsumerPolicy p) noexcept { return detail::name_of(kPolicyNames, p); }
const char* to_string(RcPolling p) noexcept { return detail::name_of(kPollingNames, p); }
const char* to_string(StartMode m) noexcept { return detail::name_of(kStartNames, m); }

StartMode parse_start_mode(std::string_view s, std::string_view key) {
  if (const auto v = detail::value_of(kStartNames, s)) return *v;
  bad(key, "unknown start mode '" + std::string(s) + "' (expected live or snapshot)");
}

void StateConfig::validate() const {
  if (!enabled) return;
  if (capacity == 0 || capacity > kMaxStateCapacity) {
    bad("state.capacity", std::to_string(capacity) + " is outside 1.." + std::to_string(kMaxStateCapacity));
  }
  if (!quote && !trade && !status) bad("state", "enabled with no class kept (quote, trade, status)");
}

RcPolling parse_rc_polling(std::string_view s, std::string_view key) {
  if (const auto v = detail::value_of(kPollingNames, s)) return *v;
  bad(key, "unknown polling mode '" + std::string(s) + "' (expected memory or cq)");
}

TransportKind parse_transport(std::string_view s, std::string_view key) {
  if (const auto v = detail::value_of(kTransportNames, s)) return *v;
  bad(key, "unknown transport '" + std::string(s) + "' (expected shm, rc or ud)");
}

SlowConsumerPolicy parse_policy(std::string_view s, std::string_view key) {
  if (const auto v = detail::value_of(kPolicyNames, s)) return *v;
  bad(key, "unknown policy '" + std::string(s) + "' (expected block, drop, disconnect or conflate)");
}

void RdmaConfig::validate() const {
  check_duration("rdma.connect_timeout_ms", connect_timeout, std::int64_t{1});
  check_duration("rdma.heartbeat_interval_ms", heartbeat_interval, std::int64_t{1});
  // A partial datagram waits at most this long: a second is already far beyond any use.
  if (batch_delay.count() < 0 || batch_delay > std::chrono::seconds(1)) {
    bad("rdma.batch_delay_ns", std::to_string(batch_delay.count()) + " is outside 0..1000000000 (1 s)");
  }
  if (recovery_delay.count() < 0 || recovery_delay > std::chrono::seconds(1)) {
    bad("rdma.recovery_delay_us", std::to_string(recovery_delay.count()) + " is outside 0..1000000 (1 s)");
  }
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
  validate_housekeeping_cpus(housekeeping_cpus);
  state.validate();
  rdma.validate();
}

void SubscriberConfig::validate() const {
  if (channel.empty()) bad("channel", "must not be empty");
  if (ring_capacity != 0 && !is_valid_ring_capacity(ring_capacity)) {
    bad("ring_capacity", std::to_string(ring_capacity) + " is not 0 or a power of two from 2 to 2^30");
  }
  check_duration("disconnect_after_ms", disconnect_after, std::int64_t{1});
  check_duration("attach_timeout_ms", attach_timeout, std::int64_t{0});
  check_duration("publisher_timeout_ms", publisher_timeout, std::int64_t{1});
  if (shm_dir.empty()) bad("shm_dir", "must not be empty");
  validate_housekeeping_cpus(housekeeping_cpus);
  rdma.validate();
}

}  // namespace tickrail
