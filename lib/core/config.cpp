#include "tickrail/config.hpp"

#include "tickrail/affinity.hpp"
#include "tickrail/error.hpp"
#include "tickrail/failover.hpp"
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
  if (prefetch_ahead > 1024) bad("prefetch_ahead", std::to_string(prefetch_ahead) + " is outside 0..1024");
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

// FailoverConfig (failover.hpp): with the other configs, so that a config file reader
// validates it without the transports.
namespace {

// Do two line configs name one source? What tells sources apart depends on the transport: a
// shm channel lives in its shm_dir; an RC publisher is an address and port; a UD line is its
// groups on a device (two NICs on one group are two lines).
bool same_source(const SubscriberConfig& a, const SubscriberConfig& b) {
  if (a.transport != b.transport || a.channel != b.channel) return false;
  switch (a.transport) {
    case TransportKind::shm: return a.shm_dir == b.shm_dir;
    case TransportKind::rc:
      return a.rdma.address == b.rdma.address && a.rdma.port == b.rdma.port && a.rdma.device == b.rdma.device;
    case TransportKind::ud: return a.rdma.groups == b.rdma.groups && a.rdma.device == b.rdma.device;
  }
  return false;
}

}  // namespace

void FailoverConfig::validate_settings() const {
  if (window < 2 || window > (1u << 20) || (window & (window - 1)) != 0) {
    throw Error(Errc::config_error, "failover window: " + std::to_string(window) +
                                        " is not a power of two in 2..1048576");
  }
  if (hole_timeout.count() <= 0 || hole_timeout > std::chrono::seconds(10)) {
    throw Error(Errc::config_error, "failover hole_timeout: " + std::to_string(hole_timeout.count()) +
                                        " us is outside 1 us..10 s");
  }
  if (reattach_every.count() <= 0 || reattach_every > std::chrono::minutes(1)) {
    throw Error(Errc::config_error, "failover reattach_every: " + std::to_string(reattach_every.count()) +
                                        " ms is outside 1 ms..1 min");
  }
  if (recovery_delay.count() < 0 || recovery_delay > std::chrono::milliseconds(500)) {
    throw Error(Errc::config_error, "failover recovery_delay: " + std::to_string(recovery_delay.count()) +
                                        " us is outside 0..500000 (0.5 s)");
  }
}

std::chrono::microseconds FailoverConfig::line_recovery_delay(int i) const noexcept {
  const auto own = line[i & 1].rdma.recovery_delay;
  if (own.count() != 0) return own;
  return (i & 1) == 0 ? recovery_delay : 2 * line_recovery_delay(0);
}

void FailoverConfig::validate() const {
  validate_settings();
  for (int i = 0; i < 2; ++i) {
    const std::string name = std::string("failover line ") + (i == 0 ? "A" : "B") + " ('" + line[i].channel + "')";
    try {
      line[i].validate();
    } catch (const Error& e) {
      throw Error(e.code(), name + ": " + e.what());
    }
    // Table ticks carry their entries' sequences, not the stream's: they cannot be arbitrated.
    if (line[i].start == StartMode::snapshot || line[i].policy == SlowConsumerPolicy::conflate) {
      throw Error(Errc::config_error, name + ": start snapshot and policy conflate do not apply to failover lines");
    }
    if (line[i].transport != TransportKind::ud) continue;
    // Several groups are several streams, each with its own sequence: a line carries one.
    if (line[i].rdma.groups.size() != 1) {
      throw Error(Errc::config_error, name + ": a UD line joins one group (" +
                                          std::to_string(line[i].rdma.groups.size()) + " given)");
    }
    // A hole given up before the line's read has had its time (the delay, then the read) is
    // lost for nothing.
    if (hole_timeout < 2 * line_recovery_delay(i)) {
      throw Error(Errc::config_error, name + ": the failover hole_timeout (" + std::to_string(hole_timeout.count()) +
                                          " us) must be at least twice its recovery delay (" +
                                          std::to_string(line_recovery_delay(i).count()) + " us)");
    }
  }
  // With equal delays both lines would read each tick they both lost.
  if (line[0].transport == TransportKind::ud && line[1].transport == TransportKind::ud &&
      line_recovery_delay(1) <= line_recovery_delay(0)) {
    throw Error(Errc::config_error, "failover line B ('" + line[1].channel + "'): its recovery delay (" +
                                        std::to_string(line_recovery_delay(1).count()) +
                                        " us) must be longer than line A's (" +
                                        std::to_string(line_recovery_delay(0).count()) + " us)");
  }
  if (same_source(line[0], line[1])) {
    throw Error(Errc::config_error, "failover lines: line B is line A ('" + line[0].channel +
                                        "'): give line B another channel, address or group");
  }
}


}  // namespace tickrail
