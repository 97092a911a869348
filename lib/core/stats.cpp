// Writer side of the counters file: the process-wide registry of blocks, the file's lifetime and
// the stats thread that refreshes publishers' per-subscriber rows. Control plane only; the hot
// path writes counters through Registration (tickrail/counters.hpp).
#include "core/stats.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stop_token>
#include <thread>

#include "tickrail/clock.hpp"
#include "core/log.hpp"
#include "core/enum_names.hpp"
#include "core/process_identity.hpp"
#include "core/stats_words.hpp"
#include "core/thread.hpp"

namespace tickrail::stats {

namespace {

constexpr detail::EnumName<BlockKind> kKindNames[] = {{BlockKind::free, "free"},
                                                      {BlockKind::publisher, "publisher"},
                                                      {BlockKind::subscriber, "subscriber"},
                                                      {BlockKind::failover, "failover"}};
constexpr detail::EnumName<EndpointState> kStateNames[] = {{EndpointState::open, "open"},
    {EndpointState::connecting, "connecting"}, {EndpointState::active, "active"},
    {EndpointState::evicted, "evicted"}, {EndpointState::publisher_gone, "publisher gone"},
    {EndpointState::closed, "closed"}};
// The reader shows every state it may find in a file by this table (tickrail_endpoint_state).
static_assert(detail::names_every_value(kStateNames));

std::uint64_t realtime_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// ns per cycles() unit. The library's clock already knows it when it runs on the TSC; otherwise
// (TSC not reported invariant) measure it briefly, since the poll gap is read with RDTSC anyway.
double measure_ns_per_cycle() {
#if defined(__x86_64__) || defined(__i386__)
  const Clock& clk = Clock::instance();
  if (clk.using_tsc()) return clk.ns_per_cycle();
  const std::uint64_t t0 = detail::monotonic_raw_ns();
  const std::uint64_t c0 = cycles();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::uint64_t t1 = detail::monotonic_raw_ns();
  const std::uint64_t c1 = cycles();
  if (c1 <= c0) return 0;
  return static_cast<double>(t1 - t0) / static_cast<double>(c1 - c0);
#else
  return 1.0;  // cycles() is CLOCK_MONOTONIC_RAW in ns
#endif
}

class Registry {
 public:
  static Registry& instance() {
    // Leaked on purpose: endpoints destroyed during static destruction still find it.
    static Registry* r = new Registry;
    return *r;
  }

  struct Claimed {
    Block* block = nullptr;
    std::uint64_t epoch = 0;
  };

  Claimed claim(const Identity& id, RowSource rows) {
    std::unique_lock lk(mu_);
    if (pid_ != ::getpid()) forget_parent_locked();
    if (base_ == nullptr && !open_file_locked()) return {};
    std::uint32_t i = 0;
    while (i < kMaxBlocks && used_[i]) ++i;
    if (i == kMaxBlocks) {
      if (!warned_full_) {
        warned_full_ = true;
        logger()->warn("stats: all {} counter blocks of {} are taken; further publishers and "
                       "subscribers of this process have no live counters",
                       kMaxBlocks, path_);
      }
      return {};
    }
    used_[i] = true;
    ++n_used_;
    Block& b = block(i);
    const std::uint64_t seq = b.identity_seq.load(std::memory_order_relaxed);
    b.identity_seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    b.kind.store(static_cast<std::uint64_t>(id.kind), std::memory_order_relaxed);
    b.transport.store(static_cast<std::uint64_t>(id.transport), std::memory_order_relaxed);
    b.registered_ns.store(realtime_ns(), std::memory_order_relaxed);
    store_name(b.label, kNameWords, id.label);
    b.transport_b.store(static_cast<std::uint64_t>(id.transport_b), std::memory_order_relaxed);
    store_name(b.label_b, kNameWords, id.label_b);
    for (Word& c : b.counters) c.store(0, std::memory_order_relaxed);
    for (Word& c : b.thread_counters) c.store(0, std::memory_order_relaxed);
    b.row_count.store(0, std::memory_order_relaxed);
    b.refreshed_ns.store(0, std::memory_order_relaxed);
    b.state.store(static_cast<std::uint32_t>(id.kind == BlockKind::publisher
                                                 ? EndpointState::open
                                                 : EndpointState::connecting),
                  std::memory_order_relaxed);
    b.identity_seq.store(seq + 2, std::memory_order_release);
    b.in_use.store(1, std::memory_order_release);

    sources_[i] = std::move(rows);
    if (sources_[i] && thread_ == nullptr) {
      thread_ = new std::jthread([this](std::stop_token st) { run(st); });
    }
    return {&b, epoch_};
  }

