// Ping-pong RTT/2 and one-way latency of tickrail against its own ring protocol and the
// cache-line floor, over many code and memory layouts (issue 17):
//
//   floor           a cache-line ping-pong between the two threads (two lines, 128 bytes apart)
//   ring            write_slot and RingReader (ring.hpp) alone: a tick out on one ring and back
//                   on another, each credit in a line of its own; no Publisher, no Subscriber
//   tickrail        Publisher and Subscriber over shared memory: two unstamped channels
//   tickrail out    a tickrail channel out, a bare ring back: one direction of the ping-pong
//   tickrail back   a bare ring out, a tickrail channel back: the other
//   floor 1-way     tickrail-bench's one-way floor: a stamp and its number into a ring of lines,
//                   2 us apart, timed on receipt (rounds.hpp)
//   writer 1-way    write_slot as the sender, the floor's receiver reading the slots' stamps
//   reader 1-way    the floor's sender writing stamp and number into slots, a RingReader receiving
//   ring 1-way      the ring alone, one way: write_slot and RingReader
//   tickrail 1-way  tickrail over shared memory, the same
//
// The two halves say which direction carries the library's share of the ping-pong: its publish
// on one side, its poll on the other. The one-way contenders take the path apart: writer and
// reader each put one side of tickrail's ring in the floor's place, the ring both, tickrail adds
// Publisher and Subscriber to it. A lapped receiver (away for a whole --ring) times one stamp
// with the floor's reader and up to a ring of stale ones with a RingReader (rounds.hpp); at the
// default size that takes 8 ms away.
//
// The same source can run in two modes on this kind of VM (BENCHMARKS.md, #17, session 19): one
// binary's ping-pong settles near one figure, another's, built from the same loop placed
// elsewhere, near a figure a third higher, and a pair of lines' figure moves with where the
// lines lie. So each contender runs once per layout (both sides' loops, pinging and echoing or
// sending and receiving, in kShifts copies moved by 0 to 56 bytes of NOPs, paired as
// bench::Layout::nth says) on memory allocated afresh for every run, and a round's figure is the
// median over its runs. Contenders and layouts take turns by round. (Much of the two modes was
// the harness's own: its threads' objects shared cache lines until session 28, bench::Apart.)
// Not installed.
//
//   ring_pingpong [--rounds N] [--samples N] [--sender-cpu C] [--receiver-cpu C] [--stats on|off] [--ring N]
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "rounds.hpp"
#include "state_bench.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/error.hpp"
#include "tickrail/log.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/ring.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using bench::Channel;
using bench::median;
using bench::median_of;

