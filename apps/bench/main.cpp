// tickrail-bench: tickrail's shared-memory path against the physical floor and
// boost::lockfree::spsc_queue, on the same two cores, in one run.
//
// The two cores of a VM drift between core-to-core latency states, so the contenders run in
// short alternating rounds and each is reported as a ratio to the floor measured in the same
// round, not only as absolute figures.
//
//   floor          a cache-line ping-pong between the two threads: half the round trip
//   floor one way  a TSC stamp and its number in a ring of lines, written every gap, read by a
//                  spinning receiver
//   spsc           boost::lockfree::spsc_queue<Tick>: one-way, receive TSC minus the send stamp
//   tickrail       Publisher -> Subscriber over shm: one-way, receive TSC minus Tick::send_ts
//   pingpong       tickrail both ways: a tick out on one channel, back on another, RTT/2 as the
//                  floor is measured (unstamped channels; what Aeron's ping sample reports)
//
// Latency rounds send one tick at a time at a fixed gap (no queueing), each contender once per
// layout (--layouts: a pair of code copies for the two sides' loops, and memory and channels made
// for the run; on this kind of VM a loop's figure moves by a third with where its code and lines
// lie); throughput rounds push
// as fast as the consumer allows, one tick per call, the consumer draining in batches; in them
// neither contender stamps a send time (tickrail's stamped rate is printed beside).
//
// Two more throughput figures: a receiver slower than the sender (its handler spends
// --slow-ns on every tick: the publisher is held back, nothing is lost), and the drain rate of
// a receiver that lagged a whole ring behind (the sender fills the ring while it waits, then it
// reads the ring out). Where the CPU counts instructions (perf_event_open), the instructions
// per tick of one thread publishing and polling back are printed; apps/bench/instructions.sh
// counts the same under callgrind where it does not.
//
// --stats on|off|both: tickrail's live counters (tickrail-stat) on, off, or both: tickrail one way
// and the ping-pong run with counters off too, in the same rounds and layouts, and a channel with
// counters off in the throughput rounds; the ratios on/off say what the counters cost.
//
// --state on|off|both: the last-value table (docs/state.md) on the tickrail contender's channels,
// which then publish a quote/trade/status mix over the table's instruments (TickMix); with both,
// channels without the table run in the same rounds and the ratios on/off say what it costs.
// --snapshot N times snapshots of a table of N instruments instead of the rounds (snapshot.cpp).
#include <boost/lockfree/spsc_queue.hpp>

#include "cli.hpp"
#include "failover_bench.hpp"
#include "rounds.hpp"
#include "state_bench.hpp"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/log.hpp"
#include "tickrail/tools/histogram.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/tools/report.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;

