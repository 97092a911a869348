#include "transport/shm/shm_subscriber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tickrail/error.hpp"
#include "tickrail/log.hpp"
#include "tickrail/memory.hpp"

namespace tickrail::shm {
namespace {
constexpr std::uint32_t st(EntryState s) { return static_cast<std::uint32_t>(s); }
}  // namespace

ShmSubscriber::ShmSubscriber(const SubscriberConfig& config)
    : config_(config),
      segment_(Segment::attach(config.shm_dir, config.channel, config.attach_timeout)),
      publisher_timeout_ns_(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(config.publisher_timeout).count())) {
  SegmentHeader& h = segment_.header();
  const std::string what = "subscribe to channel '" + config_.channel + "' (" + segment_.path() + ")";
  if (config_.ring_capacity != 0 && config_.ring_capacity != h.capacity) {
    throw Error(Errc::geometry_mismatch, what + ": the channel's rings hold " +
                                             std::to_string(h.capacity) + " ticks, config asks for " +
                                             std::to_string(config_.ring_capacity));
  }
  if (h.closed.load(std::memory_order_acquire) != 0 ||
      !process_alive(h.publisher_pid, h.publisher_start_time)) {
    throw Error(Errc::peer_gone, what + ": its publisher (pid " + std::to_string(h.publisher_pid) +
                                     ") is no longer running");
  }

  bool claimed = false;
  for (std::uint32_t i = 0; i < h.max_subscribers && !claimed; ++i) {
    std::uint32_t expected = st(EntryState::free);
    if (segment_.entry(i).state.compare_exchange_strong(expected, st(EntryState::claimed),
                                                        std::memory_order_acq_rel)) {
      index_ = i;
      claimed = true;
    }
  }
  if (!claimed) {
    throw Error(Errc::no_capacity, what + ": all " + std::to_string(h.max_subscribers) +
                                       " subscriber entries are taken (raise max_subscribers)");
  }
  entry_ = &segment_.entry(index_);
  entry_->policy.store(static_cast<std::uint32_t>(config_.policy), std::memory_order_relaxed);
  entry_->pid.store(::getpid(), std::memory_order_relaxed);
  entry_->pid_start_time.store(process_start_time(::getpid()).value_or(0),
                               std::memory_order_relaxed);
  entry_->disconnect_after_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(config_.disconnect_after).count());
  entry_->reason.store(0, std::memory_order_relaxed);
  entry_->attach_count.fetch_add(1, std::memory_order_relaxed);

  if (config_.lock_memory) {
    const std::size_t bytes = h.capacity * sizeof(Slot);
    if (::mlock(segment_.ring(index_), bytes) != 0) {
      const int e = errno;
      close();
      throw Error(Errc::locked_memory,
                  what + ": lock " + std::to_string(bytes) + " bytes of ring: " + std::strerror(e) +
                      "; the locked-memory limit is " + std::to_string(memlock_limit()) +
                      " bytes (raise it with `ulimit -l`, LimitMEMLOCK= in a systemd unit, or "
                      "/etc/security/limits.conf), or set lock_memory = false");
    }
  }
  entry_->state.store(st(EntryState::requested), std::memory_order_release);
  h.generation.fetch_add(1, std::memory_order_acq_rel);
  logger()->debug("subscriber: channel '{}' slot {} policy {}", config_.channel, index_,
                  to_string(config_.policy));
}

ShmSubscriber::~ShmSubscriber() { close(); }

bool ShmSubscriber::try_start() noexcept {
  if (started_) return true;
  if (entry_ == nullptr ||
      entry_->state.load(std::memory_order_acquire) != st(EntryState::active)) {
    return false;
  }
  reader_ = RingReader(segment_.ring(index_), segment_.header().capacity,
                       entry_->start_seq.load(std::memory_order_relaxed), &entry_->credit);
  started_ = true;
  return true;
}

SubscriberState ShmSubscriber::state() const noexcept {
  if (closed_) return SubscriberState::closed;
  const auto s = static_cast<EntryState>(entry_->state.load(std::memory_order_acquire));
  if (s == EntryState::evicted) return SubscriberState::evicted;
  const SegmentHeader& h = segment_.header();
  if (h.closed.load(std::memory_order_acquire) != 0) return SubscriberState::publisher_gone;
  const std::uint64_t beat = h.heartbeat_ns.load(std::memory_order_acquire);
  const std::uint64_t now = monotonic_ns();
  if (now > beat && now - beat > publisher_timeout_ns_) return SubscriberState::publisher_gone;
  switch (s) {
    case EntryState::claimed:
    case EntryState::requested: return SubscriberState::connecting;
    case EntryState::active: return SubscriberState::active;
    default: return SubscriberState::closed;  // our entry was taken from us
  }
}

std::string ShmSubscriber::reason() const {
  switch (state()) {
    case SubscriberState::evicted:
      return "evicted by the publisher of channel '" + config_.channel +
             "': its ring stayed full for longer than disconnect_after (" +
             std::to_string(config_.disconnect_after.count()) + " ms)";
    case SubscriberState::publisher_gone:
      if (segment_.header().closed.load(std::memory_order_acquire) != 0) {
        return "the publisher closed channel '" + config_.channel + "'";
      }
      return "the publisher of channel '" + config_.channel + "' (pid " +
             std::to_string(segment_.header().publisher_pid) + ") has been silent for more than " +
             std::to_string(config_.publisher_timeout.count()) + " ms";
    case SubscriberState::closed: return "closed";
    default: return {};
  }
}

void ShmSubscriber::close() noexcept {
  if (closed_ || entry_ == nullptr) {
    closed_ = true;
    return;
  }
  closed_ = true;
  std::uint32_t s = entry_->state.load(std::memory_order_acquire);
  while (s != st(EntryState::free) && s != st(EntryState::dead) &&
         s != st(EntryState::detaching)) {
    if (entry_->state.compare_exchange_weak(s, st(EntryState::detaching),
                                            std::memory_order_acq_rel)) {
      segment_.header().generation.fetch_add(1, std::memory_order_acq_rel);
      break;
    }
  }
}

}  // namespace tickrail::shm
