// Control plane of the shared-memory publisher: segment creation, the conductor, teardown.
#include "transport/shm/shm_publisher.hpp"

#include <sys/mman.h>

#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/log.hpp"
#include "tickrail/memory.hpp"

namespace tickrail::shm {

ShmPublisher::ShmPublisher(const PublisherConfig& config)
    : config_(config),
      segment_(Segment::create(config.shm_dir, config.channel,
                               {config.ring_capacity, config.max_subscribers})),
      capacity_(config.ring_capacity),
      mask_(config.ring_capacity - 1) {
  (void)Clock::instance();  // calibrate before the first publish, not during it
  seen_generation_ = segment_.header().generation.load(std::memory_order_acquire);
  if (config_.lock_memory && ::mlock(segment_.base(), segment_.size()) != 0) {
    throw Error(Errc::locked_memory,
                "lock " + std::to_string(segment_.size()) + " bytes of channel segment " +
                    segment_.path() + ": " + std::strerror(errno) + "; the locked-memory limit is " +
                    std::to_string(memlock_limit()) +
                    " bytes (raise it with `ulimit -l`, LimitMEMLOCK= in a systemd unit, or "
                    "/etc/security/limits.conf), or set lock_memory = false");
  }
  conductor_ = std::jthread([this](std::stop_token st) { conductor_loop(st); });
  logger()->info("publisher: channel '{}' at {} ({} bytes, {} subscribers x {} slots)",
                 config_.channel, segment_.path(), segment_.size(), config_.max_subscribers,
                 config_.ring_capacity);
}

ShmPublisher::~ShmPublisher() { close(); }

void ShmPublisher::close() noexcept {
  if (closing_.exchange(true)) return;
  conductor_.request_stop();
  if (conductor_.joinable()) conductor_.join();
  SegmentHeader& h = segment_.header();
  h.next_seq.store(next_seq_, std::memory_order_relaxed);
  h.closed.store(1, std::memory_order_release);
  segment_.unlink();
}

void ShmPublisher::conductor_loop(std::stop_token st) {
  SegmentHeader& h = segment_.header();
  const std::uint32_t n = h.max_subscribers;
  while (!st.stop_requested()) {
    h.heartbeat_ns.store(monotonic_ns(), std::memory_order_release);
    bool changed = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      Entry& e = segment_.entry(i);
      std::uint32_t s = e.state.load(std::memory_order_acquire);
      const auto state = static_cast<EntryState>(s);
      if (state == EntryState::free || state == EntryState::dead ||
          state == EntryState::detaching) {
        continue;
      }
      if (state == EntryState::claimed) continue;  // fields still being written
      const std::int32_t pid = e.pid.load(std::memory_order_relaxed);
      if (!process_alive(pid, e.pid_start_time.load(std::memory_order_relaxed))) {
        if (e.state.compare_exchange_strong(s, static_cast<std::uint32_t>(EntryState::dead),
                                            std::memory_order_acq_rel)) {
          logger()->warn("publisher '{}': subscriber pid {} in slot {} is gone; reclaiming its ring",
                         config_.channel, pid, i);
          changed = true;
        }
      }
    }
    if (changed) h.generation.fetch_add(1, std::memory_order_acq_rel);
    // Bounded sleep: stop requests are seen within one period.
    std::this_thread::sleep_for(config_.conductor_period);
  }
}

std::vector<SubscriberStatus> ShmPublisher::subscribers() const {
  std::vector<SubscriberStatus> out;
  const SegmentHeader& h = segment_.header();
  for (std::uint32_t i = 0; i < h.max_subscribers; ++i) {
    const Entry& e = segment_.entry(i);
    const auto state = static_cast<EntryState>(e.state.load(std::memory_order_acquire));
    if (state == EntryState::free) continue;
    SubscriberStatus s;
    s.slot = i;
    s.pid = e.pid.load(std::memory_order_relaxed);
    s.policy = static_cast<SlowConsumerPolicy>(e.policy.load(std::memory_order_relaxed));
    s.state = to_string(state);
    s.position = e.credit.load(std::memory_order_acquire);
    const std::uint64_t published = h.next_seq.load(std::memory_order_relaxed);
    s.lag = published > s.position ? published - s.position : 0;
    s.back_pressure = e.back_pressure.load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tickrail::shm
