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
#include <vector>

#include "tickrail/idle.hpp"
#include "tickrail/export.hpp"

namespace tickrail {

enum class TransportKind : std::uint8_t { shm, rc, ud };

// What the publisher does when this subscriber's ring is full.
enum class SlowConsumerPolicy : std::uint8_t {
  block,       // never overwrite unconsumed ticks: publish reports back-pressure for everyone
  drop,        // never wait: the subscriber is lapped and counts exactly what it lost
  disconnect,  // as block, until the ring has stayed full for disconnect_after: then evict it
  conflate,    // as drop; when lapped, the subscriber catches up through the last-value table
};
// drop and conflate: the publisher never waits for such a subscriber, and may overwrite a slot
// it is reading.
[[nodiscard]] constexpr bool never_waits(SlowConsumerPolicy p) noexcept {
  return p == SlowConsumerPolicy::drop || p == SlowConsumerPolicy::conflate;
}

[[nodiscard]] TICKRAIL_API const char* to_string(TransportKind t) noexcept;
[[nodiscard]] TICKRAIL_API const char* to_string(SlowConsumerPolicy p) noexcept;
// Throw Errc::config_error naming `key` and the accepted values.
[[nodiscard]] TICKRAIL_API TransportKind parse_transport(std::string_view s, std::string_view key = "transport");
[[nodiscard]] TICKRAIL_API SlowConsumerPolicy parse_policy(std::string_view s, std::string_view key = "policy");

inline constexpr std::uint32_t kMaxSubscribers = 64;

// The longest duration or timeout any config key accepts (24 h): every duration is converted to
// clock cycles and added to a time point, which must not overflow.
inline constexpr std::chrono::milliseconds kMaxDuration{86'400'000};
// Throws Error(config_error) "key: N is outside min..86400000 (24 h)" for a duration outside
// [min, kMaxDuration]: for programs' own duration keys.
TICKRAIL_API void validate_duration(std::string_view key, std::chrono::milliseconds d, std::int64_t min = 0);

// How an RC subscriber learns that a tick arrived.
enum class RcPolling : std::uint8_t {
  memory,  // spin on the commit word of the next slot (needs in-order data placement)
  cq,      // RDMA WRITE WITH IMMEDIATE: busy-poll the receive completion queue
};
[[nodiscard]] TICKRAIL_API const char* to_string(RcPolling p) noexcept;
[[nodiscard]] TICKRAIL_API RcPolling parse_rc_polling(std::string_view s, std::string_view key = "polling");

// Settings shared by the RDMA transports (rc, ud). Ignored by shm.
struct TICKRAIL_API RdmaConfig {
  std::string device;            // verbs device ("rxe0", "mlx5_0"); empty: the one rdma_cm routes to
  std::string address;           // publisher: address to listen on; subscriber: publisher's address
  std::uint16_t port = 7471;     // rdma_cm port (RC connections; UD recovery connections)
  std::string token;             // shared access token required in connect private data; empty: none
  std::vector<std::string> allow;  // publisher: subscriber addresses allowed; empty: any
  // RC publisher: which of them may hold it back (policy block or disconnect: one that stops
  // reading stops the channel for all); empty: any allowed. The others must take drop or conflate.
  std::vector<std::string> wait_for;
  std::chrono::milliseconds connect_timeout{5000};  // address/route resolution and connection
  std::chrono::milliseconds heartbeat_interval{100};  // idle publisher -> subscribers
  // RC
  RcPolling polling = RcPolling::memory;  // subscriber
  std::uint32_t signal_every = 64;        // publisher: one signalled send work request every N
  std::uint32_t credit_every = 0;         // subscriber: credit every N ticks (0: capacity/4; <= capacity)
  std::uint32_t recv_batch = 32;          // CQ polling: receives reposted per batch
  // Subscriber, memory polling on a device that does not report in-order data placement
  // (ibv_query_qp_data_in_order, e.g. rxe): false falls back to CQ polling; true keeps memory
  // polling with each slot's commit word sent in a second RDMA WRITE, which relies on the
  // WRITEs of one QP being placed in order.
  bool split_commit = false;
  // UD multicast
  std::vector<std::string> groups{"239.1.1.1"};  // multicast group address(es)
  std::uint32_t max_ticks_per_datagram = 1;       // batching: 1 = one tick per datagram
  std::chrono::nanoseconds batch_delay{0};        // flush a partial datagram after this long
  std::uint32_t history = 65536;                  // publisher: ticks kept for recovery (RDMA READ)
  std::uint32_t reorder_buffer = 4096;            // subscriber: ticks held while a gap is filled
  std::uint32_t late_join_recover = 0;            // subscriber: recover the last K ticks on join
  // subscriber: a hole is read back only once it has been open this long (0: at once), so that
  // a second line (FailoverSubscriber) can fill it first
  std::chrono::microseconds recovery_delay{0};
  std::uint32_t recv_buffers = 512;               // subscriber: receive buffers posted

