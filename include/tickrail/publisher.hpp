// Publisher: sequences ticks and delivers each one to every subscriber's ring.
//
// Threading: one thread publishes (publish() is not thread-safe; several producing threads use
// ThreadedPublisher). Control-plane calls (subscribers(), close()) may come from any thread.
// The transport is chosen by PublisherConfig::transport; the API is the same for all.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tickrail/clock.hpp"
#include "tickrail/config.hpp"
#include "tickrail/counters.hpp"
#include "tickrail/ring.hpp"
#include "tickrail/state.hpp"
#include "tickrail/tick.hpp"
#include "tickrail/export.hpp"

namespace tickrail {

enum class PublishStatus : std::uint8_t {
  ok,              // every tick was delivered to every subscriber
  back_pressured,  // a block/disconnect subscriber's ring is full: `published` < count asked
  no_subscribers,  // ticks were sequenced, but nobody was subscribed to receive them
  closed,          // the publisher was closed: nothing was published
};

struct [[nodiscard]] PublishResult {
  PublishStatus status = PublishStatus::ok;
  std::uint32_t published = 0;  // ticks accepted (sequenced), from the front of the span
  std::uint64_t blocked = 0;    // bit i set: subscriber slot i had no room
  [[nodiscard]] bool ok() const noexcept { return status == PublishStatus::ok; }
};

namespace detail {
class PublisherTransport;

// A ring that a publish lane writes: a subscriber's, in memory the publisher maps.
struct LaneRing {
  Slot* slots = nullptr;
  bool may_be_read = false;  // its policy overwrites unread slots (write_slot)
};

// A ring transport's path for one tick, taken inline by Publisher::publish as Subscriber::poll
// reads a ring inline: one tick needs no call, only three checks and the slot stores. The
// transport (shm) owns it and keeps it as its own publish state: `n_rings` is 0 whenever a tick
// needs more than the stores (nobody served, a last-value table to update), `room_until` comes
// from the credits it last read, and each change it must see first (a seat, close()) bumps
// `*generation`, which sends the next publish out of line. Publishing thread only (close(), from
// any thread, touches only `*generation`).
struct PublishLane {
  std::uint64_t next_seq = 1;         // the next tick's sequence number
  std::uint64_t room_until = 0;       // every ring has room below this sequence; 0: look first
  std::uint64_t seen_generation = 0;  // *generation when the transport last looked
  const std::atomic<std::uint64_t>* generation = nullptr;
  const LaneRing* rings = nullptr;
  std::uint32_t n_rings = 0;
  bool stamp = false;  // PublisherConfig::stamp_send_time
  std::uint16_t prefetch = 0;  // PublisherConfig::prefetch_ahead, at most a quarter of the ring
  std::uint64_t mask = 0;
  std::atomic<std::uint64_t>* published_seq = nullptr;  // the channel's next_seq, for subscribers
  PublisherCounters* counters = nullptr;

  [[nodiscard]] bool takes_one() const noexcept {
    return n_rings != 0 && next_seq < room_until &&
           generation->load(std::memory_order_acquire) == seen_generation;
  }
  // As the transport's own publish of one tick; only after takes_one().
  void write(const Tick& t) noexcept {
    // Locals: a slot's stores could alias these fields, which would then be re-read.
    const std::uint64_t seq = next_seq;
    const std::uint64_t ts = stamp ? Clock::now() : t.send_ts;
    const LaneRing* const r = rings;
    const std::uint32_t n = n_rings;
    const std::uint64_t at = seq & mask;
    for (std::uint32_t i = 0; i < n; ++i) write_slot(r[i].slots[at], t, seq, ts, r[i].may_be_read);
    if (prefetch != 0) {
      for (std::uint32_t i = 0; i < n; ++i) __builtin_prefetch(&r[i].slots[(seq + prefetch) & mask], 1, 3);
    }
    next_seq = seq + 1;
    ++counters->published;
    published_seq->store(seq + 1, std::memory_order_relaxed);
  }
};
}  // namespace detail

// On lines of its own, wherever the application puts it: publish() reads it on every call, and a
// neighbour another thread writes (the next element of a vector, polled by another core) must not
// share its line. Likewise Subscriber and FailoverSubscriber, which their polls also write.
class TICKRAIL_API alignas(2 * kCacheLine) Publisher {
 public:
  // Creates the channel (throws Error: bad config, channel already published by a live process,
  // no memory). Subscribers may attach from then on.
  explicit Publisher(const PublisherConfig& config);
  ~Publisher();
  Publisher(Publisher&&) noexcept;
  Publisher& operator=(Publisher&&) noexcept;
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Fast path: never throws, allocates, logs or makes a system call of its own. One tick on
  // shared memory is published inline (detail::PublishLane) unless the transport must look first.
  PublishResult publish(const Tick& tick) noexcept {
    if (lane_ != nullptr && lane_->takes_one()) [[likely]] {
      lane_->write(tick);
      // The lane changes no counter but `published` (store_stats()).
      if (stats_.block() != nullptr) stats_.put(stats::PubCounter::published, counters_->published);
      return {PublishStatus::ok, 1, 0};
    }
    return publish(std::span<const Tick>(&tick, 1));
  }
  PublishResult publish(std::span<const Tick> ticks) noexcept;

