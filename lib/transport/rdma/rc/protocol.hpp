// The RC transport's wire protocol: the connection private data exchanged through rdma_cm, the
// layout of a subscriber's ring region, and the checks the publisher applies to a request.
//
// A subscriber owns its ring. It registers one region, in a protection domain of its own
// connection, and sends its address and rkey in the connect request:
//
//   [ ControlBlock: 4 cache lines | capacity x 64-byte Slot ]        (page-aligned, pre-faulted)
//     line 0  heartbeat   publisher -> subscriber: next sequence, timestamp, beat count
//     line 1  notice      publisher -> subscriber: why it stops (evicted, closed), written
//                         before it disconnects
//     line 2  credit source (subscriber-local: the word its credit WRITE is sent from when the
//             device cannot send it inline)
//     line 3  reserved
//
// Tick `seq` goes to slot seq & (capacity - 1), one RDMA WRITE per tick or per run of
// contiguous slots; the subscriber returns its consumed position by an RDMA WRITE into a credit
// word in the publisher's memory, registered in that connection's own protection domain.
//
// Private data limits (rdma_cm over IB CM, RDMA_PS_TCP): connect request 56 bytes, accept 196,
// reject 148. Each message starts with a magic and a version, so that any future layout is
// told apart; multi-byte fields are little-endian (both ends are x86-64 or another
// little-endian host: checked at compile time).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/last_value.hpp"
#include "transport/rdma/common/table_region.hpp"
#include "tickrail/config.hpp"
#include "tickrail/error.hpp"
#include "tickrail/ring.hpp"

