#include "transport/rdma/ud/settings.hpp"

#include <bit>
#include <string>

#include "tickrail/error.hpp"
#include "transport/rdma/ud/recovery_protocol.hpp"

namespace tickrail::rdma::ud {
namespace {

// The checks of one end's settings.
struct Checks {
  std::string_view end;

  [[noreturn]] void bad(std::string_view key, const std::string& why) const {
    bad_setting(end, key, why);
  }
  void transport(TransportKind t) const {
    if (t != TransportKind::ud) bad("transport", "not ud");
  }
  // The recovery link's: the token fits a request, the connect timeout is positive.
  void recovery(const RdmaConfig& r) const {
    if (r.token.size() > kMaxTokenBytes) {
      bad("token", "at most " + std::to_string(kMaxTokenBytes) + " bytes");
    }
    if (r.connect_timeout.count() <= 0) bad("connect_timeout_ms", "must be positive");
  }
};

}  // namespace

void bad_setting(std::string_view end, std::string_view key, std::string_view why) {
  throw Error(Errc::config_error,
              std::string(end) + ": rdma." + std::string(key) + ": " + std::string(why));
}

const PublisherConfig& validated(const PublisherConfig& c) {
  const Checks check{"UD publisher"};
  check.transport(c.transport);
  const RdmaConfig& r = c.rdma;
  if (r.address.empty()) {
    check.bad("address", "must be set: the publisher's address on its RDMA device (multicast is "
                         "sent from it, recovery is served on it)");
  }
  if (r.groups.size() != 1) {
    check.bad("groups", "a UD publisher sends to exactly one group (" +
                            std::to_string(r.groups.size()) + " given); run one publisher per group");
  }
  if (r.history < 2 || !std::has_single_bit(r.history) || r.history > (1u << 26)) {
    check.bad("history", std::to_string(r.history) + " is not a power of two from 2 to 2^26");
  }
  if (r.max_ticks_per_datagram == 0) check.bad("max_ticks_per_datagram", "must be at least 1");
  if (r.heartbeat_interval.count() <= 0) check.bad("heartbeat_interval_ms", "must be positive");
  if (r.batch_delay.count() < 0) check.bad("batch_delay_ns", "must not be negative");
  check.recovery(r);
  return c;
}

const SubscriberConfig& validated(const SubscriberConfig& c) {
  const Checks check{"UD subscriber"};
  check.transport(c.transport);
  const RdmaConfig& r = c.rdma;
  if (r.groups.empty()) check.bad("groups", "at least one multicast group is needed");
  if (r.groups.size() > 64) check.bad("groups", "at most 64 groups per subscriber");
  if ((c.start == StartMode::snapshot || c.policy == SlowConsumerPolicy::conflate) && r.groups.size() != 1) {
    check.bad("groups", std::string(c.start == StartMode::snapshot ? "start = snapshot" : "policy = conflate") +
                            " reads one stream's last-value table: give exactly one group (" +
                            std::to_string(r.groups.size()) + " given)");
  }
  if (r.recv_buffers < 16 || r.recv_buffers > 65536) {
    check.bad("recv_buffers", std::to_string(r.recv_buffers) + " is outside 16..65536");
  }
  if (r.reorder_buffer < 16 || !std::has_single_bit(r.reorder_buffer) ||
      r.reorder_buffer > (1u << 24)) {
    check.bad("reorder_buffer",
              std::to_string(r.reorder_buffer) + " is not a power of two from 16 to 2^24");
  }
  check.recovery(r);
  return c;
}

}  // namespace tickrail::rdma::ud
