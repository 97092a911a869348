// The pieces every tickrail-bench round uses: two pinned threads, a spin to a TSC deadline, the
// timed loops in several code layouts, and the median of TSC-stepped samples.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/ring.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::bench {

// Two threads on two pinned cores: the caller (pinned already) runs `send`, a new thread pinned
// to `receiver_cpu` runs `receive`.
template <class Send, class Receive>
void on_two_cores(int receiver_cpu, Send&& send, Receive&& receive) {
  std::atomic<bool> ready{false};
  std::thread r([&] {
    (void)pin_current_thread(receiver_cpu);
    ready.store(true, std::memory_order_release);
    receive();
  });
  while (!ready.load(std::memory_order_acquire)) cpu_relax();
  send();
  r.join();
}

// An object on a pair of cache lines of its own. A run's objects lie in the frame that starts
// both threads, the sending thread's locals among them, and the receiving thread reaches them by
// reference: what one thread writes on every tick (a reader's position, the samples' vector)
// must not share a line with what the other reads on its timed path (the ring's address, a tick
// to send), or another line's transfer enters the figure by chance of where the compiler put
// them. Two lines: the adjacent-line prefetcher fetches pairs. (The library's Publisher and
// Subscriber lie on lines of their own already.)
template <class T>
struct alignas(2 * kCacheLine) Apart {
  T v;
};

// A channel and its subscriber, in this process, served until active (throws Error naming `what`
// otherwise).
struct Channel {
  Publisher pub;
  Subscriber sub;
  Channel(const PublisherConfig& pc, const std::string& what) : pub(pc), sub(subscriber_for(pc)) {
    (void)pub.wait_subscribers(1, std::chrono::seconds(1));
    if (!sub.wait_active(std::chrono::seconds(5))) {
      throw Error(Errc::timed_out, "the " + what + " never became active");
    }
  }
  static SubscriberConfig subscriber_for(const PublisherConfig& pc) {
    SubscriberConfig sc;
    sc.channel = pc.channel;
    sc.stats = pc.stats;
    return sc;
  }
};

inline void spin_until(std::uint64_t t) {
  while (Clock::now() < t) cpu_relax();
}

// ---- code layouts ---------------------------------------------------------------------------
// On this kind of VM the same spinning loop can settle a third faster or slower by where its
// code lies (BENCHMARKS.md, #17, session 19). So both sides' loops of a latency contender come in
// kShifts copies, each a function of its own whose loop body starts with K = 0, 8, .. 56 bytes of
// NOPs (the assembler's own loop alignment then lands the copies' code at several, not all
// distinct, offsets), and a contender measured over layouts runs once per pair of copies.
inline constexpr int kShifts = 8;

// Which copy each side runs, 0..kShifts-1.
struct Layout {
  int send = 0;
  int receive = 0;
  // The k-th layout of round `round`: over kShifts rounds of kShifts layouts, every one of the
  // kShifts^2 pairs once (37 is prime to 64), each round's sending copies all different.
  static Layout nth(int k, int round) {
    const int i = ((round * kShifts + k) * 37) % (kShifts * kShifts);
    return {i % kShifts, i / kShifts};
  }
};

// Two lines apart: the adjacent-line prefetcher fetches 128-byte pairs.
struct alignas(2 * kCacheLine) Line {
  std::atomic<std::uint64_t> v{0};
};

// K bytes of NOPs jumped over: moves the code after it by K bytes (the jump is there for K = 0
// too, so that every copy runs the same instructions).
template <int K>
inline void shift_code() noexcept {
#if defined(__x86_64__)
  asm volatile("jmp 1f\n\t.skip %c0, 0x90\n1:" ::"i"(K));
#endif
}

// The pinging loop: `step(i)` sends i and spins until it is back; RTT/2 of each, ns, into `half`.
template <int K, class Step>
[[gnu::noinline]] void ping_loop(std::uint64_t samples, Step& step, std::vector<std::uint64_t>& half) {
  const Clock& clk = Clock::instance();
  for (std::uint64_t i = 1; i <= samples; ++i) {
    const std::uint64_t t0 = Clock::now();
    shift_code<K>();
    step(i);
    half.push_back(static_cast<std::uint64_t>(clk.to_ns(Clock::now() - t0) / 2.0));
  }
}

