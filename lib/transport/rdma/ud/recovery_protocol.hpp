// What a UD subscriber and the publisher say to each other when the subscriber opens the RC
// connection it recovers lost ticks over (with RDMA READ from the publisher's history ring).
//
// The request rides in the connect private data (56 bytes at most for rdma_cm over IB CM), the
// grant in the accept's (196 at most); a refusal is a reject carrying a short reason in words.
// Fixed-size, little-endian, versioned like the datagrams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tickrail::rdma::ud {

inline constexpr std::uint32_t kRecoveryMagic = 0x43455254;  // "TREC"
inline constexpr std::size_t kMaxTokenBytes = 40;

struct RecoveryRequest {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t token_len;
  std::uint64_t session;  // the session the subscriber wants to recover; 0: whichever
  char token[kMaxTokenBytes];
};
static_assert(sizeof(RecoveryRequest) == 56, "fits rdma_cm's connect private data");

struct RecoveryGrant {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint64_t session;
  std::uint64_t history_addr;  // the history ring: `capacity` 64-byte slots, tick s at s % capacity
  std::uint64_t capacity;      // power of two
  std::uint32_t rkey;
  std::uint32_t reserved2;
  // The last-value table (common/table_region.hpp) when the channel keeps one, else zeros (as
  // from a publisher before it: the accept's private data is zero-padded). Remote read only.
  std::uint64_t table_addr;
  std::uint32_t table_rkey;
  std::uint32_t table_capacity;  // instruments
  std::uint32_t table_classes;   // bit c: StateClass c kept
  std::uint32_t reserved3;
};
static_assert(sizeof(RecoveryGrant) == 64, "fits rdma_cm's accept private data (196 bytes)");

// Private data arrives padded by the transport: a message is read from the front when long
// enough, and its magic and version checked by the caller.
template <class T>
[[nodiscard]] std::optional<T> read_message(std::span<const std::byte> data) noexcept {
  if (data.size() < sizeof(T)) return std::nullopt;
  T m;
  std::memcpy(&m, data.data(), sizeof m);
  return m;
}

[[nodiscard]] inline bool token_matches(const RecoveryRequest& r, std::string_view token) noexcept {
  return r.token_len == token.size() && r.token_len <= kMaxTokenBytes &&
         std::memcmp(r.token, token.data(), token.size()) == 0;
}

}  // namespace tickrail::rdma::ud
