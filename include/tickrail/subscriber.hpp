// Subscriber: receives a publisher's ticks, in sequence order, by busy-polling.
//
// Threading: one thread polls. poll() is the fast path: it never blocks, throws, allocates, logs
// or makes a system call. Ring transports (shared memory; RDMA RC in memory-polling mode) are
// polled inline right here; others go through one indirect call per poll.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

#include "tickrail/config.hpp"
#include "tickrail/counters.hpp"
#include "tickrail/ring.hpp"
#include "tickrail/tick.hpp"
#include "tickrail/export.hpp"

namespace tickrail {

enum class SubscriberState : std::uint8_t {
  connecting,      // attached; waiting for the publisher to start serving it
  active,          // receiving
  evicted,         // the publisher evicted it (reason() says why); what arrived can be drained
  publisher_gone,  // the publisher closed or went silent; what arrived can be drained
  closed,
};

namespace detail {
class SubscriberTransport;

// A non-owning, non-allocating reference to a callable (const or not), for transports polled
// out of line.
class TICKRAIL_API TickSink {
 public:
  template <class F>
  explicit TickSink(F& f) noexcept
      : obj_(&f), call_([](const void* o, const Tick& t) {
          // F carries the callable's own constness: a mutable one is called as such.
          (*static_cast<F*>(const_cast<void*>(o)))(t);
        }) {}
  void operator()(const Tick& t) const { call_(obj_, t); }

 private:
  const void* obj_;
  void (*call_)(const void*, const Tick&);
};
// Whether a reader that returns its credit only now and then (RC), and owes some, should
// return it now: its stream has paused, its position unmoved for `wait` clock cycles (1 ms by
// default), so that the publisher's view of it is not left a credit interval behind. Looked at
// every kEvery empty polls (one clock read each), so a loop that parks between polls returns it
// later. One thread.
class TICKRAIL_API IdleCredit {
 public:
  static constexpr std::uint32_t kEvery = 64;
  IdleCredit() noexcept;
  // On an empty poll while credit is owed (`next`: the reader's position).
  bool due(std::uint64_t next) noexcept { return --countdown_ == 0 && look(next); }

 private:
  bool look(std::uint64_t next) noexcept;
  std::uint64_t wait_;
  std::uint64_t next_ = 0;   // the position when last looked at
  std::uint64_t since_ = 0;  // since when it has stood there (Clock cycles)
  std::uint32_t countdown_ = kEvery;
};
}  // namespace detail

// On lines of its own (see Publisher): poll() writes it on every call.
class TICKRAIL_API alignas(2 * kCacheLine) Subscriber {
 public:
  // Attaches (throws Error: bad config; channel missing after attach_timeout, of another
  // version, truncated or full; geometry mismatch). With attach_timeout > 0 a publisher that is
  // not there yet or vanished (not_found, which is also how RC's "nobody listening yet" comes
  // back; peer_gone, timed_out, a reset connection) is tried again every 20 ms until
  // attach_timeout has passed; then the last failure is thrown. Other failures, a publisher's
  // refusal (rejected) among them, are thrown at once.
  explicit Subscriber(const SubscriberConfig& config);
  // The same, calling `between_attempts()` about every millisecond while it waits (shm: for the
  // channel to appear; any transport: to try again):
  // e.g. to serve a Publisher of one's own whose far end publishes the awaited channel only
  // once subscribed to it (ping-pong). What it throws ends the attach (throw something other than
  // a tickrail::Error: one of those is taken for the attempt's failure, and may be retried).
  Subscriber(const SubscriberConfig& config, const std::function<void()>& between_attempts);
  ~Subscriber();
  Subscriber(Subscriber&&) noexcept;
  Subscriber& operator=(Subscriber&&) noexcept;
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Delivers up to `limit` available ticks to `handler(const Tick&)` in one batch; returns how
  // many. Ticks that arrived before an eviction or the publisher's end are still delivered.
  template <class Handler>
  std::size_t poll(Handler&& handler, std::size_t limit = 256) noexcept {
    static_assert(std::is_invocable_v<Handler&, const Tick&>, "handler(const Tick&)");
    // Nothing new, the answer a spinning loop gets most, is taken from the one word that says so
    // before anything else: a spinning echo that went through the delivery loop to find nothing
    // took 35% longer to answer in some code layouts (BENCHMARKS.md, #17, session 31).
    if (ring_ != nullptr && !ring_->has_next()) return poll_nothing();
    const bool stats = probe_.on();
    if (stats) probe_.note_poll();
    if (ring_ != nullptr) [[likely]] {
      const std::size_t n = ring_->poll(handler, limit);
      if (stats && n != 0) probe_.note_ring(*ring_);
      // Transports whose publisher cannot read our credit word return it now and then (RC),
      // and once the stream pauses while they owe some (detail::IdleCredit).
      if (ring_->next_seq() >= credit_due_) [[unlikely]] {
        return_credit();
      } else if (n == 0 && ring_->next_seq() > credited_ && idle_.due(ring_->next_seq())) [[unlikely]] {
        return_credit();
      }
      return n;
    }
    return poll_indirect(detail::TickSink(handler), limit);
  }

