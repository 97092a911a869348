// Live counters: one small shared-memory file per process that tools read while it runs (the
// idea of Aeron's CnC file and AeronStat).
//
//   <dir>/tickrail-stat.<pid>      dir: $TICKRAIL_STAT_DIR, default /dev/shm
//   [ FileHeader ]                 magic (written last), version, pid, process start time,
//                                  program name, geometry, TSC rate
//   [ Block x kMaxBlocks ]         one per Publisher, Subscriber or FailoverSubscriber of the
//                                  process
//
// A block has three parts, each on its own pair of cache lines because each has one writer:
//   identity   kind, transport, channel (a failover: both lines'): written at registration
//              (control plane)
//   counters   the tables of tickrail/counters.hpp (PubCounter, SubCounter), or a failover's
//              (FoCounter, FoLineCounter, below): written by the publishing or polling thread
//              with relaxed stores (plain moves on x86), never locked, never RMW
//   rows       a publisher's per-subscriber table (position, lag, back-pressure): rewritten by
//              the process's stats thread every kRefreshPeriod from Publisher::subscribers(); beside
//              it, the wake-up counts of the library's background threads (the `thread` rows)
//
// Readers (tickrail-stat) copy the file into private memory with pread, never map it: a file
// truncated while it is read ends in a short read, reported as "incomplete", not in SIGBUS. Two
// counters may come from different instants. Identity and rows are guarded by sequence counters
// (odd while being written), re-read around each copy, so a reader never sees half a channel name.
// A reader trusts a file as process P's counters only when it is owned by root or by one of P's
// uids (anyone may create a file named after any pid in /dev/shm); otherwise it is reported
// incompatible and not read.
//
// The file is created by the first Publisher/Subscriber of the process and removed when the
// last one is destroyed. A process that dies leaves it behind: readers tell it is dead by its
// pid (gone, or reused by a process with another start time) and remove it.
// Counters are off for an endpoint whose config says `stats = false`, and for the whole
// process with TICKRAIL_STATS=0.
// Internal to the library and its tools: what apps see is tickrail/counters.hpp; the reader
// (tickrail-stat's side) is tickrail/tools/stats_reader.hpp.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/counters.hpp"