  // Applies subscriber changes (attaches, detaches, dead ones reclaimed) without publishing.
  // publish() does this too; call it from an idle publishing loop so that subscribers become
  // active before the next tick. Same thread as publish().
  void service() noexcept;
  // Serves subscriber changes (service()) until subscriber_count() reaches `n`, `timeout` has
  // passed or `*stop` turns true, sleeping a millisecond between looks; returns
  // subscriber_count() then (>= n: reached). Bounded; same thread as publish().
  std::uint32_t wait_subscribers(std::uint32_t n, std::chrono::milliseconds timeout,
                                 const std::atomic<bool>* stop = nullptr);

  [[nodiscard]] std::uint64_t next_sequence() const noexcept;
  // The subscribers this publisher knows it serves, fast. shm and RC: the active ones (attached,
  // and taken by publish() or service()). UD sends to a multicast group and cannot see who
  // receives it: it counts the subscribers connected to it for recovery, which each does once it
  // has heard the publisher (one whose recovery connection failed or was refused is not counted).
  [[nodiscard]] std::uint32_t subscriber_count() const noexcept;
  [[nodiscard]] const PublisherCounters& counters() const noexcept;
  // The process's live counters (tickrail-stat) carry this publisher's counters, refreshed by
  // publish() and service(), unless PublisherConfig::stats or TICKRAIL_STATS turned them off.
  [[nodiscard]] bool stats_enabled() const noexcept { return stats_.block() != nullptr; }

  // Control plane.
  // A row per subscriber known to the publisher, in whatever state (UD: per recovery
  // connection, as subscriber_count()).
  [[nodiscard]] std::vector<SubscriberStatus> subscribers() const;
  [[nodiscard]] const PublisherConfig& config() const noexcept;
  // The last-value table's entry for `instrument` and `cls`, as a subscriber would read it: the
  // latest tick of that class published, nullopt when none was, or the channel keeps no table,
  // or not that class or instrument. Any thread; a concurrent publish may make it a tick newer.
  [[nodiscard]] std::optional<Tick> last_value(std::uint32_t instrument, StateClass cls) const noexcept;
  // Marks the channel closed (subscribers see it after draining) and releases it. Idempotent.
  // RC: ticks publish() accepted but could not yet write (a full send queue) are written first,
  // for up to 2 s (a warning names what is left).
  void close() noexcept;

 private:
  void store_stats() noexcept;

  std::unique_ptr<detail::PublisherTransport> impl_;
  // Destroyed before impl_: the stats thread stops reading impl_ first.
  stats::Registration stats_;
  const PublisherCounters* counters_ = nullptr;  // impl_'s, stable for its lifetime
  std::uint64_t stored_rare_ = 0;  // store_stats(): the sum of the rare counters last stored
  detail::PublishLane* lane_ = nullptr;  // impl_'s, for ring transports
};

[[nodiscard]] TICKRAIL_API const char* to_string(PublishStatus s) noexcept;

}  // namespace tickrail