  // Cheap (no system call): reads shared state written by the publisher.
  [[nodiscard]] SubscriberState state() const noexcept;
  [[nodiscard]] SubscriberCounters counters() const noexcept;
  [[nodiscard]] std::uint64_t next_sequence() const noexcept;
  // start = snapshot: true until poll() has delivered the snapshot (ticks flagged kTickFromTable;
  // an empty table delivers none): it turns false when the poll that delivered the last entry
  // returns, and no poll mixes them with live ticks. Then the live stream follows. Table ticks
  // while it is false come from a conflation (policy = conflate). Callable from the handler.
  [[nodiscard]] bool in_snapshot() const noexcept;
  // The process's live counters (tickrail-stat) carry this subscriber's counters and the longest
  // interval between two poll() calls, unless SubscriberConfig::stats or TICKRAIL_STATS=0
  // turned them off. Cost when on: a decrement per poll, one RDTSC per 16 empty polls and per
  // non-empty poll, five stores per non-empty poll (counters.hpp, PollProbe).
  [[nodiscard]] bool stats_enabled() const noexcept { return probe_.on(); }

  // Control plane.
  // Waits (bounded) until the publisher serves this subscriber; false on timeout or end.
  bool wait_active(std::chrono::milliseconds timeout);
  [[nodiscard]] std::string reason() const;  // why evicted or gone, in words
  [[nodiscard]] const SubscriberConfig& config() const noexcept;
  void close() noexcept;

 private:
  // The transport's wakeups counted in our counters, and the ring if already served. noexcept:
  // probe_ goes before impl_, whose thread counts into it.
  void start(const SubscriberConfig& config) noexcept;
  std::size_t poll_indirect(detail::TickSink sink, std::size_t limit) noexcept;
  // The bookkeeping of a ring poll that found nothing: what poll() does after its ring's poll
  // with n == 0 (the credit check said again here, not shared, to keep this path as measured).
  std::size_t poll_nothing() noexcept {
    if (probe_.on()) probe_.note_poll();
    const std::uint64_t next = ring_->next_seq();
    if (next >= credit_due_ || (next > credited_ && idle_.due(next))) [[unlikely]] return_credit();
    return 0;
  }
  void return_credit() noexcept;
  void adopt_ring() noexcept;
  void store_indirect_stats() noexcept;
  // The FailoverSubscriber's other line delivered the stream below `seq` (transport.hpp).
  void cover_below(std::uint64_t seq, std::uint64_t read_until) noexcept;
  friend class FailoverSubscriber;

  std::unique_ptr<detail::SubscriberTransport> impl_;
  RingReader* ring_ = nullptr;  // owned by impl_ for ring transports
  std::uint64_t credit_due_ = ~std::uint64_t{0};  // next_seq at which to call return_credit
  std::uint64_t credited_ = ~std::uint64_t{0};  // what the publisher has (~0: nothing to return)
  detail::IdleCredit idle_;
  static constexpr std::uint32_t kIndirectEvery = 64;
  std::uint32_t indirect_countdown_ = 1;  // poll_indirect: empty polls until the next store
  stats::PollProbe probe_;
};

[[nodiscard]] TICKRAIL_API const char* to_string(SubscriberState s) noexcept;

}  // namespace tickrail
