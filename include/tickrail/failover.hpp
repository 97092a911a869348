// FailoverSubscriber: one stream received over two redundant lines (hot failover).
//
// Two Subscribers of any transports read the same stream: the same ticks under the same sequence
// numbers (two publishers replaying the same input, or one publishing on two channels). Each
// sequence number is delivered once, in order, the first copy to arrive. A sequence missing on
// one line waits, with what comes after it, in a window of `window` ticks for the other line; it
// is a gap only once both lines have passed it, or when it has waited `hole_timeout`, or when the
// lines are further apart than the window (both counted, apart). A line whose publisher goes
// (closed, silent, or it evicted us) is down: the other line goes on alone, and a background
// thread ("tr-failover") attaches that line again every `reattach_every` until it is back.
//
// The stream starts at the first tick either line brings. Threading: one thread polls and reads
// the counters; poll() never blocks, throws, allocates, logs or makes a system call. It may
// deliver more than `limit` ticks: a tick that fills a hole releases those waiting behind it.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>

#include "tickrail/config.hpp"
#include "tickrail/export.hpp"
#include "tickrail/line_arbiter.hpp"
#include "tickrail/subscriber.hpp"
#include "tickrail/tick.hpp"

namespace tickrail {

namespace detail {
// A non-owning, non-allocating reference to lead(int line, std::uint64_t cycles).
class TICKRAIL_API LeadSink {
 public:
  template <class F>
  explicit LeadSink(F& f) noexcept
      : obj_(&f), call_([](void* o, int line, std::uint64_t cycles) { (*static_cast<F*>(o))(line, cycles); }) {}
  void operator()(int line, std::uint64_t cycles) const { call_(obj_, line, cycles); }

 private:
  void* obj_;
  void (*call_)(void*, int, std::uint64_t);
};

// What FailoverSubscriber::poll() reads and writes on every call, here so that it runs inline
// with the app's handler, as Subscriber::poll does: the least code arbitrating two rings costs
// nothing over one line inline, and 8-18% of a 70-100 ns one way from a function of its own
// calling the handler by pointer (BENCHMARKS.md, issue 15); the arbiter's common cases run inline
// too. Its layout is the library's ABI, as every inline poll's is.
struct FailoverHot {
  explicit FailoverHot(std::size_t window) : arb(window) {}
  LineArbiter arb;
  // A line's Subscriber while poll() may read it inline: up, and not a UD line (those are told
  // what the other line delivered, out of line). Either null: the out-of-line way.
  Subscriber* direct[2] = {nullptr, nullptr};
  std::uint32_t empties = 0;         // polls that found a line empty: every 64th may look at it
  bool stats_on = false;             // the live counters are kept
  mutable bool stats_stale = false;  // copies came since the live counters were last stored
  std::uint32_t stats_busy = 0;      // polls that brought copies, for one store in 64 while busy
};
}  // namespace detail

struct FailoverConfig {
  SubscriberConfig line[2];  // line A and line B
  std::uint32_t window = 4096;                   // ticks held beyond a hole: a power of two, 2..1048576
  std::chrono::microseconds hole_timeout{1000};  // how long a hole waits for the line behind
  std::chrono::milliseconds reattach_every{100};  // how often a line down is attached again
  // UD lines recover only what both lines lost: line A reads a hole back once it has been open
  // recovery_delay, line B after twice line A's delay (a line's own rdma.recovery_delay, when
  // set, stays, and line B's must then exceed line A's), and each line passes, without a read or
  // a loss, the holes the failover delivered past. hole_timeout must be at least twice line B's
  // delay: the delay, then the read.
  std::chrono::microseconds recovery_delay{200};
  // Time each tick's second copy for poll(handler, lead): one clock read per copy received, and
  // a stamp per window slot.
  bool measure_lead = false;
  void validate() const;           // throws Error(config_error) naming the line or the key
  void validate_settings() const;  // window, hole_timeout, reattach_every, recovery_delay alone
  // A UD line's rdma.recovery_delay under failover (see recovery_delay).
  [[nodiscard]] std::chrono::microseconds line_recovery_delay(int line) const noexcept;
};

struct FailoverLineCounters {
  std::uint64_t first = 0;       // ticks delivered from this line: it brought them first
  std::uint64_t duplicates = 0;  // its copies discarded (delivered already, or given up)
  // Its ticks that leapt beyond the window from where the line was, while the other line was up,
  // and that its next tick did not follow (came after, within a window): discarded, moving nothing.
  std::uint64_t refuted = 0;
  std::uint64_t downs = 0;       // times it went down
  std::uint64_t down_ns = 0;     // time spent down, until now
  std::uint64_t recovered = 0;   // UD: ticks it read back from its publisher's history
  bool up = false;
};

struct FailoverCounters {
  std::uint64_t delivered = 0;
  std::uint64_t gaps = 0;     // sequence numbers lost on both lines
  std::uint64_t skipped = 0;  // holes given up after hole_timeout or beyond the window
  FailoverLineCounters line[2];
};

// On lines of its own (see Publisher): poll() writes it on every call.
class TICKRAIL_API alignas(2 * kCacheLine) FailoverSubscriber {
 public:
  // Attaches both lines, each as a Subscriber would (within its attach_timeout). A line that
  // cannot attach starts down and is attached again in the background; when neither can, throws
  // the first line's Error. Throws Error(config_error) for a bad config.
  explicit FailoverSubscriber(const FailoverConfig& config);
  // The same, calling `between_attempts()` about every millisecond while a line waits for its
  // channel (Subscriber's between_attempts, and as there, what it throws ends the attach).
  FailoverSubscriber(const FailoverConfig& config, const std::function<void()>& between_attempts);
  ~FailoverSubscriber();
  FailoverSubscriber(const FailoverSubscriber&) = delete;
  FailoverSubscriber& operator=(const FailoverSubscriber&) = delete;

