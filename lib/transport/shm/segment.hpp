// The shared-memory channel segment: its layout (shared by publisher and subscriber processes)
// and the control-plane code that creates, validates and maps it.
//
//   [ SegmentHeader | page-aligned ]
//   [ Entry x max_subscribers | page-aligned ]    one per subscriber: state machine and credit
//   [ ring x max_subscribers, capacity Slots each ]
//
// Entry state machine (every transition a CAS, so the subscriber, the publisher's data path and
// its conductor never overwrite each other):
//   free -> claimed -> requested        subscriber attaching
//   requested -> active                 publisher data path starts serving it
//   active -> evicted                   data path, disconnect policy
//   * -> detaching                      subscriber leaving
//   * -> dead                           conductor found the subscriber process gone
//   detaching|dead|evicted-and-gone -> free   data path, after it stopped writing the ring
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "tickrail/config.hpp"
#include "tickrail/ring.hpp"

namespace tickrail::shm {

inline constexpr std::uint64_t kMagic = 0x4c49415252434954ULL;  // "TICKRAIL" in memory
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kPad = 128;  // two lines: the adjacent-line prefetcher pairs them

enum class EntryState : std::uint32_t {
  free = 0,
  claimed,
  requested,
  active,
  evicted,
  detaching,
  dead,
};
[[nodiscard]] const char* to_string(EntryState s) noexcept;

enum class EvictReason : std::uint32_t { none = 0, slow_consumer = 1 };

struct alignas(kPad) SegmentHeader {
  std::atomic<std::uint64_t> magic;  // written last at creation
  std::uint32_t version;
  std::uint32_t slot_size;
  std::uint64_t capacity;
  std::uint32_t max_subscribers;
  std::int32_t publisher_pid;
  std::uint64_t publisher_start_time;
  std::uint64_t segment_size;
  std::uint64_t entries_offset;
  std::uint64_t rings_offset;
  std::uint64_t session_id;

  alignas(kPad) std::atomic<std::uint64_t> generation;  // bumped on every entry change request
  alignas(kPad) std::atomic<std::uint64_t> heartbeat_ns;  // CLOCK_MONOTONIC, by the conductor
  std::atomic<std::uint32_t> closed;

  // Written by the data path after each publish, read only by tools: a line of its own.
  alignas(kPad) std::atomic<std::uint64_t> next_seq;
};

struct alignas(kPad) Entry {
  std::atomic<std::uint32_t> state;
  // Written by the subscriber while it claims the entry, read by the publisher after `state`
  // says so; atomic (relaxed) because tools and the stats thread read them at any time.
  std::atomic<std::uint32_t> policy;
  std::atomic<std::int32_t> pid;
  std::atomic<std::uint32_t> reason;
  std::atomic<std::uint64_t> pid_start_time;
  std::uint64_t disconnect_after_ns;
  std::atomic<std::uint64_t> start_seq;
  std::atomic<std::uint64_t> attach_count;  // bumped per claim: tells a stale subscriber apart

  alignas(kPad) std::atomic<std::uint64_t> credit;  // written by the subscriber only
  alignas(kPad) std::atomic<std::uint64_t> back_pressure;  // written by the publisher only
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(SegmentHeader) == 4 * kPad);
static_assert(sizeof(Entry) == 3 * kPad);
static_assert(offsetof(Entry, credit) == kPad);

// A mapped segment. Move-only; unmaps on destruction.
class Segment {
 public:
  struct Geometry {
    std::uint64_t capacity;
    std::uint32_t max_subscribers;
  };

  // Publisher side: creates /<dir>/tickrail.<channel>. An existing segment whose publisher is
  // still alive is an error; one left by a dead publisher is replaced.
  static Segment create(const std::string& dir, const std::string& channel, Geometry g);
  // Subscriber side: maps and validates an existing segment; waits up to `timeout` for it to
  // appear. Errors: not_found, bad_magic, version_mismatch, truncated, geometry_mismatch.
  static Segment attach(const std::string& dir, const std::string& channel,
                        std::chrono::milliseconds timeout);

  Segment() = default;
  ~Segment();
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  [[nodiscard]] SegmentHeader& header() const noexcept { return *static_cast<SegmentHeader*>(base_); }
  [[nodiscard]] Entry& entry(std::uint32_t i) const noexcept;
  [[nodiscard]] Slot* ring(std::uint32_t i) const noexcept;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] void* base() const noexcept { return base_; }

  // Removes the name so no new subscriber can attach; existing mappings stay valid.
  void unlink() noexcept;

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
  bool owner_ = false;
};

[[nodiscard]] std::string segment_path(const std::string& dir, const std::string& channel);
// Throws config_error unless the name is 1..64 of [A-Za-z0-9_.-].
void validate_channel_name(const std::string& channel);

// Process identity robust to pid reuse: the start time in /proc/<pid>/stat (field 22).
[[nodiscard]] std::optional<std::uint64_t> process_start_time(int pid);
[[nodiscard]] bool process_alive(int pid, std::uint64_t start_time);
[[nodiscard]] std::uint64_t monotonic_ns() noexcept;

}  // namespace tickrail::shm
