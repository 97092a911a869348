// The shared-memory channel: what publisher and subscriber processes share, and the control-plane
// code that creates it, attaches to it and checks who is on the other side.
//
// A channel is a UNIX-domain socket at <shm_dir>/tickrail.<channel>, listened on by the publisher.
// A subscriber connects; the kernel tells each side who the other is (SO_PEERCRED), and each
// side checks that against its allow-list before it trusts anything. The publisher then hands the
// subscriber three or four memfds over the socket (SCM_RIGHTS):
//
//   ring     one per subscriber entry, capacity Slots; read-only to the subscriber
//   status   one per channel: heartbeat, closed, published sequence; read-only to subscribers
//   control  one per attach: the subscriber's credit (the one word it writes) and what the
//            publisher tells it (active, evicted, first sequence)
//   table    one per channel that keeps a last-value table (docs/state.md); read-only
//
// Read-only means sealed: ring, status and table carry F_SEAL_FUTURE_WRITE (no new writable mapping or
// write(), by any descriptor: mprotect cannot undo it) and every memfd carries F_SEAL_SHRINK |
// F_SEAL_GROW (nobody can truncate a mapping under the other side: no SIGBUS). Geometry travels
// in the handshake and is validated once by each side; the publisher reads nothing from shared
// memory but credits, which it clamps. A subscriber closing its socket (or dying, which closes
// it) is how the publisher learns it left.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/ring.hpp"

namespace tickrail::shm {

inline constexpr std::uint64_t kMagic = 0x4c49415252434954ULL;  // "TICKRAIL" in memory
inline constexpr std::uint32_t kVersion = 4;
inline constexpr std::size_t kPad = 128;  // two lines: the adjacent-line prefetcher pairs them

// What the subscriber's control line says; written by the publisher (a subscriber that forges
// its own only fools itself: the publisher keeps the truth in private memory).
enum class ControlState : std::uint32_t { requested = 0, active = 1, evicted = 2 };
enum class EvictReason : std::uint32_t { none = 0, slow_consumer = 1 };

struct alignas(kPad) Status {
  std::atomic<std::uint64_t> heartbeat_ns;  // CLOCK_MONOTONIC, by the conductor
  std::atomic<std::uint32_t> closed;
  // Written by the data path after each publish, read only by tools: a line of its own.
  alignas(kPad) std::atomic<std::uint64_t> next_seq;
  // With a last-value table: every tick below it is in the table (stored after each update).
  std::atomic<std::uint64_t> table_next;
};

struct alignas(kPad) Control {
  std::atomic<std::uint32_t> state;  // ControlState
  std::atomic<std::uint32_t> reason;  // EvictReason
  std::atomic<std::uint64_t> start_seq;
  alignas(kPad) std::atomic<std::uint64_t> credit;  // written by the subscriber only
  alignas(kPad) std::atomic<std::uint64_t> back_pressure;  // written by the publisher only
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(offsetof(Control, credit) == kPad);

// Handshake messages (SOCK_SEQPACKET: one message each way).
struct Request {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t policy;  // SlowConsumerPolicy
  std::uint64_t disconnect_after_ns;
  std::uint64_t ring_capacity;  // 0: any
};
enum class ReplyCode : std::uint32_t { ok = 0, refused, no_capacity, geometry_mismatch, bad_request };
struct Reply {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t code;  // ReplyCode
  std::uint64_t capacity;
  std::uint32_t max_subscribers;
  std::uint32_t index;
  std::uint32_t table_capacity;  // the last-value table: instruments (0: none, and no 4th memfd)
  std::uint32_t table_classes;   // bit c: StateClass c kept
  char text[256];  // why, when code != ok
};
inline constexpr std::uint8_t kBye = 1;  // subscriber -> publisher: detaching on purpose

// Who the kernel says is on the other end of a socket.
struct PeerCred {
  int pid = 0;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;  // supplementary groups (SO_PEERGROUPS), where known
};
[[nodiscard]] PeerCred peer_cred(int sock);

// An allow-list of users and groups; resolves names or numbers ("alice", "1001") once.
struct Allow {
  std::vector<std::uint32_t> uids;
  std::vector<std::uint32_t> gids;
  // `users`/`groups` from the config (`key` names them in errors); `self` is always allowed, and
  // so is root.
  static Allow resolve(const std::vector<std::string>& users, const std::vector<std::string>& groups,
                       std::uint32_t self, const std::string& users_key,
                       const std::string& groups_key);
  [[nodiscard]] bool permits(const PeerCred& p) const;
  [[nodiscard]] std::string describe() const;  // "uid 0 (root), uid 1000 (alice), gid 27 (sudo)"
};
[[nodiscard]] std::string user_name(std::uint32_t uid);  // "1000 (alice)" or "1000"

// A shared mapping. Move-only; unmaps on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, std::size_t n) noexcept : base_(p), size_(n) {}
  ~Mapping();
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  [[nodiscard]] void* get() const noexcept { return base_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

// A file descriptor. Move-only; closes on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept;
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] int release() noexcept;