namespace tickrail::stats {

// ---- layout (version 2) ------------------------------------------------------------------

inline constexpr std::uint64_t kMagic = 0x3154415453525454ULL;  // "TTRSTAT1" in memory
// 2: failover blocks, and the identity's second pair of lines (line B) before the counters.
inline constexpr std::uint32_t kVersion = 2;
inline constexpr std::uint32_t kMaxBlocks = 64;
inline constexpr std::uint32_t kMaxRows = kMaxSubscribers;
inline constexpr std::size_t kLinePair = 2 * kCacheLine;  // the adjacent-line prefetcher pairs lines
inline constexpr std::size_t kNameWords = 8;             // names: 64 bytes, NUL-padded

enum class BlockKind : std::uint32_t { free = 0, publisher = 1, subscriber = 2, failover = 3 };

// One enum for every kind: publishers are open or closed, subscribers follow SubscriberState
// (connecting from the start of their attach, before they reach the publisher), a
// failover is active while a line is up and `publisher gone` while both are down.
enum class EndpointState : std::uint32_t {
  open = 0,
  connecting,
  active,
  evicted,
  publisher_gone,
  closed,
};

// The counters themselves (indices, names, meanings) are the tables of tickrail/counters.hpp;
// an index's meaning never changes within a version.
struct CounterInfo {
  const char* name;  // tickrail-stat's table and JSON key; Prometheus tickrail_<role>_<name>
  bool grows;        // a counter (Prometheus *_total), else a gauge
  const char* help;
  bool threaded;     // a `thread` row: its word is in Block::thread_counters
};
#define TICKRAIL_DETAIL_INFO(name, where, kind, help) \
  CounterInfo{#name, #kind[0] == 'c', help, #where[0] == 't'},
inline constexpr CounterInfo kPubCounterInfo[] = {TICKRAIL_PUBLISHER_COUNTERS(TICKRAIL_DETAIL_INFO)};
inline constexpr CounterInfo kSubCounterInfo[] = {TICKRAIL_SUBSCRIBER_COUNTERS(TICKRAIL_DETAIL_INFO)};
#undef TICKRAIL_DETAIL_INFO
static_assert(std::size(kPubCounterInfo) == static_cast<std::size_t>(PubCounter::count_));
static_assert(std::size(kSubCounterInfo) == static_cast<std::size_t>(SubCounter::count_));

// A FailoverSubscriber's counters (FailoverCounters): its own, then line A's, then line B's. All
// written by its polling thread, where their values change (docs/failover.md, "Counters").
// Columns: X(name, kind, help), kind as in tickrail/counters.hpp.
// clang-format off
#define TICKRAIL_FAILOVER_COUNTERS(X)                                                              \
  X(delivered, counter, "Ticks delivered, each sequence number once, from the line that brought it first.") \
  X(gaps, counter, "Sequence numbers lost on both lines.")                                         \
  X(skipped, counter, "Sequence numbers given up (waited hole_timeout, or the lines were a window apart).")
#define TICKRAIL_FAILOVER_LINE_COUNTERS(X)                                                         \
  X(first, counter, "Ticks delivered from this line: it brought them first.")                      \
  X(duplicates, counter, "Copies from this line discarded (delivered already, or given up).")      \
  X(downs, counter, "Times the line went down (its publisher closed, went silent or evicted it).") \
  X(down_ns, counter, "Time the line spent down until it last came back, in ns.")                  \
  X(up, gauge, "1 while the line is up, 0 while down.")                                            \
  X(down_since_ns, gauge, "When the line went down (Unix time, ns); 0 while up.")
// clang-format on
#define TICKRAIL_DETAIL_INDEX3(name, kind, help) name,
enum class FoCounter : std::uint32_t { TICKRAIL_FAILOVER_COUNTERS(TICKRAIL_DETAIL_INDEX3) count_ };
enum class FoLineCounter : std::uint32_t { TICKRAIL_FAILOVER_LINE_COUNTERS(TICKRAIL_DETAIL_INDEX3) count_ };
#undef TICKRAIL_DETAIL_INDEX3
#define TICKRAIL_DETAIL_INFO3(name, kind, help) CounterInfo{#name, #kind[0] == 'c', help, false},
inline constexpr CounterInfo kFoCounterInfo[] = {TICKRAIL_FAILOVER_COUNTERS(TICKRAIL_DETAIL_INFO3)};
inline constexpr CounterInfo kFoLineCounterInfo[] = {TICKRAIL_FAILOVER_LINE_COUNTERS(TICKRAIL_DETAIL_INFO3)};
#undef TICKRAIL_DETAIL_INFO3
// The counter word of a failover block that holds `c`, or line `line`'s `c`.
constexpr std::uint32_t fo_word(FoCounter c) noexcept { return static_cast<std::uint32_t>(c); }
constexpr std::uint32_t fo_word(int line, FoLineCounter c) noexcept {
  return static_cast<std::uint32_t>(FoCounter::count_) +
         static_cast<std::uint32_t>(line & 1) * static_cast<std::uint32_t>(FoLineCounter::count_) +
         static_cast<std::uint32_t>(c);
}
static_assert(fo_word(1, FoLineCounter::count_) <= kCounters);

// Words for the `thread` rows of one block, apart from the hot counters.
inline constexpr std::uint32_t kThreadCounters = 8;
// A `thread` row's word among Block::thread_counters: its rank among the table's thread rows.
template <std::size_t N>
constexpr std::uint32_t thread_slot(const CounterInfo (&table)[N], std::uint32_t index) noexcept {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < index && i < N; ++i) n += table[i].threaded ? 1 : 0;
  return n;
}
static_assert(thread_slot(kPubCounterInfo, static_cast<std::uint32_t>(PubCounter::count_)) <= kThreadCounters);
static_assert(thread_slot(kSubCounterInfo, static_cast<std::uint32_t>(SubCounter::count_)) <= kThreadCounters);

// Names used by tickrail-stat's table and JSON ("published", "max_poll_gap_cycles", ...).
[[nodiscard]] const char* counter_name(BlockKind kind, std::uint32_t index) noexcept;
[[nodiscard]] std::uint32_t counter_count(BlockKind kind) noexcept;
// The row of counter `index` of `kind`; nullptr past the table.
[[nodiscard]] const CounterInfo* counter_info(BlockKind kind, std::uint32_t index) noexcept;
[[nodiscard]] const char* to_string(BlockKind k) noexcept;
[[nodiscard]] const char* to_string(EndpointState s) noexcept;

static_assert(Word::is_always_lock_free && sizeof(Word) == 8);

// Immutable once `magic` is set.
struct alignas(kLinePair) FileHeader {
  std::atomic<std::uint64_t> magic;  // written last (release) at creation
  std::uint32_t version;
  std::uint32_t header_size;
  std::uint32_t block_size;
  std::uint32_t block_count;
  std::uint32_t row_count;     // rows per block
  std::int32_t pid;
  std::uint64_t start_time;    // /proc/<pid>/stat field 22: tells a reused pid apart
  std::uint64_t created_ns;    // CLOCK_REALTIME
  double ns_per_cycle;         // converts max_poll_gap_cycles; 0 when the TSC rate is unknown
  char program[64];            // NUL-terminated
};

struct Row {
  Word position;       // next sequence the subscriber expects (its credit)
  Word lag;            // ticks published that it has not consumed
  Word back_pressure;  // times its full ring held the publisher back
  Word slot;
  Word pid;            // shm: its process (int, sign-extended); rdma: 0
  Word policy;         // SlowConsumerPolicy
  Word state[3];       // "active", "requested", ... (24 bytes, NUL-padded)
  Word peer[7];        // rdma: address (56 bytes, NUL-padded)
};
static_assert(sizeof(Row) == kLinePair);

struct alignas(kLinePair) Block {
  // Identity (registration; seqlock `identity_seq`, odd while written).
  Word identity_seq;
  std::atomic<std::uint32_t> in_use;  // 1 while registered
  std::atomic<std::uint32_t> state;   // EndpointState: any thread may store it (relaxed)
  Word kind;                          // BlockKind
  Word transport;                     // TransportKind
  Word registered_ns;                 // CLOCK_REALTIME
  Word label[kNameWords];             // channel (and peer address for RDMA); a failover: line A's
  // A failover's line B (line A's are `transport` and `label`), under identity_seq too.
  alignas(kLinePair) Word transport_b;
  Word label_b[kNameWords];