// The echoing loop: spins on `poll()` (how many it answered) until `samples` are answered.
template <int K, class Poll>
[[gnu::noinline]] void echo_loop(std::uint64_t samples, Poll& poll) {
  for (std::uint64_t got = 0; got < samples;) {
    shift_code<K>();
    const std::size_t n = poll();
    if (n == 0) cpu_relax();
    got += n;
  }
}

// The sending loop of one way: `send(i)` every `gap` cycles.
template <int K, class Send>
[[gnu::noinline]] void send_loop(std::uint64_t samples, std::uint64_t gap, Send& send) {
  std::uint64_t next = Clock::now() + gap;
  for (std::uint64_t i = 1; i <= samples; ++i) {
    spin_until(next);
    next += gap;
    shift_code<K>();
    send(i);
  }
}

// The receiving loop: spins on `poll(record)` (how many ticks it consumed) until `samples` ticks;
// now - send_ts of each it handed to `record`, ns, into `lat`.
template <int K, class Poll>
[[gnu::noinline]] void receive_loop(std::uint64_t samples, Poll& poll, std::vector<std::uint64_t>& lat) {
  const Clock& clk = Clock::instance();
  auto record = [&](const Tick& t) {
    lat.push_back(static_cast<std::uint64_t>(clk.to_ns(Clock::now() - t.send_ts)));
  };
  for (std::uint64_t got = 0; got < samples;) {
    shift_code<K>();
    const std::size_t n = poll(record);
    if (n == 0) cpu_relax();
    got += n;
  }
}

// The kShifts copies of each loop, by shift.
template <class Step, int... K>
constexpr auto ping_loops(std::integer_sequence<int, K...>) {
  using Loop = void (*)(std::uint64_t, Step&, std::vector<std::uint64_t>&);
  return std::array<Loop, sizeof...(K)>{&ping_loop<K * 8, Step>...};
}
template <class Poll, int... K>
constexpr auto echo_loops(std::integer_sequence<int, K...>) {
  using Loop = void (*)(std::uint64_t, Poll&);
  return std::array<Loop, sizeof...(K)>{&echo_loop<K * 8, Poll>...};
}
template <class Send, int... K>
constexpr auto send_loops(std::integer_sequence<int, K...>) {
  using Loop = void (*)(std::uint64_t, std::uint64_t, Send&);
  return std::array<Loop, sizeof...(K)>{&send_loop<K * 8, Send>...};
}
template <class Poll, int... K>
constexpr auto receive_loops(std::integer_sequence<int, K...>) {
  using Loop = void (*)(std::uint64_t, Poll&, std::vector<std::uint64_t>&);
  return std::array<Loop, sizeof...(K)>{&receive_loop<K * 8, Poll>...};
}
inline std::size_t copy(int shift) { return static_cast<std::size_t>(shift % kShifts); }

// A ping-pong on two cores in `layout`: this thread pings (`step(i)`: sends i, spins until it
// is back), a thread on `receiver_cpu` echoes (`echo()`: answers what came, returns how many).
// Returns the RTT/2 samples, ns.
template <class Step, class Echo>
std::vector<std::uint64_t> ping_pong(int receiver_cpu, Layout layout, std::uint64_t samples, Step& step, Echo& echo) {
  static constexpr auto pings = ping_loops<Step>(std::make_integer_sequence<int, kShifts>{});
  static constexpr auto echoes = echo_loops<Echo>(std::make_integer_sequence<int, kShifts>{});
  Apart<std::vector<std::uint64_t>> half;
  half.v.reserve(samples);
  // The echoing thread runs a copy of `echo`, made on its own stack (see one_way).
  on_two_cores(
      receiver_cpu, [&] { pings[copy(layout.send)](samples, step, half.v); },
      [&] {
        Echo e = echo;
        echoes[copy(layout.receive)](samples, e);
      });
  return std::move(half.v);
}