  void validate() const;  // throws Error(config_error) naming "rdma.<key>"
};

// Where a subscriber starts (docs/state.md).
enum class StartMode : std::uint8_t {
  live,      // at the next tick published
  snapshot,  // with the publisher's last-value table, then the live stream after it
};
[[nodiscard]] TICKRAIL_API const char* to_string(StartMode m) noexcept;
[[nodiscard]] TICKRAIL_API StartMode parse_start_mode(std::string_view s, std::string_view key = "start");

// The publisher's last-value table (docs/state.md): the latest tick of each instrument in each
// class, kept on the publish path where subscribers read it without the publisher's CPU.
// 2^20 instruments: 192 MiB of table with every class kept.
inline constexpr std::uint32_t kMaxStateCapacity = 1u << 20;
struct TICKRAIL_API StateConfig {
  bool enabled = false;  // off: no memory, no cost, and `snapshot` subscribers are refused
  std::uint32_t capacity = 65536;  // instruments 0..capacity-1 (the ITCH stock locate range)
  bool quote = true;   // Quote
  bool trade = true;   // Trade, Execute
  bool status = true;  // Status

  void validate() const;  // throws Error(config_error) naming "state.<key>"
};

struct TICKRAIL_API PublisherConfig {
  TransportKind transport = TransportKind::shm;
  std::string channel = "tickrail";  // shm: the socket <shm_dir>/tickrail.<channel>
  std::uint32_t max_subscribers = 8;          // 1..kMaxSubscribers
  std::uint32_t ring_capacity = 16384;        // slots per subscriber ring, power of two
  bool stamp_send_time = true;                // overwrite Tick::send_ts with Clock::now()
  // shm only (RC and UD ignore it): each tick published also asks the CPU for the slot this many
  // ahead, for writing, at most a quarter of the ring ahead (0: not). A publisher that runs
  // ahead of a subscriber on another core then finds its next slots already its own: 2.4 times
  // the throughput in the slow core-to-core state, with the ping-pong and one way unchanged
  // (BENCHMARKS.md, issue 17, session 32). 0 to 1024.
  std::uint32_t prefetch_ahead = 16;
  bool lock_memory = false;                   // mlock the rings (needs RLIMIT_MEMLOCK)
  std::chrono::milliseconds conductor_period{5};  // liveness checks, heartbeats
  std::string shm_dir = "/dev/shm";  // where the channel's socket lives
  // shm: who may subscribe, checked against the kernel's word for the peer (SO_PEERCRED). The
  // publisher's own user and root always may; add user or group names, or numeric ids.
  std::vector<std::string> allow_users;
  std::vector<std::string> allow_groups;
  // shm: who among them may hold the publisher back (policy block or disconnect): a subscriber
  // that stops reading then stops the publisher and every other subscriber. The publisher's own
  // user and root always may; others must subscribe with policy drop or conflate, or are refused.
  std::vector<std::string> wait_for_users;
  std::vector<std::string> wait_for_groups;
  bool stats = true;  // live counters in the process's stat file (tickrail-stat; TICKRAIL_STATS=0: off)
  // Where the publisher's background threads run (docs/apps.md, "Threads"), as a cpu list: "2-3,6".
  // Empty: the process's cpus off its hot ones (those of its pinned threads that created an
  // endpoint, this one's creator included, and of its ThreadedPublishers); when none is hot,
  // where the creating thread may run.
  std::string housekeeping_cpus;
  StateConfig state;
  RdmaConfig rdma;

  void validate() const;  // throws Error(config_error)
};

struct TICKRAIL_API SubscriberConfig {
  TransportKind transport = TransportKind::shm;
  std::string channel = "tickrail";
  SlowConsumerPolicy policy = SlowConsumerPolicy::block;
  std::chrono::milliseconds disconnect_after{1000};  // policy = disconnect
  StartMode start = StartMode::live;  // snapshot: the channel must keep a last-value table
  // Wait this long for the channel to appear: shm, its publisher's socket; rc, a listener at
  // rdma.address and port.
  std::chrono::milliseconds attach_timeout{0};
  // Silence after which the publisher is gone, counted while the app looks (README).
  std::chrono::milliseconds publisher_timeout{1000};
  std::uint32_t ring_capacity = 0;  // 0: accept the channel's; else must match it
  bool lock_memory = false;
  IdleKind idle = IdleKind::backoff;  // how wait_active() idles between looks
  std::string shm_dir = "/dev/shm";  // where the channel's socket lives
  // shm: whose channel we trust, checked against the kernel's word for the publisher process
  // (SO_PEERCRED) and the channel socket's owner. Our own user and root always are; add user
  // names or numeric ids.
  std::vector<std::string> publisher_users;
  bool stats = true;  // live counters in the process's stat file (tickrail-stat; TICKRAIL_STATS=0: off)
  std::string housekeeping_cpus;  // as PublisherConfig::housekeeping_cpus
  RdmaConfig rdma;

  void validate() const;
};

}  // namespace tickrail