namespace {

struct Options {
  int rounds = 6;
  std::uint64_t samples = 20'000;
  int sender_cpu = 0;
  int receiver_cpu = 1;
  std::string stats = "off";
  std::uint64_t slots = bench::kRing;  // of every ring and channel, as tickrail-bench's by default
};

using bench::Line;

using bench::kShifts;
using bench::Layout;

template <class Step, class Echo>
double one_run(const Options& o, Layout layout, Step& step, Echo& echo) {
  std::vector<std::uint64_t> half = bench::ping_pong(o.receiver_cpu, layout, o.samples, step, echo);
  return median_of(half);
}

double floor_run(const Options& o, Layout layout) {
  bench::FreshMemory memory;
  std::vector<std::uint64_t> half = bench::floor_ping_pong(o.receiver_cpu, layout, o.samples, memory.make<Line>(2));
  return median_of(half);
}

double ring_run(const Options& o, Layout layout) {
  // Each ring in a mapping of its own, as a channel's is: zeroed, so every slot unwritten.
  bench::FreshMemory out_memory(o.slots * sizeof(Slot)), back_memory(o.slots * sizeof(Slot)), credit_memory;
  Slot* out = out_memory.make<Slot>(o.slots);
  Slot* back = back_memory.make<Slot>(o.slots);
  Line* credits = credit_memory.make<Line>(2);
  // Each side's reader, and the echo's sequence, apart (bench::Apart).
  bench::Apart<RingReader> from_back{RingReader(back, o.slots, 1, &credits[0].v)};
  bench::Apart<RingReader> from_out{RingReader(out, o.slots, 1, &credits[1].v)};
  const std::uint64_t mask = o.slots - 1;
  Tick t{};
  auto step = [&](std::uint64_t i) {
    t.order_ref = i;
    write_slot(out[i & mask], t, i, 0, false);
    bool answered = false;
    while (!answered) {
      if (from_back.v.poll([&](const Tick& r) { answered = r.order_ref == i; }, 1) == 0) cpu_relax();
    }
  };
  bench::Apart<std::uint64_t> seq{1};
  // `back` and `mask` by value: the echoing thread reads them on every tick, and `t` beside them
  // in this frame is written by the pinging one.
  auto echo = [back, mask, &from_out, &seq] {
    return from_out.v.poll(
        [&](const Tick& r) {
          write_slot(back[seq.v & mask], r, seq.v, r.send_ts, false);
          ++seq.v;
        },
        1);
  };
  return one_run(o, layout, step, echo);
}

// A channel of its own for each run, one subscriber, a ring of --ring slots.
PublisherConfig run_config(const Options& o, bool stamp) {
  static int runs = 0;
  PublisherConfig pc;
  pc.channel = "ringpp-" + std::to_string(::getpid()) + "-" + std::to_string(runs++);
  pc.max_subscribers = 1;
  pc.ring_capacity = static_cast<std::uint32_t>(o.slots);
  pc.stamp_send_time = stamp;
  pc.stats = o.stats == "on";
  return pc;
}

// Half of tickrail's ping-pong: a tickrail channel one way (`H`: out or back), write_slot and a
// RingReader the other, as ring_run's.
enum class Half { out, back };

template <Half H>
double half_run(const Options& o, Layout layout) {
  PublisherConfig pc = run_config(o, false);
  Channel ch(pc, "subscriber of " + pc.channel);
  bench::FreshMemory ring_memory(o.slots * sizeof(Slot)), credit_memory;
  Slot* ring = ring_memory.make<Slot>(o.slots);
  bench::Apart<RingReader> reader{RingReader(ring, o.slots, 1, &credit_memory.make<Line>()->v)};
  const std::uint64_t mask = o.slots - 1;
  Tick t{};
  if constexpr (H == Half::out) {
    bench::Apart<std::uint64_t> seq{1};  // the echo's, on the bare ring back
    auto step = [&](std::uint64_t i) {
      t.order_ref = i;
      bench::publish_spinning(ch.pub, t);
      bool answered = false;
      while (!answered) {
        if (reader.v.poll([&](const Tick& r) { answered = r.order_ref == i; }, 1) == 0) cpu_relax();
      }
    };
    auto echo = [ring, mask, &ch, &seq] {
      return ch.sub.poll(
          [&](const Tick& r) {
            write_slot(ring[seq.v & mask], r, seq.v, r.send_ts, false);
            ++seq.v;
          },
          1);
    };
    return one_run(o, layout, step, echo);
  } else {
    auto step = [&](std::uint64_t i) {
      t.order_ref = i;
      write_slot(ring[i & mask], t, i, 0, false);
      bool answered = false;
      while (!answered) {
        if (ch.sub.poll([&](const Tick& r) { answered = r.order_ref == i; }, 1) == 0) cpu_relax();
      }
    };
    auto echo = [&reader, &ch] {
      return reader.v.poll([&](const Tick& r) { bench::publish_spinning(ch.pub, r); }, 1);
    };
    return one_run(o, layout, step, echo);
  }
}

double tickrail_ping_pong_run(const Options& o, Layout layout) {
  PublisherConfig pc = run_config(o, false);
  Channel out(pc, "subscriber of " + pc.channel);
  pc.channel += "-back";
  Channel back(pc, "subscriber of " + pc.channel);
  std::vector<std::uint64_t> half = bench::channel_ping_pong(o.receiver_cpu, layout, o.samples, out, back);
  return median_of(half);
}

// One way: the sender publishes tick i stamped, every kGapNs; the receiver spins on
// `poll(handler)` and records now - send_ts, both sides' loops the copies `layout` names.
// Returns the p50, ns.
constexpr double kGapNs = 2000;

template <class Send, class Poll>
double one_way_run(const Options& o, Layout layout, Send& send, Poll& poll) {
  std::vector<std::uint64_t> lat = bench::one_way(o.receiver_cpu, layout, o.samples, kGapNs, send, poll);
  return median_of(lat);
}

double floor_one_way_run(const Options& o, Layout layout) {
  bench::FreshMemory ring_memory(o.slots * sizeof(Slot));
  std::vector<std::uint64_t> lat =
      bench::floor_one_way(o.receiver_cpu, layout, o.samples, kGapNs, ring_memory.make<Slot>(o.slots), o.slots);
  return median_of(lat);
}

double writer_one_way_run(const Options& o, Layout layout) {
  bench::FreshMemory ring_memory(o.slots * sizeof(Slot));
  Slot* ring = ring_memory.make<Slot>(o.slots);
  bench::Apart<bench::FloorReader<kSeqWord>> reader{bench::FloorReader<kSeqWord>(ring, o.slots)};
  const Tick blank{};
  auto send = [ring, mask = o.slots - 1, &blank](std::uint64_t i) {
    write_slot(ring[i & mask], blank, i, Clock::now(), false);
  };
  auto poll = [&](auto& handler) { return reader.v.poll(handler); };
  return one_way_run(o, layout, send, poll);
}

double reader_one_way_run(const Options& o, Layout layout) {
  bench::FreshMemory ring_memory(o.slots * sizeof(Slot)), credit_memory;
  Slot* ring = ring_memory.make<Slot>(o.slots);
  bench::Apart<RingReader> reader{RingReader(ring, o.slots, 1, &credit_memory.make<Line>()->v)};
  auto send = [ring, capacity = o.slots](std::uint64_t i) { bench::floor_send<kSeqWord>(ring, capacity, i); };
  auto poll = [&](auto& handler) { return bench::consumed(reader.v, handler); };
  return one_way_run(o, layout, send, poll);
}

double ring_one_way_run(const Options& o, Layout layout) {
  bench::FreshMemory ring_memory(o.slots * sizeof(Slot)), credit_memory;
  Slot* ring = ring_memory.make<Slot>(o.slots);
  bench::Apart<RingReader> reader{RingReader(ring, o.slots, 1, &credit_memory.make<Line>()->v)};
  const Tick blank{};
  auto send = [ring, mask = o.slots - 1, &blank](std::uint64_t i) {
    write_slot(ring[i & mask], blank, i, Clock::now(), false);
  };
  auto poll = [&](auto& handler) { return bench::consumed(reader.v, handler); };
  return one_way_run(o, layout, send, poll);
}

double tickrail_one_way_run(const Options& o, Layout layout) {
  const PublisherConfig pc = run_config(o, true);
  Channel ch(pc, "subscriber of " + pc.channel);
  const Tick blank{};
  auto send = [&](std::uint64_t) {
    bench::publish_spinning(ch.pub, blank);
  };
  auto poll = [&](auto& handler) { return ch.sub.poll(handler, 256); };
  return one_way_run(o, layout, send, poll);
}

constexpr const char* kNames[] = {"floor",        "ring",         "tickrail",   "tickrail out", "tickrail back",
                                  "floor 1-way",  "writer 1-way", "reader 1-way", "ring 1-way", "tickrail 1-way"};
constexpr double (*kRuns[])(const Options&, Layout) = {
    &floor_run,          &ring_run,           &tickrail_ping_pong_run, &half_run<Half::out>, &half_run<Half::back>,
    &floor_one_way_run,  &writer_one_way_run, &reader_one_way_run,     &ring_one_way_run,    &tickrail_one_way_run};
constexpr int kContenders = 10;
static_assert(std::size(kNames) == kContenders && std::size(kRuns) == kContenders);
enum : int { kFloor, kRingPp, kTickrailPp, kOutPp, kBackPp, kFloor1, kWriter1, kReader1, kRing1, kTickrail1 };

void print_runs(const char* name, const std::vector<double>& runs) {
  std::printf("    %-14s", name);
  for (const double p : runs) std::printf(" %4.0f", p);
  std::printf("  | median %5.1f\n", median(runs));
}

int run(const Options& o) {
  const std::vector<int> allowed = allowed_cpus();
  if (std::find(allowed.begin(), allowed.end(), o.receiver_cpu) == allowed.end()) {
    std::fprintf(stderr, "ring_pingpong: --receiver-cpu %d: not a cpu this process may run on (%s)\n",
                 o.receiver_cpu, format_cpu_list(allowed).c_str());
    return 1;
  }
  if (const PinResult p = pin_current_thread(o.sender_cpu); !p.ok) {
    std::fprintf(stderr, "ring_pingpong: --sender-cpu %d: %s\n", o.sender_cpu, p.message.c_str());
    return 1;
  }
  std::printf("ring_pingpong: sender cpu %d, receiver cpu %d; p50 in ns of %llu round trips (RTT/2) "
              "or ticks (one way) per run, one run per layout (both sides' loops shifted by 0..%d bytes), fresh memory "
              "each; rings of %llu slots; tickrail's live counters %s\n",
              o.sender_cpu, o.receiver_cpu, static_cast<unsigned long long>(o.samples), 8 * (kShifts - 1),
              static_cast<unsigned long long>(o.slots), o.stats.c_str());
  std::vector<double> all[kContenders];
  std::vector<double> ring_floor, lib_floor, lib_ring, out_ring, back_ring, lib1_ring1;
  std::vector<double> to_floor1[kContenders];  // one way: each contender / the one-way floor
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<double> runs[kContenders];
    for (int k = 0; k < kShifts; ++k) {
      const Layout layout = Layout::nth(k, r);
      for (int j = 0; j < kContenders; ++j) {
        const int c = (j + r + k) % kContenders;  // each contender first in turn
        runs[c].push_back(kRuns[c](o, layout));
      }
    }
    std::printf("  round %d (runs in layout order):\n", r + 1);
    double m[kContenders];
    for (int c = 0; c < kContenders; ++c) {
      print_runs(kNames[c], runs[c]);
      m[c] = median(runs[c]);
      all[c].insert(all[c].end(), runs[c].begin(), runs[c].end());
    }
    ring_floor.push_back(m[kRingPp] / m[kFloor]);
    lib_floor.push_back(m[kTickrailPp] / m[kFloor]);
    lib_ring.push_back(m[kTickrailPp] / m[kRingPp]);
    out_ring.push_back(m[kOutPp] / m[kRingPp]);
    back_ring.push_back(m[kBackPp] / m[kRingPp]);
    for (int c = kWriter1; c <= kTickrail1; ++c) to_floor1[c].push_back(m[c] / m[kFloor1]);
    lib1_ring1.push_back(m[kTickrail1] / m[kRing1]);
  }
  std::printf("over all runs (min / median / max, ns):");
  for (int c = 0; c < kContenders; ++c) {
    const auto [lo, hi] = std::minmax_element(all[c].begin(), all[c].end());
    std::printf(" %s %.0f / %.1f / %.0f;", kNames[c], *lo, median(all[c]), *hi);
  }
  std::printf("\nmedians of per-round ratios of the rounds' medians:\n"
              "  ping-pong RTT/2: ring/floor %.3f, tickrail/floor %.3f, tickrail/ring %.3f; "
              "tickrail out only/ring %.3f, back only/ring %.3f\n"
              "  one way, to the one-way floor: writer %.3f, reader %.3f, ring %.3f, tickrail %.3f; "
              "tickrail/ring %.3f\n",
              median(ring_floor), median(lib_floor), median(lib_ring), median(out_ring), median(back_ring),
              median(to_floor1[kWriter1]),
              median(to_floor1[kReader1]), median(to_floor1[kRing1]), median(to_floor1[kTickrail1]),
              median(lib1_ring1));
  return 0;
}