// One way in `layout`: this thread calls `send(i)` every `gap_ns` (the tick stamped by it or by
// the transport); a thread on `receiver_cpu` receives (`poll(handler)`). Returns the latencies, ns.
template <class Send, class Poll>
std::vector<std::uint64_t> one_way(int receiver_cpu, Layout layout, std::uint64_t samples, double gap_ns, Send& send,
                                   Poll& poll) {
  static constexpr auto sends = send_loops<Send>(std::make_integer_sequence<int, kShifts>{});
  static constexpr auto receives = receive_loops<Poll>(std::make_integer_sequence<int, kShifts>{});
  Apart<std::vector<std::uint64_t>> lat;
  lat.v.reserve(samples);
  const std::uint64_t gap = Clock::instance().ns_to_cycles(gap_ns);
  // The receiving thread runs a copy of `poll` made in its own frame: what it reads on every tick
  // (the closure's captures) then lies on its own stack, not beside the sending thread's (Apart).
  // (A lambda's init-capture would be made here, on the sender's.)
  on_two_cores(
      receiver_cpu, [&] { sends[copy(layout.send)](samples, gap, send); },
      [&] {
        Poll p = poll;
        receives[copy(layout.receive)](samples, p, lat.v);
      });
  return std::move(lat.v);
}

// The floor: a cache-line ping-pong between the two threads on `lines[0]` (ping) and `lines[1]`
// (pong). Returns the RTT/2 samples, ns.
inline std::vector<std::uint64_t> floor_ping_pong(int receiver_cpu, Layout layout, std::uint64_t samples,
                                                  Line* lines) {
  Line& ping = lines[0];
  Line& pong = lines[1];
  auto step = [&](std::uint64_t i) {
    ping.v.store(i, std::memory_order_release);
    while (pong.v.load(std::memory_order_acquire) != i) cpu_relax();
  };
  Apart<std::uint64_t> next{1};
  auto echo = [&]() -> std::size_t {
    if (ping.v.load(std::memory_order_acquire) != next.v) return 0;
    pong.v.store(next.v++, std::memory_order_release);
    return 1;
  };
  return ping_pong(receiver_cpu, layout, samples, step, echo);
}

// ---- the one-way floor ------------------------------------------------------------------------
// The least a ring of lines can do one way, at the latency rounds' pace and between the two
// cores' clocks, as tickrail's one-way figure is taken. Stamp i and then its number go into line
// i mod capacity of a ring of lines (tickrail-bench: kRing, its channels' size), the stamp taken
// before the line's first store, as publish() takes it; the receiver spins on the line of the
// number it expects and takes now minus the stamp. A receiver lapped (away for a whole ring)
// counts the stamps it missed and times the one it found, which may then be the next lap's stamp
// (nothing marks a line being rewritten); a RingReader lapped instead resumes at the oldest tick
// still intact and times up to a ring of stale ones. A run laps only when it is longer than its
// ring and its receiver falls a ring behind (8 ms at kRing lines and the default pace). (Until
// session 27 this was one line rewritten in place as a seqlock, stamped after its first store:
// that store set the line's transfer going before the stamp was read, and a reader could find
// the line odd and wait a pause; BENCHMARKS.md, issue 17.)
//
// Its two sides come apart, so that each can face one side of tickrail's ring (ring_pingpong): a
// line's word 0 carries the stamp and word `Number` the number, 1 in the floor, kSeqWord where a
// side faces write_slot or a RingReader.
inline constexpr std::uint32_t kRing = 4096;  // the latency channels' ring, and the one-way floor's

template <unsigned Number>
inline void floor_send(Slot* ring, std::uint64_t capacity, std::uint64_t i) noexcept {
  Slot& s = ring[i & (capacity - 1)];
  ring_detail::store_relaxed(s.words[0], Clock::now());
  std::atomic_ref<std::uint64_t>(s.words[Number]).store(i, std::memory_order_release);
}

template <unsigned Number>
class FloorReader {
 public:
  FloorReader(Slot* ring, std::uint64_t capacity) noexcept : ring_(ring), mask_(capacity - 1) {}
  // Hands `handler` a tick carrying the stamp of the number it expects, once written; returns
  // how many numbers that consumed (more than 1 when lapped).
  template <class Handler>
  std::size_t poll(Handler& handler) noexcept {
    Slot& s = ring_[next_ & mask_];
    const std::uint64_t n = ring_detail::load_acquire(s.words[Number]);
    if (n < next_) return 0;
    Tick t{};
    t.send_ts = ring_detail::load_relaxed(s.words[0]);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (ring_detail::load_relaxed(s.words[Number]) != n) return 0;  // rewritten meanwhile: look again
    const std::uint64_t consumed = n - next_ + 1;
    next_ = n + 1;
    handler(t);
    return consumed;
  }