  // Delivers to `handler(const Tick&)` what polling each line (up to `limit` ticks from each)
  // brings first; returns how many ticks it delivered. Inline while both lines are up and
  // neither is UD. Every 64th poll that found a line empty calls out of line (look_at_lines),
  // which reads the states of the lines up at most once every quarter of hole_timeout or every
  // 100 us, whichever is shorter. A poll with `limit` 0 reads nothing and looks at
  // nothing. The handler must not poll this FailoverSubscriber.
  template <class Handler>
  std::size_t poll(Handler&& handler, std::size_t limit = 256) noexcept {
    static_assert(std::is_invocable_v<Handler&, const Tick&>, "handler(const Tick&)");
    Subscriber* const a = hot_.direct[0];
    Subscriber* const b = hot_.direct[1];
    if (a == nullptr || b == nullptr) [[unlikely]] return poll_sink(detail::TickSink(handler), nullptr, limit);
    // The arbiter counts what it delivers: a count kept here would be reachable from the
    // out-of-line calls (offer_rest, watch_hole, look_at_lines), and so be kept in memory on
    // every poll.
    const std::uint64_t before = hot_.arb.delivered();
    const std::size_t got_a = a->poll([&](const Tick& t) { (void)hot_.arb.offer(0, t, handler); }, limit);
    const std::size_t got_b = b->poll([&](const Tick& t) { (void)hot_.arb.offer(1, t, handler); }, limit);
    if (hot_.arb.holding()) [[unlikely]] watch_hole(detail::TickSink(handler));
    if (look_due(got_a, got_b)) [[unlikely]] look_at_lines(got_a == 0, got_b == 0, limit, detail::TickSink(handler));
    note_copies(got_a + got_b);
    return static_cast<std::size_t>(hot_.arb.delivered() - before);
  }
  // The same, and with measure_lead, `lead(int line, std::uint64_t cycles)` for each tick whose
  // other copy came within the window: `line` brought it first, `cycles` (Clock) before the
  // other line, as this thread's polls saw them (both lines are polled in turn, A first).
  template <class Handler, class Lead>
    requires std::invocable<Lead&, int, std::uint64_t>
  std::size_t poll(Handler&& handler, Lead&& lead, std::size_t limit = 256) noexcept {
    const detail::LeadSink sink(lead);
    return poll_sink(detail::TickSink(handler), &sink, limit);
  }

  // Also brings the process's live counters (tickrail-stat) up to date.
  [[nodiscard]] FailoverCounters counters() const noexcept;
  [[nodiscard]] bool line_up(int line) const noexcept;
  // The next sequence to deliver (1 until a tick has arrived).
  [[nodiscard]] std::uint64_t next_sequence() const noexcept;

 private:
  bool look_due(std::size_t got_a, std::size_t got_b) noexcept {
    return (got_a == 0 || got_b == 0) && (++hot_.empties & 63u) == 0;
  }
  // The arbiter's counts go to the live counters off the critical path: on the first empty poll
  // after copies came, and once in 64 polls while they keep coming.
  void note_copies(std::size_t copies) noexcept {
    if (!hot_.stats_on) return;
    if (copies != 0) {
      hot_.stats_stale = true;
      if ((++hot_.stats_busy & 63u) == 0) [[unlikely]] store_flow();
    } else if (hot_.stats_stale) [[unlikely]] {
      store_flow();
    }
  }
  std::size_t poll_sink(detail::TickSink sink, const detail::LeadSink* lead, std::size_t limit) noexcept;
  void look_at_lines(bool a_empty, bool b_empty, std::size_t limit, detail::TickSink deliver) noexcept;  // ended?
  void watch_hole(detail::TickSink deliver) noexcept;  // waited hole_timeout?
  void store_flow() const noexcept;                    // the live counters

  detail::FailoverHot hot_;  // before impl_, which refers to it
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tickrail