  void release(Block* b, std::uint64_t epoch) noexcept {
    std::jthread* stop = nullptr;
    {
      std::lock_guard lk(mu_);
      if (epoch != epoch_ || base_ == nullptr) return;  // a block of our parent process
      const auto i = static_cast<std::uint32_t>(b - &block(0));
      if (i >= kMaxBlocks || !used_[i]) return;
      b->in_use.store(0, std::memory_order_release);
      used_[i] = false;
      sources_[i] = nullptr;
      --n_used_;
      if (std::none_of(sources_.begin(), sources_.end(), [](const RowSource& s) { return bool(s); })) {
        stop = thread_;
        thread_ = nullptr;
      }
      if (n_used_ == 0) close_file_locked();
    }
    if (stop != nullptr) {
      stop->request_stop();
      cv_.notify_all();
      delete stop;  // joins
    }
  }

  std::string path() {
    std::lock_guard lk(mu_);
    return base_ != nullptr && pid_ == ::getpid() ? path_ : std::string();
  }

 private:
  Registry() {
    pid_ = ::getpid();
    pthread_atfork([] { instance().mu_.lock(); }, [] { instance().mu_.unlock(); },
                   [] {
                     Registry& r = instance();
                     ++r.epoch_;  // inherited Registrations must not release the parent's blocks
                     r.mu_.unlock();
                   });
  }

  Block& block(std::uint32_t i) const noexcept {
    return reinterpret_cast<Block*>(static_cast<char*>(base_) + sizeof(FileHeader))[i];
  }

  // In a forked child: the file, blocks and thread are the parent's. Leave the mapping alone
  // (inherited endpoints may still write to it) and never join a thread the child does not have.
  void forget_parent_locked() noexcept {
    base_ = nullptr;
    path_.clear();
    used_.fill(false);
    for (RowSource& s : sources_) s = nullptr;
    n_used_ = 0;
    thread_ = nullptr;  // leaked: it belongs to the parent
    pid_ = ::getpid();
  }

  bool open_file_locked() {
    const std::string dir = stat_dir();
    const std::string path = stat_path(dir, ::getpid());
    const auto fail = [&](const char* what) {
      const int e = errno;
      if (!warned_open_) {
        warned_open_ = true;
        logger()->warn("stats: {} {}: {}; this process runs without live counters "
                       "(set TICKRAIL_STAT_DIR to a writable directory, or TICKRAIL_STATS=0)",
                       what, path, std::strerror(e));
      }
      return false;
    };
    // A file with our pid can only be a dead process's leftover.
    (void)::unlink(path.c_str());
    // Owner and group only: the counters tell who trades what, and how fast.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0) return fail("create");
    if (::ftruncate(fd, static_cast<off_t>(kFileSize)) != 0) {
      const bool r = fail("size");
      ::close(fd);
      ::unlink(path.c_str());
      return r;
    }
    void* p = ::mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const bool r = fail("map");
      ::close(fd);
      ::unlink(path.c_str());
      return r;
    }
    ::close(fd);
    auto* h = static_cast<FileHeader*>(p);
    h->version = kVersion;
    h->header_size = sizeof(FileHeader);
    h->block_size = sizeof(Block);
    h->block_count = kMaxBlocks;
    h->row_count = kMaxRows;
    h->pid = ::getpid();
    h->start_time = detail::process_start_time(::getpid()).value_or(0);
    h->created_ns = realtime_ns();
    h->ns_per_cycle = measure_ns_per_cycle();
    std::strncpy(h->program, program_invocation_short_name, sizeof h->program - 1);
    h->magic.store(kMagic, std::memory_order_release);
    base_ = p;
    path_ = path;
    return true;
  }

