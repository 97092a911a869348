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

#include "tickrail/config.hpp"
#include "tickrail/counters.hpp"
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
}

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

  // Fast path: never throws, allocates, logs or makes a system call of its own.
  PublishResult publish(const Tick& tick) noexcept;
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
};

[[nodiscard]] TICKRAIL_API const char* to_string(PublishStatus s) noexcept;

}  // namespace tickrail