 private:
  Slot* ring_;
  std::uint64_t mask_;
  std::uint64_t next_ = 1;
};

// The one-way floor in `layout` on `ring` (`capacity` lines, a power of two, zeroed). Returns the
// latencies, ns.
inline std::vector<std::uint64_t> floor_one_way(int receiver_cpu, Layout layout, std::uint64_t samples, double gap_ns,
                                                Slot* ring, std::uint64_t capacity) {
  Apart<FloorReader<1>> reader{FloorReader<1>(ring, capacity)};
  auto send = [ring, capacity](std::uint64_t i) { floor_send<1>(ring, capacity, i); };
  auto poll = [&reader](auto& handler) { return reader.v.poll(handler); };
  return one_way(receiver_cpu, layout, samples, gap_ns, send, poll);
}

// Polls `reader` once; how many ticks that consumed, those a lap skipped included, as
// FloorReader::poll counts: a receiving loop that counts them ends even after a lap.
template <class Handler>
std::size_t consumed(RingReader& reader, Handler& handler) {
  const std::uint64_t before = reader.next_seq();
  (void)reader.poll(handler, 256);
  return static_cast<std::size_t>(reader.next_seq() - before);
}

inline void publish_spinning(Publisher& pub, const Tick& t) {
  while (pub.publish(t).status == PublishStatus::back_pressured) cpu_relax();
}

// tickrail both ways: a tick out on `out`, echoed back on `back` by the other core. Returns the
// RTT/2 samples, ns.
inline std::vector<std::uint64_t> channel_ping_pong(int receiver_cpu, Layout layout, std::uint64_t samples,
                                                    Channel& out, Channel& back) {
  Tick t{};
  auto step = [&](std::uint64_t i) {
    t.order_ref = i;
    publish_spinning(out.pub, t);
    bool answered = false;
    while (!answered) {
      if (back.sub.poll([&](const Tick& r) { answered = r.order_ref == i; }, 1) == 0) cpu_relax();
    }
  };
  auto echo = [&] { return out.sub.poll([&](const Tick& r) { publish_spinning(back.pub, r); }, 1); };
  return ping_pong(receiver_cpu, layout, samples, step, echo);
}

// Memory fresh from the kernel (whole pages, zeroed), for one run's lines or rings: a ping-pong's
// figure here moves with where its lines lie and what memory they are in (a heap's or a mapping's
// of their own), so each run gets memory of its own, as each of tickrail's channels does.
class FreshMemory {
 public:
  explicit FreshMemory(std::size_t bytes = 4096);  // throws Error when the kernel has none to give
  ~FreshMemory();
  FreshMemory(const FreshMemory&) = delete;
  FreshMemory& operator=(const FreshMemory&) = delete;
  // `n` objects of T made at its start (T trivially destructible: nothing to undo); throws Error
  // when they do not fit.
  template <class T>
  T* make(std::size_t n = 1) {
    static_assert(std::is_trivially_destructible_v<T> && alignof(T) <= 4096);
    if (n == 0 || n > bytes_ / sizeof(T)) {
      throw Error(Errc::invalid_argument, "fresh memory of " + std::to_string(bytes_) + " bytes: no room for " +
                                              std::to_string(n) + " objects of " + std::to_string(sizeof(T)));
    }
    T* first = new (p_) T();
    for (std::size_t i = 1; i < n; ++i) new (first + i) T();
    return first;
  }

 private:
  std::size_t bytes_;
  void* p_;
};

// The median of samples that come in steps (a virtual TSC may advance 20 cycles at a time, 10 ns
// here): the median step, interpolated within it by how many samples fall below and on it, as
// for grouped data. The step's phase against the timed events is random, so this resolves
// differences finer than a step, which a plain median would round to a whole step. Sorts `v`.
double median_of(std::vector<std::uint64_t>& v);

}  // namespace tickrail::bench
