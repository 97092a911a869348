#include "transport/rdma/rc/protocol.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/enum_names.hpp"

namespace tickrail::rdma::rc {
namespace {

std::uint64_t fnv1a(std::string_view domain, std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::string_view part) {
    for (const char c : part) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ULL;
    }
  };
  mix(domain);
  h ^= 0xff;  // separator: ("ab","c") and ("a","bc") differ
  h *= 0x100000001b3ULL;
  mix(s);
  // splitmix64's finalizer: FNV's low bits alone mix poorly.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

template <class T>
std::optional<T> decode(std::span<const std::byte> data) noexcept {
  if (data.size() < sizeof(T)) return std::nullopt;
  T v;
  std::memcpy(&v, data.data(), sizeof v);
  if (v.magic != kMagic) return std::nullopt;
  return v;
}

}  // namespace

namespace {
constexpr tickrail::detail::EnumName<WriteMode> kWriteModeNames[] = {
    {WriteMode::memory, "memory polling"},
    {WriteMode::memory_split, "memory polling, commit word in a second WRITE"},
    {WriteMode::cq, "CQ polling (WRITE WITH IMMEDIATE)"}};
constexpr tickrail::detail::EnumName<RejectReason> kRejectNames[] = {
    {RejectReason::malformed, "malformed request"},
    {RejectReason::version_mismatch, "protocol version mismatch"},
    {RejectReason::wrong_channel, "wrong channel"}, {RejectReason::bad_token, "wrong access token"},
    {RejectReason::not_allowed, "address not allowed"},
    {RejectReason::bad_geometry, "ring geometry refused"},
    {RejectReason::no_capacity, "no room for another subscriber"},
    {RejectReason::resources, "publisher out of resources"},
    {RejectReason::closing, "publisher closing"}, {RejectReason::not_serving, "publisher not serving"},
    {RejectReason::no_table, "no last-value table"}};
}  // namespace

const char* to_string(WriteMode m) noexcept { return tickrail::detail::name_of(kWriteModeNames, m); }
const char* to_string(RejectReason r) noexcept {
  return tickrail::detail::name_of(kRejectNames, r, "unknown reason");
}

Errc reject_errc(RejectReason r) noexcept {
  switch (r) {
    case RejectReason::version_mismatch: return Errc::version_mismatch;
    case RejectReason::bad_geometry: return Errc::geometry_mismatch;
    case RejectReason::no_capacity: return Errc::no_capacity;
    case RejectReason::resources: return Errc::rejected;
    case RejectReason::no_table: return Errc::unsupported;
    default: return Errc::rejected;
  }
}

std::uint64_t channel_hash(std::string_view channel) noexcept {
  return fnv1a("tickrail.rc.channel", channel);
}

std::uint64_t token_hash(std::string_view token) noexcept {
  if (token.empty()) return 0;
  const std::uint64_t h = fnv1a("tickrail.rc.token", token);
  return h != 0 ? h : 1;
}

ConnectRequest make_request(const SubscriberConfig& config, WriteMode mode,
                            std::uint64_t capacity, std::uint64_t region_addr,
                            std::uint32_t rkey) {
  ConnectRequest r{};
  r.magic = kMagic;
  r.version = kVersion;
  r.policy = static_cast<std::uint8_t>(config.policy);
  r.mode = static_cast<std::uint8_t>(mode);
  r.capacity_log2 = static_cast<std::uint8_t>(std::countr_zero(capacity));
  const bool table = config.start == StartMode::snapshot || config.policy == SlowConsumerPolicy::conflate;
  r.flags = table ? kWantsTable : 0;
  r.rkey = rkey;
  r.region_addr = region_addr;
  r.channel_hash = channel_hash(config.channel);
  r.token_hash = token_hash(config.rdma.token);
  const auto ms = std::clamp<std::chrono::milliseconds::rep>(config.disconnect_after.count(), 1,
                                                             0xffffffff);
  r.disconnect_after_ms = static_cast<std::uint32_t>(ms);
  return r;
}