  void close_file_locked() noexcept {
    ::munmap(base_, kFileSize);
    ::unlink(path_.c_str());
    base_ = nullptr;
    path_.clear();
  }

  void run(std::stop_token st) {
    // Named, and placed where the endpoints' placement puts background threads.
    const detail::ProcessThread self("tr-stats");
    std::unique_lock lk(mu_);
    while (!st.stop_requested()) {
      cv_.wait_for(lk, st, std::chrono::milliseconds(kRefreshPeriodMs), [] { return false; });
      if (st.stop_requested()) break;
      ++wakeups_;
      refresh_locked();
    }
  }

  void refresh_locked() noexcept {
    for (std::uint32_t i = 0; i < kMaxBlocks; ++i) {
      if (!used_[i] || !sources_[i]) continue;
      std::vector<SubscriberStatus> rows;
      try {
        rows = sources_[i]();
      } catch (const std::exception& e) {
        if (!warned_rows_) {
          warned_rows_ = true;
          logger()->warn("stats: reading subscriber rows failed: {}", e.what());
        }
        continue;
      }
      write_rows(block(i), rows);
      counter_word(block(i), BlockKind::publisher, static_cast<std::uint32_t>(PubCounter::stats_wakeups))
          ->store(wakeups_, std::memory_order_relaxed);
    }
  }

  static void write_rows(Block& b, const std::vector<SubscriberStatus>& rows) noexcept {
    const std::uint64_t seq = b.rows_seq.load(std::memory_order_relaxed);
    b.rows_seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(rows.size(), kMaxRows));
    for (std::uint32_t r = 0; r < n; ++r) {
      const SubscriberStatus& v = rows[r];
      Row& out = b.rows[r];
      out.position.store(v.position, std::memory_order_relaxed);
      out.lag.store(v.lag, std::memory_order_relaxed);
      out.back_pressure.store(v.back_pressure, std::memory_order_relaxed);
      out.slot.store(v.slot, std::memory_order_relaxed);
      out.pid.store(static_cast<std::uint64_t>(static_cast<std::int64_t>(v.pid)),
                    std::memory_order_relaxed);
      out.policy.store(static_cast<std::uint64_t>(v.policy), std::memory_order_relaxed);
      store_name(out.state, std::size(out.state), v.state);
      store_name(out.peer, std::size(out.peer), v.peer);
    }
    b.row_count.store(n, std::memory_order_relaxed);
    b.refreshed_ns.store(realtime_ns(), std::memory_order_relaxed);
    b.rows_seq.store(seq + 2, std::memory_order_release);
  }

  std::mutex mu_;
  std::condition_variable_any cv_;
  int pid_ = 0;
  void* base_ = nullptr;
  std::string path_;
  std::array<bool, kMaxBlocks> used_{};
  std::array<RowSource, kMaxBlocks> sources_{};
  std::uint32_t n_used_ = 0;
  std::jthread* thread_ = nullptr;  // a pointer: a forked child must be able to drop it unjoined
  std::uint64_t wakeups_ = 0;       // the stats thread's (under mu_)
  std::uint64_t epoch_ = 1;
  bool warned_open_ = false;
  bool warned_full_ = false;
  bool warned_rows_ = false;
};

}  // namespace

const CounterInfo* counter_info(BlockKind kind, std::uint32_t index) noexcept {
  if (kind == BlockKind::publisher && index < std::size(kPubCounterInfo)) {
    return &kPubCounterInfo[index];
  }
  if (kind == BlockKind::subscriber && index < std::size(kSubCounterInfo)) {
    return &kSubCounterInfo[index];
  }
  // A failover's own counters; its lines' are per line (kFoLineCounterInfo, fo_word).
  if (kind == BlockKind::failover && index < std::size(kFoCounterInfo)) return &kFoCounterInfo[index];
  return nullptr;
}

const Word* counter_word(const Block& b, BlockKind kind, std::uint32_t index) noexcept {
  const CounterInfo* c = counter_info(kind, index);
  if (c == nullptr || !c->threaded) return &b.counters[std::min(index, kCounters - 1)];
  const std::uint32_t slot = kind == BlockKind::publisher ? thread_slot(kPubCounterInfo, index)
                                                          : thread_slot(kSubCounterInfo, index);
  return &b.thread_counters[std::min(slot, kThreadCounters - 1)];
}