 private:
  int fd_ = -1;
};

// A memfd of `bytes`, its memory reserved now (a shortage is an error here, not a SIGBUS later),
// mapped read-write into this process and sealed against resizing; `read_only_for_others` adds
// F_SEAL_FUTURE_WRITE after mapping. Errors name `what` and the sizes.
struct SharedMemory {
  Fd fd;
  Mapping map;
};
[[nodiscard]] SharedMemory create_shared(const std::string& what, std::size_t bytes,
                                         bool read_only_for_others);
// A read-only descriptor of the same memory (reopened through /proc/self/fd).
[[nodiscard]] Fd reopen_read_only(int fd, const std::string& what);

[[nodiscard]] std::string channel_path(const std::string& dir, const std::string& channel);
// Throws config_error unless the name is 1..64 of [A-Za-z0-9_.-].
void validate_channel_name(const std::string& channel);
[[nodiscard]] std::size_t ring_bytes(std::uint64_t capacity) noexcept;
// How far ahead the publisher prefetches slots for writing (PublisherConfig::prefetch_ahead):
// at most a quarter of the ring, so that the slot fetched holds a tick three quarters of a ring
// old or older, which a subscriber that keeps up has read, and never wraps onto the slot just
// written; on a ring of two or three slots, none.
[[nodiscard]] constexpr std::uint64_t prefetch_distance(std::uint64_t ahead, std::uint64_t capacity) noexcept {
  return ahead < capacity / 4 ? ahead : capacity / 4;
}
[[nodiscard]] std::size_t control_bytes() noexcept;
[[nodiscard]] std::size_t status_bytes() noexcept;
[[nodiscard]] std::size_t table_bytes(std::size_t entry_bytes) noexcept;  // whole pages

// Publisher side: a listening socket bound at channel_path, atomically: of publishers racing
// for one name exactly one wins; the others get Errc::rejected naming the live publisher. A
// name left by a dead publisher is replaced; anything else at the path (a file, FIFO, symlink,
// another user's socket) is an error naming what and whose it is.
struct Listener {
  Fd fd;
  std::string path;
  std::uint64_t dev = 0;  // the name's inode, to remove only our own
  std::uint64_t ino = 0;
};
[[nodiscard]] Listener listen_channel(const std::string& dir, const std::string& channel);
// Removes the channel's name if it is still ours.
void unlink_channel(const Listener& l) noexcept;

// Handshake I/O. send_message passes `fds` along (SCM_RIGHTS). receive_message returns the
// message length (0: peer closed, -1: error with errno) and keeps at most `max_fds` received
// descriptors (any others are closed: a peer cannot make us hold its files).
bool send_message(int sock, const void* msg, std::size_t n, const int* fds, std::size_t n_fds) noexcept;
long receive_message(int sock, void* msg, std::size_t n, std::vector<Fd>& fds, std::size_t max_fds);

// Subscriber side: maps a memfd the publisher handed over after checking it is a regular file of
// exactly `bytes` that nobody can shrink (no SIGBUS under our reads).
[[nodiscard]] Mapping map_received(int fd, std::size_t bytes, bool writable, const std::string& what);

// Subscriber side: connects to the channel, waiting up to `timeout` for it to appear, and checks
// the socket's owner and the listening process's credentials against `publishers`. While it
// waits it calls `between` (when given) about every millisecond; what that throws ends the wait.
[[nodiscard]] Fd connect_channel(const std::string& dir, const std::string& channel,
                                 std::chrono::milliseconds timeout, const Allow& publishers,
                                 PeerCred& publisher, const std::function<void()>* between = nullptr);

[[nodiscard]] std::uint64_t monotonic_ns() noexcept;

}  // namespace tickrail::shm