std::optional<ConnectRequest> decode_request(std::span<const std::byte> data) noexcept {
  return decode<ConnectRequest>(data);
}
std::optional<AcceptReply> decode_accept(std::span<const std::byte> data) noexcept {
  return decode<AcceptReply>(data);
}
std::optional<RejectNote> decode_reject(std::span<const std::byte> data) noexcept {
  auto r = decode<RejectNote>(data);
  if (r) r->text[sizeof r->text - 1] = '\0';
  return r;
}

RejectNote make_reject(RejectReason reason, std::uint64_t detail, std::string_view text) {
  RejectNote n{};
  n.magic = kMagic;
  n.version = kVersion;
  n.reason = static_cast<std::uint16_t>(reason);
  n.detail = detail;
  const std::size_t len = std::min(text.size(), sizeof n.text - 1);
  std::memcpy(n.text, text.data(), len);
  n.text[len] = '\0';
  return n;
}

std::optional<RejectNote> judge(const ConnectRequest& req, const ServeTerms& terms) {
  // The version first: a request of another version may lay out everything after it differently.
  if (req.version != kVersion) {
    return make_reject(RejectReason::version_mismatch, kVersion,
                       "the publisher speaks RC protocol version " + std::to_string(kVersion) +
                           ", the subscriber version " + std::to_string(req.version));
  }
  if (req.channel_hash != terms.channel_hash) {
    return make_reject(RejectReason::wrong_channel, 0,
                       "this publisher serves channel '" + terms.channel.substr(0, 64) +
                           "', not the one asked for");
  }
  if (terms.token_hash != 0 && req.token_hash != terms.token_hash) {
    return make_reject(RejectReason::bad_token, 0,
                       req.token_hash == 0 ? "an access token is required and none was given"
                                           : "the access token does not match");
  }
  if (req.capacity_log2 < kMinCapacityLog2 || req.capacity_log2 > kMaxCapacityLog2) {
    return make_reject(RejectReason::bad_geometry, terms.max_capacity,
                       "absurd ring of 2^" + std::to_string(req.capacity_log2) +
                           " slots (accepted: 2 to " + std::to_string(terms.max_capacity) + ")");
  }
  const std::uint64_t capacity = std::uint64_t{1} << req.capacity_log2;
  if (capacity > terms.max_capacity) {
    return make_reject(RejectReason::bad_geometry, terms.max_capacity,
                       "ring of " + std::to_string(capacity) +
                           " slots is larger than the publisher's ring_capacity " +
                           std::to_string(terms.max_capacity));
  }
  const std::uint64_t bytes = region_bytes(capacity);
  if (req.region_addr == 0 || req.region_addr % kCacheLine != 0 ||
      req.region_addr > ~std::uint64_t{0} - bytes) {
    return make_reject(RejectReason::bad_geometry, terms.max_capacity,
                       "ring region address is not a usable cache-line-aligned range");
  }
  if (req.policy > static_cast<std::uint8_t>(SlowConsumerPolicy::conflate)) {
    return make_reject(RejectReason::malformed, 0,
                       "unknown slow-consumer policy " + std::to_string(req.policy));
  }
  if (req.mode < static_cast<std::uint8_t>(WriteMode::memory) ||
      req.mode > static_cast<std::uint8_t>(WriteMode::cq)) {
    return make_reject(RejectReason::malformed, 0, "unknown write mode " + std::to_string(req.mode));
  }
  if ((req.flags & ~kWantsTable) != 0) {
    return make_reject(RejectReason::malformed, 0, "unknown request flags " + std::to_string(req.flags));
  }
  const bool conflate = req.policy == static_cast<std::uint8_t>(SlowConsumerPolicy::conflate);
  if ((conflate || (req.flags & kWantsTable) != 0) && terms.table.capacity == 0) {
    return make_reject(RejectReason::no_table, 0,
                       std::string(conflate ? "policy = conflate" : "start = snapshot") +
                           " needs the channel's last-value table, and channel '" +
                           terms.channel.substr(0, 32) + "' keeps none ([state] enabled = false)");
  }
  return std::nullopt;
}

}  // namespace tickrail::rdma::rc
