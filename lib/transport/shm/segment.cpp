#include "transport/shm/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "tickrail/error.hpp"

namespace tickrail::shm {
namespace {

constexpr std::size_t kPage = 4096;

constexpr std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

struct Layout {
  std::size_t entries_offset;
  std::size_t rings_offset;
  std::size_t size;
};

Layout layout_for(std::uint64_t capacity, std::uint32_t max_subscribers) {
  Layout l{};
  l.entries_offset = round_up(sizeof(SegmentHeader), kPage);
  l.rings_offset = round_up(l.entries_offset + max_subscribers * sizeof(Entry), kPage);
  l.size = round_up(l.rings_offset + max_subscribers * capacity * sizeof(Slot), kPage);
  return l;
}

// Closes a descriptor on scope exit: the mapping outlives it.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void* map_shared(int fd, std::size_t size, const std::string& path) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) throw_errno(errno, "mmap " + std::to_string(size) + " bytes of " + path);
  // Huge pages where the host allows them for shared memory; harmless where it does not.
  ::madvise(p, size, MADV_HUGEPAGE);
  return p;
}

}  // namespace

const char* to_string(EntryState s) noexcept {
  switch (s) {
    case EntryState::free: return "free";
    case EntryState::claimed: return "claimed";
    case EntryState::requested: return "requested";
    case EntryState::active: return "active";
    case EntryState::evicted: return "evicted";
    case EntryState::detaching: return "detaching";
    case EntryState::dead: return "dead";
  }
  return "unknown";
}

std::string segment_path(const std::string& dir, const std::string& channel) {
  return dir + "/tickrail." + channel;
}

void validate_channel_name(const std::string& channel) {
  bool ok = !channel.empty() && channel.size() <= 64;
  for (char c : channel) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    ok = ok && allowed;
  }
  if (!ok || channel == "." || channel == "..") {
    throw Error(Errc::config_error,
                "channel name '" + channel + "': use 1 to 64 of the characters A-Z a-z 0-9 _ - .");
  }
}

std::optional<std::uint64_t> process_start_time(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return std::nullopt;
  // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return std::nullopt;
  }
}

bool process_alive(int pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  const auto st = process_start_time(pid);
  return st && *st == start_time;
}

std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

Segment Segment::create(const std::string& dir, const std::string& channel, Geometry g) {
  validate_channel_name(channel);
  if (!is_valid_ring_capacity(g.capacity)) {
    throw Error(Errc::config_error, "ring_capacity " + std::to_string(g.capacity) +
                                        ": must be a power of two from 2 to 2^30");
  }
  if (g.max_subscribers == 0 || g.max_subscribers > kMaxSubscribers) {
    throw Error(Errc::config_error, "max_subscribers " + std::to_string(g.max_subscribers) +
                                        ": must be 1.." + std::to_string(kMaxSubscribers));
  }
  const std::string path = segment_path(dir, channel);
  const Layout l = layout_for(g.capacity, g.max_subscribers);

  // A segment left behind is replaced only if its publisher is gone.
  {
    Fd old{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    struct stat st {};
    if (old.fd >= 0 && ::fstat(old.fd, &st) == 0 &&
        static_cast<std::size_t>(st.st_size) >= sizeof(SegmentHeader)) {
      void* p = ::mmap(nullptr, sizeof(SegmentHeader), PROT_READ, MAP_SHARED, old.fd, 0);
      if (p != MAP_FAILED) {
        const auto* h = static_cast<const SegmentHeader*>(p);
        const bool live = h->magic.load(std::memory_order_acquire) == kMagic &&
                          h->closed.load(std::memory_order_acquire) == 0 &&
                          process_alive(h->publisher_pid, h->publisher_start_time);
        const int pid = h->publisher_pid;
        ::munmap(p, sizeof(SegmentHeader));
        if (live) {
          throw Error(Errc::rejected, "channel '" + channel + "' (" + path +
                                          ") is already published by live process " +
                                          std::to_string(pid));
        }
      }
    }
  }
  ::unlink(path.c_str());

  // Build under a temporary name and rename into place, so a subscriber never maps a segment
  // whose header is half written.
  std::random_device rd;
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(rd());
  Fd fd{::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660)};
  if (fd.fd < 0) throw_errno(errno, "create channel segment " + tmp);
  if (::ftruncate(fd.fd, static_cast<off_t>(l.size)) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(e, "size channel segment " + path + " to " + std::to_string(l.size) + " bytes");
  }
  void* base = nullptr;
  try {
    base = map_shared(fd.fd, l.size, tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }

  auto* h = new (base) SegmentHeader{};
  h->version = kVersion;
  h->slot_size = sizeof(Slot);
  h->capacity = g.capacity;
  h->max_subscribers = g.max_subscribers;
  h->publisher_pid = ::getpid();
  h->publisher_start_time = process_start_time(::getpid()).value_or(0);
  h->segment_size = l.size;
  h->entries_offset = l.entries_offset;
  h->rings_offset = l.rings_offset;
  h->session_id = (std::uint64_t{rd()} << 32) | rd();
  h->heartbeat_ns.store(monotonic_ns(), std::memory_order_relaxed);
  h->next_seq.store(1, std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < g.max_subscribers; ++i) {
    new (static_cast<char*>(base) + l.entries_offset + i * sizeof(Entry)) Entry{};
  }
  h->magic.store(kMagic, std::memory_order_release);

  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::munmap(base, l.size);
    ::unlink(tmp.c_str());
    throw_errno(e, "publish channel segment " + path);
  }
  Segment s;
  s.base_ = base;
  s.size_ = l.size;
  s.path_ = path;
  s.owner_ = true;
  return s;
}