  // Hot counters: the publishing or polling thread only.
  alignas(kLinePair) Word counters[kCounters];

  // Slow part: the stats thread's rows (seqlock `rows_seq`), and the words the background
  // threads count their wake-ups in.
  alignas(kLinePair) Word rows_seq;
  Word row_count;
  Word refreshed_ns;  // CLOCK_REALTIME of the last refresh
  // The `thread` rows of the counters tables: each written by one background thread (relaxed
  // stores, outside the sequence counter), never by the publishing or polling thread.
  Word thread_counters[kThreadCounters];
  alignas(kLinePair) Row rows[kMaxRows];
};

static_assert(sizeof(FileHeader) == kLinePair);
static_assert(offsetof(Block, transport_b) == kLinePair);
static_assert(offsetof(Block, counters) == 2 * kLinePair);
static_assert(offsetof(Block, rows_seq) == 3 * kLinePair);
static_assert(offsetof(Block, rows) == 4 * kLinePair);
static_assert(sizeof(Block) == (4 + kMaxRows) * kLinePair);
static_assert(sizeof(Block) % kLinePair == 0);

inline constexpr std::size_t kFileSize = sizeof(FileHeader) + kMaxBlocks * sizeof(Block);

// ---- writer side (the library's Publisher and Subscriber use this) -------------------------

// Copies a transport's own counters into the endpoint's live counters: the table's `api` rows.
#define TICKRAIL_DETAIL_PUT_api(name, Index) r.put(Index::name, c.name);
#define TICKRAIL_DETAIL_PUT_live(name, Index)
#define TICKRAIL_DETAIL_PUT_thread(name, Index)
#define TICKRAIL_DETAIL_PUT_PUB(name, where, kind, help) TICKRAIL_DETAIL_PUT_##where(name, PubCounter)
#define TICKRAIL_DETAIL_PUT_SUB(name, where, kind, help) TICKRAIL_DETAIL_PUT_##where(name, SubCounter)
inline void store_counters(const Registration& r, const PublisherCounters& c) noexcept {
  TICKRAIL_PUBLISHER_COUNTERS(TICKRAIL_DETAIL_PUT_PUB)
}
inline void store_counters(const Registration& r, const SubscriberCounters& c) noexcept {
  TICKRAIL_SUBSCRIBER_COUNTERS(TICKRAIL_DETAIL_PUT_SUB)
}
// The sum of a publisher's api counters but `published`: each only grows, so the sum changes
// exactly when one of them does.
#define TICKRAIL_DETAIL_SUM_api(name) +c.name
#define TICKRAIL_DETAIL_SUM_live(name)
#define TICKRAIL_DETAIL_SUM_thread(name)
#define TICKRAIL_DETAIL_SUM_PUB(name, where, kind, help) TICKRAIL_DETAIL_SUM_##where(name)
[[nodiscard]] inline std::uint64_t rare_sum(const PublisherCounters& c) noexcept {
  return std::uint64_t{0} TICKRAIL_PUBLISHER_COUNTERS(TICKRAIL_DETAIL_SUM_PUB) - c.published;
}
#undef TICKRAIL_DETAIL_SUM_PUB
#undef TICKRAIL_DETAIL_SUM_thread
#undef TICKRAIL_DETAIL_SUM_live
#undef TICKRAIL_DETAIL_SUM_api
#undef TICKRAIL_DETAIL_PUT_SUB
#undef TICKRAIL_DETAIL_PUT_PUB
#undef TICKRAIL_DETAIL_PUT_live
#undef TICKRAIL_DETAIL_PUT_thread
#undef TICKRAIL_DETAIL_PUT_api

// The word that holds counter `index` of a block of `kind`: a hot counter or a `thread` row's.
[[nodiscard]] Word* counter_word(Block& b, BlockKind kind, std::uint32_t index) noexcept;
[[nodiscard]] const Word* counter_word(const Block& b, BlockKind kind, std::uint32_t index) noexcept;
// The word of a `thread` row of an endpoint's live counters; nullptr when counters are off.
[[nodiscard]] Word* thread_word(const Registration& r, PubCounter c) noexcept;
[[nodiscard]] Word* thread_word(const Registration& r, SubCounter c) noexcept;

// A publisher's per-subscriber rows, as its transport reports them (Publisher::subscribers()).
// Called on the stats thread; must be safe to call concurrently with the data path.
using RowSource = std::function<std::vector<SubscriberStatus>()>;

// The registry's side of a Registration.
struct RegistrationAccess {
  static Registration make(Block* b, std::uint64_t epoch) noexcept {
    return Registration(b, b->counters, epoch);
  }
  static std::uint64_t epoch(const Registration& r) noexcept { return r.epoch_; }
};

// What a block says it is: a failover adds its line B.
struct Identity {
  BlockKind kind = BlockKind::free;
  TransportKind transport{};
  std::string_view label;
  TransportKind transport_b{};
  std::string_view label_b;
};

// The label of a subscriber's block: its channel, and an RDMA publisher's address.
[[nodiscard]] std::string endpoint_label(const SubscriberConfig& c);

// Claims a block in this process's file, creating the file first if needed. Returns an empty
// Registration (counters off) when TICKRAIL_STATS=0, when every block is taken, or when the file
// cannot be created (logged once, with the path and errno): counters never stop an app.
// A publisher passes its RowSource; this starts the process's stats thread. Never throws.
[[nodiscard]] Registration register_endpoint(BlockKind kind, TransportKind transport,
                                             std::string_view label, RowSource rows = {});
// The same for any identity (a FailoverSubscriber's).
[[nodiscard]] Registration register_endpoint(const Identity& id);

// Polling thread: stores `v` into word `w` of a failover's block (fo_word); a relaxed store, as
// Registration::put. Only on a registration that holds a block.
inline void put(const Registration& r, std::uint32_t w, std::uint64_t v) noexcept {
  r.block()->counters[w].store(v, std::memory_order_relaxed);
}

// Whether TICKRAIL_STATS allows counters (unset, or anything but "0", "off", "false", "no"); a
// value that is none of those nor "1", "on", "true", "yes" is warned about, once.
[[nodiscard]] bool enabled_by_environment() noexcept;
// $TICKRAIL_STAT_DIR, or /dev/shm.
[[nodiscard]] std::string stat_dir();
// <dir>/tickrail-stat.<pid>
[[nodiscard]] std::string stat_path(const std::string& dir, int pid);
// The path of this process's file while it exists (empty otherwise).
[[nodiscard]] std::string current_stat_path();
// How often the stats thread refreshes publisher rows.
inline constexpr std::uint32_t kRefreshPeriodMs = 100;

}  // namespace tickrail::stats