Word* counter_word(Block& b, BlockKind kind, std::uint32_t index) noexcept {
  return const_cast<Word*>(counter_word(static_cast<const Block&>(b), kind, index));
}

Word* thread_word(const Registration& r, PubCounter c) noexcept {
  if (r.block() == nullptr) return nullptr;
  return counter_word(*r.block(), BlockKind::publisher, static_cast<std::uint32_t>(c));
}

Word* thread_word(const Registration& r, SubCounter c) noexcept {
  if (r.block() == nullptr) return nullptr;
  return counter_word(*r.block(), BlockKind::subscriber, static_cast<std::uint32_t>(c));
}

const char* counter_name(BlockKind kind, std::uint32_t index) noexcept {
  const CounterInfo* c = counter_info(kind, index);
  return c != nullptr ? c->name : nullptr;
}

std::uint32_t counter_count(BlockKind kind) noexcept {
  switch (kind) {
    case BlockKind::publisher: return static_cast<std::uint32_t>(PubCounter::count_);
    case BlockKind::subscriber: return static_cast<std::uint32_t>(SubCounter::count_);
    case BlockKind::failover: return static_cast<std::uint32_t>(FoCounter::count_);
    case BlockKind::free: break;
  }
  return 0;
}

const char* to_string(BlockKind k) noexcept { return detail::name_of(kKindNames, k); }
const char* to_string(EndpointState s) noexcept { return detail::name_of(kStateNames, s); }

void Registration::set_state(EndpointState s) const noexcept {
  if (block_ != nullptr) block_->state.store(static_cast<std::uint32_t>(s), std::memory_order_relaxed);
}

void Registration::reset() noexcept {
  if (block_ == nullptr) return;
  Registry::instance().release(block_, epoch_);
  block_ = nullptr;
  counters_ = nullptr;
}

namespace {

Registration register_identity(const Identity& id, RowSource rows) {
  if (!enabled_by_environment()) return {};
  try {
    const auto c = Registry::instance().claim(id, std::move(rows));
    if (c.block == nullptr) return {};
    return RegistrationAccess::make(c.block, c.epoch);
  } catch (const std::exception& e) {
    logger()->warn("stats: no live counters for '{}': {}", id.label, e.what());
    return {};
  }
}

}  // namespace

Registration register_endpoint(BlockKind kind, TransportKind transport, std::string_view label,
                               RowSource rows) {
  return register_identity({kind, transport, label, {}, {}}, std::move(rows));
}

Registration register_endpoint(const Identity& id) { return register_identity(id, {}); }

std::string endpoint_label(const SubscriberConfig& c) {
  std::string label = c.channel;
  if (c.transport != TransportKind::shm && !c.rdma.address.empty()) {
    label += "@" + c.rdma.address + ":" + std::to_string(c.rdma.port);
  }
  return label;
}

bool enabled_by_environment() noexcept {
  const char* v = std::getenv("TICKRAIL_STATS");
  if (v == nullptr) return true;
  const std::string_view s(v);
  if (s == "0" || s == "off" || s == "false" || s == "no") return false;
  // A typo meant to turn them off ("of", "disable") would leave them on without a word.
  static std::atomic<bool> said{false};
  if (!(s.empty() || s == "1" || s == "on" || s == "true" || s == "yes") && !said.exchange(true)) {
    try {
      logger()->warn("TICKRAIL_STATS='{}' is neither 0, off, false or no (live counters off) nor 1, on, "
                     "true or yes: the counters stay on", s);
    } catch (...) {  // a warning that cannot be written changes nothing
    }
  }
  return true;
}

std::string stat_dir() {
  const char* v = std::getenv("TICKRAIL_STAT_DIR");
  return v != nullptr && *v != '\0' ? std::string(v) : std::string("/dev/shm");
}

std::string stat_path(const std::string& dir, int pid) {
  std::string p = dir;
  if (p.empty() || p.back() != '/') p += '/';
  return p + "tickrail-stat." + std::to_string(pid);
}

std::string current_stat_path() { return Registry::instance().path(); }

}  // namespace tickrail::stats