// 8 slots (512 bytes: every line revisited every 8 round trips, nearly as the floor's) to 65536
// (4 MiB, past L2, as tickrail-bench's drain channel); a run longer than its ring wraps it.
std::vector<std::uint64_t> ring_sizes() {
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t n = 8; n <= 65536; n *= 2) sizes.push_back(n);
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"ping-pong RTT/2 and one-way latency over code and memory layouts: the cache-line "
               "floor, the ring protocol alone, and tickrail over shm"};
  app.add_option("--rounds", o.rounds, "rounds (each: every contender once per layout)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--samples", o.samples, "round trips (one way: ticks) per run")
      ->check(CLI::Range(std::uint64_t{100}, std::uint64_t{100'000'000}));
  app.add_option("--sender-cpu", o.sender_cpu, "core of the pinging thread")->check(CLI::Range(0, 4095));
  app.add_option("--receiver-cpu", o.receiver_cpu, "core of the echoing thread")->check(CLI::Range(0, 4095));
  app.add_option("--ring", o.slots,
                 "slots of every ring: the one-way floor's, the bare rings' and tickrail's channels' (a power of two)")
      ->check(CLI::IsMember(ring_sizes()))
      ->capture_default_str();
  app.add_option("--stats", o.stats, "tickrail's live counters: on or off")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.set_version_flag("--version", "ring_pingpong (tickrail)");
  app.footer("Exit status: 0 ok; 1 the run failed (pinning, shared memory); 2 bad command line.");
  if (const auto status = cli::parse_app(app, "ring_pingpong", argc, argv)) return *status;
  if (o.sender_cpu == o.receiver_cpu) {
    std::fprintf(stderr, "ring_pingpong: --sender-cpu and --receiver-cpu are both %d; two cores are needed\n",
                 o.sender_cpu);
    return 2;
  }
  // Two channels a run: their "publisher: channel ..." lines would bury the figures (TICKRAIL_LOG
  // still decides when set).
  if (std::getenv("TICKRAIL_LOG") == nullptr) set_log_level(LogLevel::warn);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_pingpong: %s\n", e.what());
    return 1;
  }
}