namespace {

struct Options {
  int rounds = 20;
  std::uint64_t samples = 20'000;       // latency samples per contender per round
  std::uint64_t gap_ns = 2'000;         // latency: interval between sends
  std::uint64_t throughput_ticks = 2'000'000;
  int sender_cpu = 0;
  int receiver_cpu = 1;
  std::string json_path;
  std::string stats = "on";  // on, off, both
  std::uint64_t slow_ns = 100;  // the slow receiver's work per tick
  bench::StateOptions state;
  bool failover = false;  // --failover: one line against two (failover_bench.hpp) instead
  int layouts = bench::kShifts;  // code layouts each latency contender runs in, per round
};

template <class Send, class Receive>
void on_two_cores(const Options& o, Send&& send, Receive&& receive) {
  bench::on_two_cores(o.receiver_cpu, send, receive);
}
using bench::Layout;
using bench::median_of;
using bench::spin_until;

using bench::Line;

// Instructions retired in user space by the calling thread, where the CPU counts them for us
// (not in most VMs); valid() false otherwise.
class InstructionCounter {
 public:
  InstructionCounter() {
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    fd_ = static_cast<int>(::syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  }
  ~InstructionCounter() {
    if (fd_ >= 0) ::close(fd_);
  }
  InstructionCounter(const InstructionCounter&) = delete;
  InstructionCounter& operator=(const InstructionCounter&) = delete;
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  [[nodiscard]] std::uint64_t read() const {
    std::uint64_t v = 0;
    if (fd_ < 0 || ::read(fd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return 0;
    return v;
  }

 private:
  int fd_ = -1;
};

// ---- latency runs ----------------------------------------------------------------------------
// Each runs one contender once, both sides' loops the copies `layout` names (rounds.hpp), on the
// memory it is given, records its samples in `h` and returns their p50.
double recorded(std::vector<std::uint64_t>& samples, Histogram& h) {
  for (const std::uint64_t v : samples) h.record(v);
  return median_of(samples);
}

// The floor: half the round trip of a cache-line ping-pong between the two threads.
double floor_run(const Options& o, Layout layout, std::uint64_t samples, Line* lines, Histogram& h) {
  std::vector<std::uint64_t> half = bench::floor_ping_pong(o.receiver_cpu, layout, samples, lines);
  return recorded(half, h);
}

// The one-way floor (rounds.hpp), its samples into `h`.
double floor_one_way_run(const Options& o, Layout layout, std::uint64_t samples, Slot* ring, Histogram& h) {
  std::vector<std::uint64_t> lat =
      bench::floor_one_way(o.receiver_cpu, layout, samples, static_cast<double>(o.gap_ns), ring, bench::kRing);
  return recorded(lat, h);
}

// ---- spsc_queue ----------------------------------------------------------------------------
// Fills a new queue once and empties it: its storage's pages are then there before the timing,
// as a channel's ring's are (mapped populated).
void touch(boost::lockfree::spsc_queue<Tick>& q) {
  const Tick blank{};
  while (q.push(blank)) {
  }
  Tick t;
  while (q.pop(t)) {
  }
}

double spsc_run(const Options& o, Layout layout, std::uint64_t samples, boost::lockfree::spsc_queue<Tick>& q,
                Histogram& h) {
  Tick t{};
  auto send = [&](std::uint64_t i) {
    t.seq = i;
    t.send_ts = Clock::now();
    while (!q.push(t)) cpu_relax();
  };
  auto poll = [&](auto& handler) -> std::size_t {
    Tick r;
    if (!q.pop(r)) return 0;
    handler(r);
    return 1;
  };
  std::vector<std::uint64_t> lat =
      bench::one_way(o.receiver_cpu, layout, samples, static_cast<double>(o.gap_ns), send, poll);
  return recorded(lat, h);
}

double spsc_throughput_round(const Options& o, boost::lockfree::spsc_queue<Tick>& q) {
  const Clock& clk = Clock::instance();
  std::uint64_t t0 = 0, t1 = 0;
  bench::Apart<std::uint64_t> checksum{0};  // written by the receiver on every batch
  on_two_cores(
      o,
      [&] {
        Tick t{};
        t0 = Clock::now();
        for (std::uint64_t i = 1; i <= o.throughput_ticks; ++i) {
          t.seq = i;
          while (!q.push(t)) cpu_relax();
        }
      },
      [&] {
        Tick batch[64];
        for (std::uint64_t got = 0; got < o.throughput_ticks;) {
          const std::size_t n = q.pop(batch, 64);
          for (std::size_t k = 0; k < n; ++k) checksum.v += batch[k].seq;
          got += n;
          if (n == 0) cpu_relax();
        }
        t1 = Clock::now();
      });
  if (checksum.v != o.throughput_ticks * (o.throughput_ticks + 1) / 2) {
    std::fprintf(stderr, "spsc throughput: checksum mismatch\n");
  }
  return static_cast<double>(o.throughput_ticks) / (clk.to_ns(t1 - t0) * 1e-9);
}

// ---- tickrail shm --------------------------------------------------------------------------
// One way. `mix`: the ticks to publish (the table's contenders), else the same blank tick.
double tickrail_one_way_run(const Options& o, Layout layout, std::uint64_t samples, Publisher& pub, Subscriber& sub,
                    Histogram& h, bench::TickMix* mix = nullptr) {
  const Tick blank{};
  auto send = [&](std::uint64_t) {
    const Tick& t = mix != nullptr ? mix->next() : blank;
    bench::publish_spinning(pub, t);
  };
  auto poll = [&](auto& handler) { return sub.poll(handler); };
  std::vector<std::uint64_t> lat =
      bench::one_way(o.receiver_cpu, layout, samples, static_cast<double>(o.gap_ns), send, poll);
  return recorded(lat, h);
}

double tickrail_throughput_round(const Options& o, Publisher& pub, Subscriber& sub,
                                 bench::TickMix* mix = nullptr) {
  const Clock& clk = Clock::instance();
  std::uint64_t t0 = 0, t1 = 0;
  bench::Apart<std::uint64_t> received{0};  // written by the receiver on every batch
  on_two_cores(
      o,
      [&] {
        const Tick blank{};
        t0 = Clock::now();
        for (std::uint64_t i = 1; i <= o.throughput_ticks; ++i) {
          const Tick& t = mix != nullptr ? mix->next() : blank;
          bench::publish_spinning(pub, t);
        }
      },
      [&] {
        while (received.v < o.throughput_ticks) {
          const std::size_t n = sub.poll([&](const Tick&) {}, 64);
          received.v += n;
          if (n == 0) cpu_relax();
        }
        t1 = Clock::now();
      });
  return static_cast<double>(o.throughput_ticks) / (clk.to_ns(t1 - t0) * 1e-9);
}

// Instructions per tick of the publish-to-handler path, from the CPU's counters: this thread
// publishes a tick and polls it back, 100,000 times, as ipt_loop does under callgrind (two
// threads would count their spinning too). -1 where the CPU does not count for us.
double tickrail_instructions_per_tick(Publisher& pub, Subscriber& sub) {
  const InstructionCounter c;
  if (!c.valid()) return -1;
  constexpr std::uint64_t kTicks = 100'000;
  Tick t{};
  std::uint64_t got = 0;
  const auto loop = [&](std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) {
      (void)pub.publish(t);
      got += sub.poll([](const Tick&) {}, 16);
    }
  };
  loop(1000);  // warm
  const std::uint64_t before = c.read();
  loop(kTicks);
  return static_cast<double>(c.read() - before) / static_cast<double>(kTicks);
}

// RTT/2 of a tick sent on `out` and echoed back on `back` by the other core.
double pingpong_run(const Options& o, Layout layout, std::uint64_t samples, bench::Channel& out, bench::Channel& back,
                    Histogram& h) {
  std::vector<std::uint64_t> half = bench::channel_ping_pong(o.receiver_cpu, layout, samples, out, back);
  return recorded(half, h);
}

// The receiver spends `slow_ns` on each tick: ticks/s delivered, and the ticks the publisher
// was held back for (its back_pressured calls), none lost.
double tickrail_slow_round(const Options& o, Publisher& pub, Subscriber& sub) {
  const Clock& clk = Clock::instance();
  const std::uint64_t work = clk.ns_to_cycles(static_cast<double>(o.slow_ns));
  const std::uint64_t ticks = o.throughput_ticks / 4;
  std::uint64_t t0 = 0, t1 = 0;
  bench::Apart<std::uint64_t> received{0};  // written by the receiver on every batch
  const std::uint64_t lost_before = sub.counters().lost;
  on_two_cores(
      o,
      [&] {
        Tick t{};
        t0 = Clock::now();
        for (std::uint64_t i = 1; i <= ticks; ++i) {
          bench::publish_spinning(pub, t);
        }
      },
      [&] {
        while (received.v < ticks) {
          const std::size_t n = sub.poll([&](const Tick&) { spin_until(Clock::now() + work); }, 64);
          received.v += n;
          if (n == 0) cpu_relax();
        }
        t1 = Clock::now();
      });
  if (sub.counters().lost != lost_before) {
    throw Error(Errc::invalid_argument, "the slow receiver lost ticks under the block policy");
  }
  return static_cast<double>(ticks) / (clk.to_ns(t1 - t0) * 1e-9);
}

// A receiver a whole ring behind: the sender fills the ring while it waits, then it reads the
// ring out; ticks/s of that read, the best of a few fills.
double tickrail_drain_round(const Options& o, Publisher& pub, Subscriber& sub, std::uint64_t ring) {
  const Clock& clk = Clock::instance();
  double best = 0;
  for (int fill = 0; fill < 8; ++fill) {
    std::atomic<bool> full{false};
    std::uint64_t t0 = 0, t1 = 0;
    on_two_cores(
        o,
        [&] {
          Tick t{};
          for (std::uint64_t i = 0; i < ring; ++i) {
            bench::publish_spinning(pub, t);
          }
          full.store(true, std::memory_order_release);
        },
        [&] {
          while (!full.load(std::memory_order_acquire)) cpu_relax();
          std::uint64_t received = 0;
          t0 = Clock::now();
          while (received < ring) received += sub.poll([](const Tick&) {}, 256);
          t1 = Clock::now();
        });
    best = std::max(best, static_cast<double>(ring) / (clk.to_ns(t1 - t0) * 1e-9));
  }
  return best;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

using bench::Channel;

// The channels every round uses: `main` as --stats says, `off` (--stats both) with counters
// off, `unstamped` for throughput (spsc_queue carries an unstamped tick, so the headline
// tickrail figure comes from a channel that does not stamp send times either: the stamp's
// LFENCE;RDTSC costs more than moving the tick; the stamped rate is printed too), and
// `no_prefetch`, the same with PublisherConfig::prefetch_ahead 0 where the others take the
// default, the two in turns (its conductor thread, asleep, is one more on the hosts' cores).
// --state on or both puts the table on `main`, `off`, `unstamped` and `no_prefetch` (which then
// publishes out of line); both adds twins without it to the first three.
// The latency rounds over layouts make a channel of `config` or `pingpong` for each run.
struct Channels {
  PublisherConfig config;
  PublisherConfig pingpong;  // unstamped, no table
  std::optional<Channel> main, off, unstamped, no_prefetch;
  std::optional<Channel> state_off, unstamped_state_off;  // --state both: no table
  std::optional<bench::TickMix> mix;                      // the ticks of the table's channels
  std::optional<Channel> big;                             // the drain: a larger ring

  explicit Channels(const Options& o) {
    config.channel = "bench-" + std::to_string(::getpid());
    config.max_subscribers = 1;
    config.ring_capacity = bench::kRing;
    config.stats = o.stats != "off";
    // Off both pinned cores when the host has another (else the library's default: off the sender's).
    config.housekeeping_cpus = cpus_besides({o.sender_cpu, o.receiver_cpu});
    config.state = bench::rounds_table(o.state, o.state.state != "off");
    if (config.state.enabled) mix.emplace(config.state.capacity);
    main.emplace(config, "subscriber");
    if (o.stats == "both") {
      PublisherConfig c = config;
      c.channel += "-nostats";
      c.stats = false;
      off.emplace(c, "counters-off subscriber");
    }
    PublisherConfig c = config;
    c.channel += "-nostamp";
    c.stamp_send_time = false;
    unstamped.emplace(c, "unstamped channel's subscriber");
    PublisherConfig np = c;
    np.channel = config.channel + "-noprefetch";
    np.prefetch_ahead = 0;
    no_prefetch.emplace(np, "no-prefetch channel's subscriber");
    if (o.state.state == "both") {
      const auto no_table = [](PublisherConfig p) {
        p.channel += "-nostate";
        p.state.enabled = false;
        return p;
      };
      state_off.emplace(no_table(config), "table-off subscriber");
      unstamped_state_off.emplace(no_table(c), "unstamped table-off subscriber");
    }
    pingpong = config;
    pingpong.stamp_send_time = false;
    pingpong.state = {};
    PublisherConfig b = c;
    b.channel = config.channel + "-drain";
    b.ring_capacity = kDrainRing;
    b.state = {};
    big.emplace(b, "drain channel's subscriber");
  }
  static constexpr std::uint32_t kDrainRing = 65536;  // 4 MiB of slots, past L2
  bench::TickMix* table_mix() { return mix ? &*mix : nullptr; }
  // `c` under a name of its own, for one run.
  PublisherConfig for_run(const PublisherConfig& c, const char* what) {
    PublisherConfig p = c;
    p.channel += "-" + std::string(what) + "-" + std::to_string(runs_++);
    return p;
  }

 private:
  int runs_ = 0;
};

struct Results {
  Histogram floor, spsc, tickrail, pingpong, floor_one_way;
  std::vector<double> r_tr_one_way;  // tickrail one way / the one-way floor
  std::vector<double> r_spsc, r_tr, r_pp, tp_spsc, tp_tr, tp_ratio, tp_stamped, tp_no_prefetch, tp_slow, drain;
  std::vector<double> ipt;
  std::vector<double> r_pp_stats;  // --stats both: ping-pong p50, counters on / off
  Histogram off;                          // --stats both: tickrail one way, counters off
  std::vector<double> r_stats, tp_stats;  // per round: counters on / counters off
  Histogram state_on, state_off;          // --state both: adjacent on/off rounds
  std::vector<bench::OnOffRound> state;
};

using bench::median;

// --state both: the table on and off back to back, latency then throughput (unstamped, as the
// headline figure), the order alternating by round so that neither always goes first.
bench::OnOffRound state_pair(const Options& o, int r, Channels& ch, Results& res) {
  bench::OnOffRound p;
  bench::TickMix* mix = ch.table_mix();
  const auto lat_on = [&] { p.p50_on = tickrail_one_way_run(o, Layout{}, o.samples, ch.main->pub, ch.main->sub, res.state_on, mix); };
  const auto lat_off = [&] {
    p.p50_off = tickrail_one_way_run(o, Layout{}, o.samples, ch.state_off->pub, ch.state_off->sub, res.state_off, mix);
  };
  const auto tp_on = [&] { p.tp_on = tickrail_throughput_round(o, ch.unstamped->pub, ch.unstamped->sub, mix); };
  const auto tp_off = [&] {
    p.tp_off = tickrail_throughput_round(o, ch.unstamped_state_off->pub, ch.unstamped_state_off->sub, mix);
  };
  if (r % 2 == 0) {
    lat_off(), lat_on(), tp_on(), tp_off();
  } else {
    lat_on(), lat_off(), tp_off(), tp_on();
  }
  return p;
}

// The samples of one latency run: a round's share among its layouts, at least 100.
std::uint64_t samples_per_run(const Options& o) {
  return std::max<std::uint64_t>(100, o.samples / static_cast<std::uint64_t>(o.layouts));
}

// A round's latency contenders over layouts: each runs once per layout (--layouts of them: pairs
// of code shifts for the two sides, Layout::nth), on memory made for the run (a page for the floor's
// two lines, the queue, the channels), the contenders taking turns; a contender's figure is the
// median of its runs' p50s. Its histogram gets every sample. With --stats both, tickrail one way
// and the ping-pong run with the counters off as two more contenders.
struct Latencies {
  double floor = 0, spsc = 0, tickrail = 0, pingpong = 0;
  double floor_one_way = 0;
  double tickrail_off = 0, pingpong_off = 0;  // --stats both
  std::string spread;                         // each contender's runs' p50s, lowest to highest
};
Latencies latency_over_layouts(const Options& o, int r, Channels& ch, Results& res) {
  const std::uint64_t samples = samples_per_run(o);
  // Kept until the round ends, so that each run's lines and queue lie where no earlier run's did.
  std::vector<std::unique_ptr<bench::FreshMemory>> pages;
  std::vector<std::unique_ptr<boost::lockfree::spsc_queue<Tick>>> queues;
  const auto tickrail_one_way = [&](Layout layout, const PublisherConfig& c, Histogram& h) {
    Channel m(ch.for_run(c, "run"), "subscriber");
    return tickrail_one_way_run(o, layout, samples, m.pub, m.sub, h, ch.table_mix());
  };
  const auto tickrail_ping_pong = [&](Layout layout, const PublisherConfig& c, Histogram& h) {
    Channel out(ch.for_run(c, "ping"), "ping channel's subscriber");
    Channel back(ch.for_run(c, "pong"), "pong channel's subscriber");
    return pingpong_run(o, layout, samples, out, back, h);
  };
  Histogram pp_off;  // not reported: only its p50s count
  std::vector<std::function<double(Layout)>> contenders{
      [&](Layout layout) {
        pages.push_back(std::make_unique<bench::FreshMemory>());
        return floor_run(o, layout, samples, pages.back()->make<Line>(2), res.floor);
      },
      [&](Layout layout) {
        queues.push_back(std::make_unique<boost::lockfree::spsc_queue<Tick>>(4096));
        touch(*queues.back());
        return spsc_run(o, layout, samples, *queues.back(), res.spsc);
      },
      [&](Layout layout) { return tickrail_one_way(layout, ch.config, res.tickrail); },
      [&](Layout layout) { return tickrail_ping_pong(layout, ch.pingpong, res.pingpong); },
      [&](Layout layout) {
        pages.push_back(std::make_unique<bench::FreshMemory>(bench::kRing * sizeof(Slot)));
        return floor_one_way_run(o, layout, samples, pages.back()->make<Slot>(bench::kRing), res.floor_one_way);
      }};
  if (o.stats == "both") {
    PublisherConfig off = ch.config, pp = ch.pingpong;
    off.stats = pp.stats = false;
    contenders.push_back([&, off](Layout layout) { return tickrail_one_way(layout, off, res.off); });
    contenders.push_back([&, pp](Layout layout) { return tickrail_ping_pong(layout, pp, pp_off); });
  }
  const std::size_t n = contenders.size();
  std::vector<std::vector<double>> runs(n);
  for (int k = 0; k < o.layouts; ++k) {
    const Layout layout = Layout::nth(k, r);
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t c = (j + static_cast<std::size_t>(k + r)) % n;  // each contender first in turn
      runs[c].push_back(contenders[c](layout));
    }
  }
  Latencies l;
  l.floor = median(runs[0]), l.spsc = median(runs[1]), l.tickrail = median(runs[2]), l.pingpong = median(runs[3]);
  l.floor_one_way = median(runs[4]);
  if (n > 5) l.tickrail_off = median(runs[5]), l.pingpong_off = median(runs[6]);
  static constexpr const char* kNames[] = {"floor",         "spsc",        "tickrail",     "ping-pong",
                                           "floor one way", "tickrail off", "ping-pong off"};
  for (std::size_t c = 0; c < n; ++c) {
    const auto [lo, hi] = std::minmax_element(runs[c].begin(), runs[c].end());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.0f-%.0f", c == 0 ? "" : ", ", kNames[c], *lo, *hi);
    l.spread += buf;
  }
  return l;
}

// One round: the latency contenders over layouts, then throughput (with --stats both, counters
// off too), then with --state both the table's on/off pairs; its lines on stdout.
void run_round(const Options& o, int r, Channels& ch, boost::lockfree::spsc_queue<Tick>& q, Results& res) {
  Channel& m = *ch.main;
  const Latencies l = latency_over_layouts(o, r, ch, res);
  const double f = l.floor, s = l.spsc, t = l.tickrail, pp = l.pingpong;
  res.r_spsc.push_back(s / f);
  res.r_tr.push_back(t / f);
  res.r_pp.push_back(pp / f);
  res.r_tr_one_way.push_back(t / l.floor_one_way);
  double b_off = 0;
  if (o.stats == "both") {
    res.r_stats.push_back(t / l.tickrail_off);
    res.r_pp_stats.push_back(pp / l.pingpong_off);
  }
  const double a = spsc_throughput_round(o, q);
  double b = 0, b_np = 0;
  const auto plain = [&] { b = tickrail_throughput_round(o, ch.unstamped->pub, ch.unstamped->sub, ch.table_mix()); };
  const auto no_prefetch = [&] {
    b_np = tickrail_throughput_round(o, ch.no_prefetch->pub, ch.no_prefetch->sub, ch.table_mix());
  };
  if ((r & 1) == 0) {
    plain();
    no_prefetch();
  } else {
    no_prefetch();
    plain();
  }
  const double slow = tickrail_slow_round(o, ch.unstamped->pub, ch.unstamped->sub);
  const double drain = tickrail_drain_round(o, ch.big->pub, ch.big->sub, Channels::kDrainRing);
  res.tp_slow.push_back(slow);
  res.drain.push_back(drain);
  const double ipt = tickrail_instructions_per_tick(m.pub, m.sub);
  if (ipt >= 0) res.ipt.push_back(ipt);
  const double b_st = tickrail_throughput_round(o, m.pub, m.sub, ch.table_mix());
  if (ch.off) {
    b_off = tickrail_throughput_round(o, ch.off->pub, ch.off->sub, ch.table_mix());
    res.tp_stats.push_back(b_st / b_off);
  }
  res.tp_spsc.push_back(a);
  res.tp_tr.push_back(b);
  res.tp_stamped.push_back(b_st);
  res.tp_no_prefetch.push_back(b_np);
  res.tp_ratio.push_back(b / a);
  std::printf("  round %2d: floor p50 %6.1f ns | spsc p50 %6.1f ns (%.2fx) | tickrail p50 %6.1f "
              "ns (%.2fx) | ping-pong p50 %6.1f ns (%.2fx)\n"
              "            throughput spsc %6.2f M/s, tickrail %6.2f M/s (%.2fx), "
              "stamped %6.2f M/s, no prefetch %6.2f M/s | slow receiver %6.2f M/s | drain %6.1f M/s\n",
              r + 1, f, s, s / f, t, t / f, pp, pp / f, a / 1e6, b / 1e6, b / a, b_st / 1e6,
              b_np / 1e6, slow / 1e6, drain / 1e6);
  std::printf("            one-way floor p50 %6.1f ns, tickrail / it %.2fx | p50 over the %d layouts, ns: %s\n",
              l.floor_one_way, t / l.floor_one_way, o.layouts, l.spread.c_str());
  if (ch.state_off) {
    res.state.push_back(state_pair(o, r, ch, res));
    std::printf("%s", bench::on_off_round_text(res.state.back()).c_str());
  }
  if (ch.off) {
    std::printf("            counters off: p50 %6.1f ns, on/off %.3f | ping-pong p50 %6.1f ns, on/off %.3f | "
                "throughput %6.2f M/s, on/off %.3f\n",
                l.tickrail_off, res.r_stats.back(), l.pingpong_off, res.r_pp_stats.back(), b_off / 1e6,
                res.tp_stats.back());
  }
  std::fflush(stdout);
}

void print_summary(const Results& res, bool both, std::uint64_t slow_ns) {
  std::vector<TableRow> rows{{"floor (RTT/2)", summarize(res.floor)},
                             {"floor one way", summarize(res.floor_one_way)},
                             {"spsc_queue", summarize(res.spsc)},
                             {"tickrail shm", summarize(res.tickrail)},
                             {"ping-pong RTT/2", summarize(res.pingpong)}};
  if (both) rows.push_back({"tickrail, no stats", summarize(res.off)});
  if (!res.state.empty()) {
    rows.push_back({"tickrail, table on", summarize(res.state_on)});
    rows.push_back({"tickrail, table off", summarize(res.state_off)});
  }
  std::printf("\none-way latency over all rounds (ns; floor is half a ping-pong round trip):\n%s",
              format_table(rows).c_str());
  std::printf("\nper-round medians, ratio to the same round's floor p50 (median over rounds):\n"
              "  spsc_queue %.2fx, tickrail %.2fx, tickrail ping-pong RTT/2 %.2fx\n",
              median(res.r_spsc), median(res.r_tr), median(res.r_pp));
  std::printf("  tickrail one way / the one-way floor (a ring of lines stamped and read at the same pace): %.2fx\n",
              median(res.r_tr_one_way));
  std::printf("throughput with a receiver spending %llu ns a tick: %.2f M ticks/s, none lost; "
              "a receiver a ring (%u ticks) behind drains at %.1f M ticks/s (medians over rounds)\n",
              static_cast<unsigned long long>(slow_ns), median(res.tp_slow) / 1e6,
              Channels::kDrainRing, median(res.drain) / 1e6);
  if (res.ipt.empty()) {
    std::printf("instructions per tick: not counted here (no CPU counters: "
                "apps/bench/instructions.sh counts them under callgrind)\n");
  } else {
    std::printf("instructions per tick, publish + poll + handler in one thread (median over "
                "rounds): %.1f\n", median(res.ipt));
  }
  std::printf("throughput, median over rounds: spsc_queue %.2f M ticks/s, tickrail %.2f M ticks/s; "
              "tickrail/spsc %.2fx (median of per-round ratios); tickrail stamping send times "
              "%.2f M ticks/s; no prefetch (prefetch_ahead 0) %.2f M ticks/s\n",
              median(res.tp_spsc) / 1e6, median(res.tp_tr) / 1e6, median(res.tp_ratio),
              median(res.tp_stamped) / 1e6, median(res.tp_no_prefetch) / 1e6);
  if (both) {
    std::printf("live counters, on/off in the same rounds (median of per-round ratios): "
                "p50 %.3f, ping-pong p50 %.3f, throughput %.3f\n",
                median(res.r_stats), median(res.r_pp_stats), median(res.tp_stats));
  }
  if (!res.state.empty()) std::printf("%s", bench::on_off_summary_text(res.state).c_str());
}

nlohmann::json results_json(const Options& o, const Results& res, bool both) {
  nlohmann::json j;
  j["machine"] = {{"cpu", cpu_model()}, {"clock", Clock::instance().describe()},
                  {"sender_cpu", o.sender_cpu}, {"receiver_cpu", o.receiver_cpu}};
  j["rounds"] = o.rounds;
  j["layouts"] = o.layouts;
  j["samples_per_run"] = samples_per_run(o);
  j["latency_ns"] = {{"floor_rtt_half", to_json(summarize(res.floor))},
                     {"spsc_queue", to_json(summarize(res.spsc))},
                     {"tickrail_shm", to_json(summarize(res.tickrail))}};
  j["latency_ns"]["tickrail_pingpong_rtt_half"] = to_json(summarize(res.pingpong));
  j["p50_ratio_to_floor_median"] = {{"spsc_queue", median(res.r_spsc)},
                                    {"tickrail_shm", median(res.r_tr)},
                                    {"tickrail_pingpong", median(res.r_pp)}};
  j["p50_ratio_to_one_way_floor_median"] = {{"tickrail_shm", median(res.r_tr_one_way)}};
  j["latency_ns"]["floor_one_way"] = to_json(summarize(res.floor_one_way));
  j["slow_receiver"] = {{"work_ns_per_tick", o.slow_ns}, {"ticks_per_s_median", median(res.tp_slow)}};
  j["drain"] = {{"ring_ticks", Channels::kDrainRing}, {"ticks_per_s_median", median(res.drain)}};
  if (!res.ipt.empty()) {
    j["instructions_per_tick_median"] = median(res.ipt);
  }
  j["throughput_ticks_per_s_median"] = {{"spsc_queue", median(res.tp_spsc)}, {"tickrail_shm", median(res.tp_tr)}};
  j["throughput_ratio_tickrail_to_spsc_median"] = median(res.tp_ratio);
  j["throughput_ticks_per_s_median"]["tickrail_shm_stamped"] = median(res.tp_stamped);
  j["throughput_ticks_per_s_median"]["tickrail_shm_no_prefetch"] = median(res.tp_no_prefetch);
  j["stats"] = o.stats;
  if (both) {
    j["latency_ns"]["tickrail_shm_no_stats"] = to_json(summarize(res.off));
    j["stats_on_off_p50_ratio_median"] = median(res.r_stats);
    j["stats_on_off_pingpong_p50_ratio_median"] = median(res.r_pp_stats);
    j["stats_on_off_throughput_ratio_median"] = median(res.tp_stats);
  }
  j["state"] = o.state.state;
  if (o.state.state != "off") {
    const StateConfig t = bench::rounds_table(o.state, true);
    j["state_table"] = {{"capacity", t.capacity}, {"classes", o.state.classes},
                        {"mix_per_16_ticks", "10 Quote, 2 Trade, 2 Execute, 1 Status, 1 Add"}};
  }
  if (!res.state.empty()) {
    j["state_on_off"] = bench::on_off_json(res.state);
    j["latency_ns"]["tickrail_shm_table_on"] = to_json(summarize(res.state_on));
    j["latency_ns"]["tickrail_shm_table_off"] = to_json(summarize(res.state_off));
  }
  return j;
}

// The JSON on stdout, or in --json's file; the exit status.
int emit(const Options& o, const nlohmann::json& j) {
  if (o.json_path.empty()) {
    std::printf("\n%s\n", j.dump().c_str());
    return 0;
  }
  std::ofstream out(o.json_path);
  out << j.dump(2) << "\n";
  if (!out) {
    std::cerr << "tickrail-bench: cannot write " << o.json_path << "\n";
    return 1;
  }
  return 0;
}

// --snapshot: the repetitions, their report and JSON.
int snapshot_bench(const Options& o) {
  std::printf("  %d snapshots, one subscriber after another\n", o.rounds);
  const bench::SnapshotRun run = bench::measure_snapshots(o.state, o.rounds, o.receiver_cpu,
                                                          cpus_besides({o.sender_cpu, o.receiver_cpu}));
  std::printf("%s", bench::snapshot_text(run).c_str());
  nlohmann::json j;
  j["machine"] = {{"cpu", cpu_model()}, {"clock", Clock::instance().describe()},
                  {"sender_cpu", o.sender_cpu}, {"receiver_cpu", o.receiver_cpu}};
  j["snapshot"] = bench::snapshot_json(run);
  return emit(o, j);
}

// --failover: the rounds of one line against two, their report and JSON.
int failover_bench(const Options& o) {
  bench::FailoverBenchOptions f;
  f.rounds = o.rounds;
  f.samples = samples_per_run(o);
  f.gap_ns = o.gap_ns;
  f.receiver_cpu = o.receiver_cpu;
  f.layouts = o.layouts;
  f.housekeeping_cpus = cpus_besides({o.sender_cpu, o.receiver_cpu});
  std::printf("  %d rounds x %llu ticks (gap %llu ns): one line, and the same ticks on two lines read by a "
              "FailoverSubscriber, by turns, once in each of %d code layouts a round\n",
              o.rounds, static_cast<unsigned long long>(o.samples), static_cast<unsigned long long>(o.gap_ns),
              o.layouts);
  const bench::FailoverRun run = bench::measure_failover(f);
  std::printf("%s", bench::failover_text(run).c_str());
  nlohmann::json j;
  j["failover"] = bench::failover_json(run);
  return emit(o, j);
}

// Pins, prints the heading, runs the rounds (or the snapshots) and reports; the exit status.
int run_bench(const Options& o) {
  const Clock& clk = Clock::instance();
  const PinResult pin = pin_current_thread(o.sender_cpu);
  if (!pin.ok) {
    std::cerr << "tickrail-bench: " << pin.message << "\n";
    return 1;
  }
  std::printf("tickrail-bench: %s; sender on cpu %d, receiver on cpu %d; %s\n",
              cpu_model().c_str(), o.sender_cpu, o.receiver_cpu, clk.describe().c_str());
  if (!pin.message.empty()) std::printf("  note: %s\n", pin.message.c_str());
  if (o.state.snapshot != 0) return snapshot_bench(o);
  if (o.failover) return failover_bench(o);
  std::printf("  %d rounds x %llu latency samples (gap %llu ns) and %llu throughput ticks\n",
              o.rounds, static_cast<unsigned long long>(o.samples),
              static_cast<unsigned long long>(o.gap_ns),
              static_cast<unsigned long long>(o.throughput_ticks));
  std::printf("  latency over %d layouts: in each round the floor, the one-way floor, spsc_queue, tickrail and the "
              "ping-pong run once per layout (a pair of code copies for the two sides' loops, memory and channels "
              "made for the run), %llu samples each; a round's figure is the median of its runs' p50s\n",
              o.layouts, static_cast<unsigned long long>(samples_per_run(o)));
  // Channels made for every latency run: their "publisher: channel ..." lines would bury the
  // figures (TICKRAIL_LOG still decides when set).
  if (std::getenv("TICKRAIL_LOG") == nullptr) set_log_level(LogLevel::warn);
  Channels ch(o);
  const bool both = ch.off.has_value();
  std::printf("  live counters: %s\n", both ? "on and off: one way and the ping-pong off are contenders of the same "
                                                    "layouts, throughput off runs after on in each round"
                                             : (ch.config.stats ? "on" : "off"));
  if (ch.mix) {
    std::printf("  last-value table: %s, %u instruments, classes %s; its channels publish, per 16 "
                "ticks, 10 Quote, 2 Trade, 2 Execute, 1 Status, 1 Add, instrument stepping by %u\n",
                ch.state_off ? "on and off, alternating in each round" : "on", ch.config.state.capacity,
                o.state.classes.c_str(), ch.mix->stride());
  }
  std::printf("  throughput: unstamped ticks in both (tickrail's stamped rate shown apart)\n");
  boost::lockfree::spsc_queue<Tick> q(4096);
  Results res;
  {
    // One round's latency runs, not counted: a process's first runs can wait milliseconds for
    // the receiver's core (the channels' threads starting on it), which no round should carry.
    Results warm;
    (void)latency_over_layouts(o, 0, ch, warm);
  }
  for (int r = 0; r < o.rounds; ++r) run_round(o, r, ch, q, res);
  print_summary(res, both, o.slow_ns);
  return emit(o, results_json(o, res, both));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  cli::Cli command("tickrail-bench", "tickrail-bench: shared-memory path vs the cache-line floor and spsc_queue");
  CLI::App& app = command.app();
  app.add_option("--rounds", o.rounds, "alternating rounds; with --snapshot, the snapshots taken")->check(CLI::Range(1, 10000));
  app.add_option("--samples", o.samples,
                 "latency samples per contender per round, shared among its layouts (at least 100 a run)")
      ->check(CLI::Range(100, 100'000'000));
  app.add_option("--layouts", o.layouts,
                 "code layouts per round: each latency contender runs once in each, on memory of its own")
      ->check(CLI::Range(1, bench::kShifts))
      ->capture_default_str();
  app.add_option("--gap-ns", o.gap_ns, "latency: ns between sends")->check(CLI::Range(100, 1'000'000));
  app.add_option("--throughput-ticks", o.throughput_ticks, "ticks per throughput round")
      ->check(CLI::Range(1000, 1'000'000'000));
  app.add_option("--sender-cpu", o.sender_cpu, "core of the sending thread")->check(CLI::Range(0, 4095));
  app.add_option("--receiver-cpu", o.receiver_cpu, "core of the receiving thread")->check(CLI::Range(0, 4095));
  app.add_option("--json", o.json_path, "write the figures as JSON to this file");
  app.add_option("--slow-ns", o.slow_ns, "the slow receiver's work per tick, ns")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  app.add_option("--stats", o.stats, "live counters: on, off, or both (compared in the same rounds)")
      ->check(CLI::IsMember({"on", "off", "both"}))
      ->capture_default_str();
  bench::add_state_options(app, o.state);
  app.add_flag("--failover", o.failover,
               "instead of the rounds: one line against the same ticks on two lines read by a FailoverSubscriber");
  if (const auto status = command.parse(argc, argv)) return *status;
  if (o.failover && (o.state.snapshot != 0 || o.state.state != "off" || o.stats != "on")) {
    std::cerr << "tickrail-bench: error: --failover runs alone: without --snapshot, --state or --stats\n";
    return cli::kExitUsage;
  }
  if (const std::string why = bench::check_state_options(o.state); !why.empty()) {
    std::cerr << "tickrail-bench: error: " << why << "\n";
    return cli::kExitUsage;
  }
  try {
    return run_bench(o);
  } catch (const std::exception& e) {
    std::cerr << "tickrail-bench: " << e.what() << "\n";
    return 1;
  }
}
