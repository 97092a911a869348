#include "transport/rdma/ud/datagram.hpp"

#include "tickrail/error.hpp"
#include "core/enum_names.hpp"

namespace tickrail::rdma::ud {

std::uint32_t checked_ticks_per_datagram(std::uint32_t requested, std::uint32_t mtu,
                                         const std::string& where) {
  const std::uint32_t fit = ticks_per_mtu(mtu);
  if (fit == 0) {
    throw Error(Errc::invalid_argument,
                "UD multicast on " + where + ": path MTU " + std::to_string(mtu) +
                    " bytes cannot carry one tick (" + std::to_string(kHeaderBytes) +
                    "-byte header + " + std::to_string(kTickBytes) + "-byte tick = " +
                    std::to_string(datagram_bytes(1)) + " bytes)");
  }
  if (requested == 0 || requested > fit) {
    throw Error(Errc::invalid_argument,
                "rdma.max_ticks_per_datagram = " + std::to_string(requested) + " on " + where +
                    ": a datagram of that many ticks is " +
                    std::to_string(datagram_bytes(requested)) + " bytes, the path MTU is " +
                    std::to_string(mtu) + " bytes (1.." + std::to_string(fit) + " ticks fit)");
  }
  return requested;
}

Verdict validate(const std::byte* p, std::size_t len) noexcept {
  if (len < kHeaderBytes) return Verdict::foreign;
  const DatagramHeader h = read_header(p);
  if (h.magic != kMagic) return Verdict::foreign;
  if (h.version != kVersion || h.session == 0) return Verdict::malformed;
  if (len != datagram_bytes(0) + std::size_t{h.count} * kTickBytes) return Verdict::malformed;
  switch (h.kind) {
    case DatagramKind::data:
      if (h.count == 0 || h.first_seq == 0) return Verdict::malformed;
      break;
    case DatagramKind::heartbeat:
    case DatagramKind::end:
      if (h.count != 0 || h.first_seq == 0) return Verdict::malformed;
      return Verdict::ok;
    default:
      return Verdict::malformed;
  }
  // Each tick carries its own sequence number: it must be first_seq + i (no wrap-around).
  if (h.first_seq + h.count < h.first_seq) return Verdict::malformed;
  const std::byte* t = p + kHeaderBytes + offsetof(Tick, seq);
  for (std::uint32_t i = 0; i < h.count; ++i, t += kTickBytes) {
    std::uint64_t seq;
    std::memcpy(&seq, t, sizeof seq);
    if (seq != h.first_seq + i) return Verdict::malformed;
  }
  return Verdict::ok;
}

namespace {
constexpr tickrail::detail::EnumName<Verdict> kVerdictNames[] = {
    {Verdict::ok, "ok"}, {Verdict::foreign, "foreign"}, {Verdict::malformed, "malformed"}};
constexpr tickrail::detail::EnumName<DatagramKind> kKindNames[] = {
    {DatagramKind::data, "data"}, {DatagramKind::heartbeat, "heartbeat"}, {DatagramKind::end, "end"}};
}  // namespace

const char* to_string(Verdict v) noexcept { return tickrail::detail::name_of(kVerdictNames, v); }
const char* to_string(DatagramKind k) noexcept { return tickrail::detail::name_of(kKindNames, k); }

}  // namespace tickrail::rdma::ud
