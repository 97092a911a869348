// The UD multicast wire format: one 64-byte header, then `count` 64-byte ticks.
//
// Modelled on MoldUDP64 (session, sequence of the first message, message count), with fixed-size
// messages. The header is one cache line so that the ticks behind it stay line-aligned in the
// receive buffers, and at the MTUs that matter it costs no tick: (1024 - 64) / 64 = 15 ticks,
// the same as a 32-byte header would leave room for; (4096 - 64) / 64 = 63.
//
// Kinds: data (count >= 1 ticks of sequence first_seq, first_seq + 1, ...), heartbeat (count 0;
// first_seq is the sequence the publisher will give its next tick, so first_seq - 1 is its
// latest), end (as heartbeat; the publisher closed). Every header also advertises where the
// publisher serves RDMA READ recovery of its history, so that a subscriber of several groups
// needs no per-group configuration.
//
// Byte order: little-endian (x86 and ARM servers); a big-endian host fails the magic check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tickrail/tick.hpp"

namespace tickrail::rdma::ud {

inline constexpr std::uint32_t kMagic = 0x44555254;  // "TRUD" in memory
inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kGrhBytes = 40;  // a UD receive buffer starts with the GRH

enum class DatagramKind : std::uint8_t { data = 1, heartbeat = 2, end = 3 };

struct alignas(kCacheLine) DatagramHeader {
  std::uint32_t magic;
  std::uint16_t version;
  DatagramKind kind;
  std::uint8_t flags;           // 0
  std::uint64_t session;        // the publisher's session: random, never 0
  std::uint64_t first_seq;      // data: sequence of the first tick; else: next to be published
  std::uint32_t count;          // ticks following the header
  std::uint16_t recovery_port;  // rdma_cm port of the publisher's history (0: none)
  std::uint8_t recovery_family; // 4 or 6 (0: no recovery)
  std::uint8_t reserved;
  std::uint8_t recovery_addr[16];  // IPv4 in the first 4 bytes, or IPv6, network order
  std::uint64_t history;        // ticks the publisher keeps for recovery
  std::uint64_t send_ts;        // publisher's clock cycles when posted (diagnostics)
};
static_assert(sizeof(DatagramHeader) == 64);
static_assert(offsetof(DatagramHeader, session) == 8);
static_assert(offsetof(DatagramHeader, first_seq) == 16);
static_assert(offsetof(DatagramHeader, count) == 24);
static_assert(offsetof(DatagramHeader, recovery_addr) == 32);
static_assert(offsetof(DatagramHeader, history) == 48);

inline constexpr std::size_t kHeaderBytes = sizeof(DatagramHeader);
inline constexpr std::size_t kTickBytes = sizeof(Tick);

// Ticks per datagram a path MTU allows; 0 when not even one fits.
[[nodiscard]] constexpr std::uint32_t ticks_per_mtu(std::uint32_t mtu) noexcept {
  return mtu < kHeaderBytes + kTickBytes
             ? 0
             : static_cast<std::uint32_t>((mtu - kHeaderBytes) / kTickBytes);
}

[[nodiscard]] constexpr std::size_t datagram_bytes(std::uint32_t ticks) noexcept {
  return kHeaderBytes + std::size_t{ticks} * kTickBytes;
}

// The ticks per datagram to use for `requested` (config max_ticks_per_datagram) on a path of
// `mtu` bytes. Throws Error(invalid_argument) naming `where` (device and port) when the MTU
// cannot carry one tick plus the header, or `requested` ticks do not fit.
[[nodiscard]] std::uint32_t checked_ticks_per_datagram(std::uint32_t requested, std::uint32_t mtu,
                                                       const std::string& where);

// What a receiver makes of a datagram of `len` bytes.
enum class Verdict : std::uint8_t {
  ok,
  foreign,    // not tickrail's: too short for a header, or another magic
  malformed,  // tickrail's magic, but another version, an unknown kind, a count that disagrees
              // with the length, or ticks whose sequence numbers do not follow first_seq
};

// Validates everything but the session (which is the receiver's business). Never throws; reads
// only within [p, p + len). `p` need not be aligned.
[[nodiscard]] Verdict validate(const std::byte* p, std::size_t len) noexcept;

[[nodiscard]] inline DatagramHeader read_header(const std::byte* p) noexcept {
  DatagramHeader h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

[[nodiscard]] const char* to_string(Verdict v) noexcept;
[[nodiscard]] const char* to_string(DatagramKind k) noexcept;

}  // namespace tickrail::rdma::ud