namespace tickrail::rdma::rc {

static_assert(std::endian::native == std::endian::little, "the RC wire format is little-endian");

inline constexpr std::uint32_t kMagic = 0x43524b54;  // "TKRC" in memory
// 2: the last-value table (a wants-table flag in the request, its grant in the accept).
inline constexpr std::uint16_t kVersion = 2;

inline constexpr std::size_t kReqPrivateDataMax = 56;
inline constexpr std::size_t kRepPrivateDataMax = 196;
inline constexpr std::size_t kRejPrivateDataMax = 148;

// Ring geometry the publisher accepts: 2..2^30 slots (ring.hpp), and no more than its own
// ring_capacity (its staging ring is twice that).
inline constexpr unsigned kMinCapacityLog2 = 1;
inline constexpr unsigned kMaxCapacityLog2 = 30;

// How the publisher writes into this subscriber's ring, chosen by the subscriber at connect.
enum class WriteMode : std::uint8_t {
  memory = 1,        // one RDMA WRITE per run of slots; the device places it in address order
  memory_split = 2,  // words 0..6 of each slot in one WRITE, the commit word in a second one
  cq = 3,            // RDMA WRITE WITH IMMEDIATE (low 32 bits of the run's last sequence)
};
[[nodiscard]] const char* to_string(WriteMode m) noexcept;
[[nodiscard]] constexpr bool is_memory_mode(WriteMode m) noexcept { return m != WriteMode::cq; }

// --- the subscriber's ring region ---

struct alignas(kCacheLine) Heartbeat {
  std::uint64_t next_seq;  // the publisher's next sequence when it wrote this
  std::uint64_t stamp;     // its Clock cycles (informational: clocks of two hosts differ)
  std::uint64_t beat;      // +1 per heartbeat: the subscriber watches it change
  std::uint64_t pad[5];
};

enum class Notice : std::uint64_t { none = 0, evicted = 1, closed = 2 };

struct alignas(kCacheLine) NoticeLine {
  std::uint64_t notice;    // Notice
  std::uint64_t at_seq;    // the publisher's next sequence when it decided
  std::uint64_t pad[6];
};

struct alignas(kCacheLine) ControlBlock {
  Heartbeat heartbeat;
  NoticeLine notice;
  std::uint64_t credit_source[8];
  std::uint64_t reserved[8];
};
static_assert(sizeof(Heartbeat) == kCacheLine && sizeof(NoticeLine) == kCacheLine);
static_assert(sizeof(ControlBlock) == 4 * kCacheLine);
static_assert(offsetof(ControlBlock, notice) == kCacheLine);
inline constexpr std::size_t kControlBytes = sizeof(ControlBlock);

// How many ticks the subscriber consumes between credit returns: `requested` (rdma.credit_every;
// 0: a quarter of the ring), never more than the ring, or a publisher under the block policy
// would wait for a credit that never comes.
[[nodiscard]] constexpr std::uint64_t credit_interval(std::uint64_t requested,
                                                      std::uint64_t capacity) noexcept {
  if (requested == 0) return std::max<std::uint64_t>(1, capacity / 4);
  return std::min(requested, capacity);
}

[[nodiscard]] constexpr std::size_t region_bytes(std::uint64_t capacity) noexcept {
  return kControlBytes + static_cast<std::size_t>(capacity) * sizeof(Slot);
}

// The publisher's per-connection memory: the credit word the subscriber writes (the only
// remotely writable line), then the sources of the publisher's control WRITEs.
struct alignas(kCacheLine) LinkBlock {
  std::uint64_t credit[8];        // word 0: the subscriber's next expected sequence
  Heartbeat heartbeat_source;
  NoticeLine notice_source;
  std::uint64_t zero_source[8];   // zeros: the commit word of a slot about to be overwritten
};
static_assert(sizeof(LinkBlock) == 4 * kCacheLine);

// --- private data ---

// Subscriber -> publisher, in the connect request (at most 56 bytes).
struct ConnectRequest {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint8_t policy;        // SlowConsumerPolicy
  std::uint8_t mode;          // WriteMode
  std::uint8_t capacity_log2;
  std::uint8_t flags;         // kWantsTable
  std::uint8_t reserved[2];
  std::uint32_t rkey;         // of the ring region
  std::uint64_t region_addr;  // ControlBlock; slots follow at +kControlBytes
  std::uint64_t channel_hash;
  std::uint64_t token_hash;   // 0: no token
  std::uint32_t disconnect_after_ms;
  std::uint32_t reserved2;
};
static_assert(sizeof(ConnectRequest) <= kReqPrivateDataMax);
static_assert(std::is_trivially_copyable_v<ConnectRequest>);

// Publisher -> subscriber, in the accept.
struct AcceptReply {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint64_t first_seq;       // the first tick this subscriber will receive
  std::uint64_t credit_addr;     // LinkBlock::credit
  std::uint32_t credit_rkey;
  std::uint32_t heartbeat_ms;    // the publisher's heartbeat_interval
  // The last-value table, to a subscriber that asked for it (kWantsTable), else zeros: a
  // TableHeader then the entries, registered for remote read only.
  std::uint64_t table_addr;
  std::uint32_t table_rkey;
  std::uint32_t table_capacity;  // instruments
  std::uint32_t table_classes;   // bit c: StateClass c kept
  std::uint32_t reserved2;
};
static_assert(sizeof(AcceptReply) <= kRepPrivateDataMax);

// What a subscriber with start = snapshot or policy = conflate needs: the publisher's table.
inline constexpr std::uint8_t kWantsTable = 1;

// The publisher's table region (transport/rdma/common/table_region.hpp), as an accept grants
// it: usable or nullopt, and `why` says what is wrong.
[[nodiscard]] inline std::optional<detail::TableGeometry> granted_table(const AcceptReply& r,
                                                                        std::string& why) {
  return rdma::granted_table(r.table_addr, r.table_capacity, r.table_classes, why);
}

enum class RejectReason : std::uint16_t {
  malformed = 1,         // not a tickrail RC request
  version_mismatch = 2,  // detail: the publisher's version
  wrong_channel = 3,     // text: the channel served
  bad_token = 4,
  not_allowed = 5,       // the subscriber's address is not in the allow-list
  bad_geometry = 6,      // detail: the largest capacity accepted
  no_capacity = 7,       // max_subscribers connections already
  resources = 8,         // the publisher could not set the connection up (text says why)
  closing = 9,
  not_serving = 10,      // the publishing thread did not take the subscriber in time
  no_table = 11,         // snapshot or conflate asked of a channel that keeps no table
};
[[nodiscard]] const char* to_string(RejectReason r) noexcept;

// Publisher -> subscriber, in the reject (at most 148 bytes).
struct RejectNote {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reason;  // RejectReason
  std::uint64_t detail;
  char text[120];        // NUL-terminated, in words
};
static_assert(sizeof(RejectNote) <= kRejPrivateDataMax);

// The channel and the token travel as 64-bit hashes (FNV-1a with a final avalanche, each with
// its own domain): the connect request has no room for names. A token so hashed keeps
// subscribers of the wrong deployment out; it is not a defence against someone who can read
// the wire (RDMA traffic is not encrypted).
[[nodiscard]] std::uint64_t channel_hash(std::string_view channel) noexcept;
[[nodiscard]] std::uint64_t token_hash(std::string_view token) noexcept;  // 0 when empty

[[nodiscard]] ConnectRequest make_request(const SubscriberConfig& config, WriteMode mode,
                                          std::uint64_t capacity, std::uint64_t region_addr,
                                          std::uint32_t rkey);

// Decoding: nullopt when the bytes are too few or the magic is not ours.
[[nodiscard]] std::optional<ConnectRequest> decode_request(std::span<const std::byte> data) noexcept;
[[nodiscard]] std::optional<AcceptReply> decode_accept(std::span<const std::byte> data) noexcept;
[[nodiscard]] std::optional<RejectNote> decode_reject(std::span<const std::byte> data) noexcept;

// What the publisher needs to judge a request.
struct ServeTerms {
  std::string channel;
  std::uint64_t channel_hash;
  std::uint64_t token_hash;         // 0: any token is accepted
  std::uint64_t max_capacity;       // the publisher's ring_capacity
  detail::TableGeometry table;      // capacity 0: the channel keeps no last-value table
};

// The publisher's verdict on a request that decoded: nullopt to accept, else the reject.
[[nodiscard]] std::optional<RejectNote> judge(const ConnectRequest& req, const ServeTerms& terms);
[[nodiscard]] RejectNote make_reject(RejectReason reason, std::uint64_t detail, std::string_view text);

// The Error a subscriber throws for a reject, naming where it connected (`what`).
[[nodiscard]] Errc reject_errc(RejectReason r) noexcept;

// The heartbeat/notice words are written by the remote NIC and read by the CPU: 64-bit
// atomic_ref loads, as the ring's words (ring.hpp).
[[nodiscard]] inline std::uint64_t load_word(const std::uint64_t& w) noexcept {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(w))
      .load(std::memory_order_acquire);
}

}  // namespace tickrail::rdma::rc