Segment Segment::attach(const std::string& dir, const std::string& channel,
                        std::chrono::milliseconds timeout) {
  validate_channel_name(channel);
  const std::string path = segment_path(dir, channel);
  const std::string what = "attach channel '" + channel + "' (" + path + ")";
  const auto deadline = std::chrono::steady_clock::now() + timeout;

  Fd fd;
  for (;;) {
    fd.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd.fd >= 0) break;
    const int e = errno;
    if (e != ENOENT) throw_errno(e, what);
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(Errc::not_found, what + ": no such channel" +
                                       (timeout.count() > 0
                                            ? " after waiting " + std::to_string(timeout.count()) + " ms"
                                            : std::string{}) +
                                       "; is the publisher running?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw_errno(errno, what);
  const auto file_size = static_cast<std::size_t>(st.st_size);
  if (file_size < sizeof(SegmentHeader)) {
    throw Error(Errc::truncated, what + ": segment is " + std::to_string(file_size) +
                                     " bytes, smaller than its " +
                                     std::to_string(sizeof(SegmentHeader)) + "-byte header");
  }
  void* hp = ::mmap(nullptr, sizeof(SegmentHeader), PROT_READ, MAP_SHARED, fd.fd, 0);
  if (hp == MAP_FAILED) throw_errno(errno, what + ": map header");
  const auto* h = static_cast<const SegmentHeader*>(hp);
  const std::uint64_t magic = h->magic.load(std::memory_order_acquire);
  const std::uint32_t version = h->version;
  const std::uint32_t slot_size = h->slot_size;
  const std::uint64_t capacity = h->capacity;
  const std::uint32_t max_subs = h->max_subscribers;
  const std::uint64_t declared = h->segment_size;
  const std::uint64_t entries_offset = h->entries_offset;
  const std::uint64_t rings_offset = h->rings_offset;
  ::munmap(hp, sizeof(SegmentHeader));

  if (magic != kMagic) {
    throw Error(Errc::bad_magic, what + ": not a tickrail channel segment (magic " +
                                     std::to_string(magic) + ")");
  }
  if (version != kVersion) {
    throw Error(Errc::version_mismatch, what + ": segment has layout version " +
                                            std::to_string(version) + ", this library speaks " +
                                            std::to_string(kVersion));
  }
  if (slot_size != sizeof(Slot) || !is_valid_ring_capacity(capacity) || max_subs == 0 ||
      max_subs > kMaxSubscribers) {
    throw Error(Errc::geometry_mismatch,
                what + ": unusable geometry (slot " + std::to_string(slot_size) + " bytes, capacity " +
                    std::to_string(capacity) + ", " + std::to_string(max_subs) + " subscribers)");
  }
  const Layout l = layout_for(capacity, max_subs);
  if (declared != l.size || entries_offset != l.entries_offset || rings_offset != l.rings_offset) {
    throw Error(Errc::geometry_mismatch, what + ": header layout does not match its geometry");
  }
  if (file_size < l.size) {
    throw Error(Errc::truncated, what + ": segment is " + std::to_string(file_size) +
                                     " bytes but its header needs " + std::to_string(l.size));
  }
  Segment s;
  s.base_ = map_shared(fd.fd, l.size, path);
  s.size_ = l.size;
  s.path_ = path;
  s.owner_ = false;
  return s;
}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

Segment::Segment(Segment&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)), owner_(std::exchange(o.owner_, false)) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
    owner_ = std::exchange(o.owner_, false);
  }
  return *this;
}

Entry& Segment::entry(std::uint32_t i) const noexcept {
  return *reinterpret_cast<Entry*>(static_cast<char*>(base_) + header().entries_offset +
                                   i * sizeof(Entry));
}

Slot* Segment::ring(std::uint32_t i) const noexcept {
  return reinterpret_cast<Slot*>(static_cast<char*>(base_) + header().rings_offset +
                                 i * header().capacity * sizeof(Slot));
}

void Segment::unlink() noexcept {
  if (owner_ && !path_.empty()) {
    // Only our own segment: a newer publisher may have replaced it under the same name.
    Fd fd{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd >= 0) {
      void* p = ::mmap(nullptr, sizeof(SegmentHeader), PROT_READ, MAP_SHARED, fd.fd, 0);
      if (p != MAP_FAILED) {
        const bool same = static_cast<const SegmentHeader*>(p)->session_id == header().session_id;
        ::munmap(p, sizeof(SegmentHeader));
        if (same) ::unlink(path_.c_str());
      }
    }
    owner_ = false;
  }
}

}  // namespace tickrail::shm
