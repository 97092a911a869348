// tickrail-bench-rc: tickrail's RC transport next to perftest on the same RDMA device, in one run.
//
//   latency     one publisher thread, one subscriber thread (busy-polling), one 64-byte tick
//               every --gap-us, open loop: each tick carries its *intended* send time, so a
//               late send counts against us (no coordinated omission). Figures are ONE-WAY:
//               the subscriber's Clock::now() minus that time (one host, one clock).
//               perftest's `ib_write_lat -s 64` reports t_typical = RTT/2 of a WRITE
//               ping-pong (each side polling memory): the table shows both and their ratio.
//   throughput  one publisher, 1 and 4 subscribers (block policy), --ticks ticks in batches of
//               --batch: ticks/s from the first publish to the last tick received by every
//               subscriber; next to `ib_write_bw -s 64`'s message rate (64-byte WRITEs, one
//               QP, one direction).
//   --snapshot  instead: the time a late joiner (start = snapshot, memory polling) takes to read
//               a publisher's last-value table of --snapshot-instruments instruments, every
//               entry filled (a quote, a trade and a status each), from its first poll to the
//               poll that ends its snapshot; next to perftest's `ib_read_lat -s 64` and
//               `ib_read_bw` reading the table's size, in the same rounds.
// Rounds alternate the contenders (perftest, memory polling, CQ polling) so that a drift of
// the host affects them alike. The device and address come from --device/--addr or
// TICKRAIL_RDMA_DEV/TICKRAIL_RDMA_ADDR (what scripts/rig sets: run it there with
// `scripts/rig --command 'apps/bench-rc/tickrail-bench-rc'`).
#include "cli.hpp"
#include <nlohmann/json.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <exception>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/histogram.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/tools/report.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using namespace std::chrono_literals;

namespace {

struct Options {
  std::string device;
  std::string addr;
  int rounds = 3;
  std::uint64_t samples = 10'000;  // latency samples per contender per round
  std::uint64_t warmup = 500;
  std::uint64_t gap_us = 100;
  std::uint64_t ticks = 50'000;    // throughput: ticks per run
  std::uint32_t batch = 64;
  bool split_commit = true;        // memory polling on devices that do not report in-order
  bool perftest = true;
  std::string json_path;
  bool snapshot = false;
  std::vector<std::uint32_t> snapshot_instruments{1000, 65536};
  int snapshots = 3;  // per table size per round
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// --- perftest ---

// Runs `cmd` through the shell; its output, or nullopt when it failed.
std::optional<std::string> run(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = ::pclose(p);
  if (status != 0) return std::nullopt;
  return out;
}

// Server in the background, client retried until the server listens (bounded): the client's
// output, or nullopt.
std::optional<std::string> perftest_pair(const std::string& tool, const std::string& args) {
  static int port = 18515 + (::getpid() % 1000);
  const std::string p = " -p " + std::to_string(++port) + " ";
  const pid_t server = ::fork();
  if (server == 0) {
    const std::string cmd = "exec " + tool + p + args + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::optional<std::string> out;
  for (int attempt = 0; attempt < 40 && !out; ++attempt) {
    std::this_thread::sleep_for(250ms);
    out = run("timeout 120 " + tool + p + args + " " + env("TICKRAIL_RDMA_ADDR_FOR_PERFTEST"));
  }
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  return out;
}

// The columns of perftest's result line for a message size.
std::optional<std::vector<double>> result_line(const std::string& out, std::uint64_t size = 64) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream cols(line);
    std::vector<std::string> c;
    for (std::string w; cols >> w;) c.push_back(w);
    if (c.size() >= 5 && c[0] == std::to_string(size) &&
        c[2].find_first_not_of("0123456789.") == std::string::npos) {
      std::vector<double> v;
      for (const auto& w : c) v.push_back(std::strtod(w.c_str(), nullptr));
      return v;
    }
  }
  return std::nullopt;
}

// --- tickrail ---

PublisherConfig pub_config(const Options& o, std::uint32_t capacity) {
  PublisherConfig c;
  c.transport = TransportKind::rc;
  c.channel = "bench-rc";
  c.ring_capacity = capacity;
  c.stamp_send_time = false;  // the latency run stamps the intended send time itself
  c.rdma.device = o.device;
  c.rdma.address = o.addr;
  c.rdma.port = 0;
  c.rdma.connect_timeout = 20s;
  return c;
}

SubscriberConfig sub_config(const Options& o, const Publisher& pub, RcPolling polling,
                            std::uint32_t capacity) {
  SubscriberConfig c;
  c.transport = TransportKind::rc;
  c.channel = pub.config().channel;
  c.ring_capacity = capacity;
  c.publisher_timeout = 10s;
  c.rdma.device = o.device;
  c.rdma.address = o.addr;
  c.rdma.port = pub.config().rdma.port;
  c.rdma.polling = polling;
  c.rdma.split_commit = o.split_commit;
  c.rdma.connect_timeout = 20s;
  return c;
}

// Connects `n` subscribers, each on a thread of its own that then runs `body(sub, i)`; this
// thread serves the publisher until all are active.
template <class Body>
std::vector<std::thread> start_subscribers(Publisher& pub, const SubscriberConfig& c, int n,
                                           Body body) {
  std::vector<std::thread> threads;
  auto connected = std::make_shared<std::atomic<int>>(0);
  // A subscriber that cannot connect (a bad setting for this device, say) ends the run with
  // its Error, not with std::terminate on its thread.
  auto failure = std::make_shared<std::exception_ptr>();
  auto failed = std::make_shared<std::atomic<bool>>(false);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&pub, c, i, connected, failure, failed, body] {
      (void)pub;
      std::optional<Subscriber> sub;
      try {
        sub.emplace(c);
      } catch (...) {
        if (!failed->exchange(true)) *failure = std::current_exception();
        return;
      }
      connected->fetch_add(1);
      body(*sub, i);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (pub.wait_subscribers(static_cast<std::uint32_t>(n), 10ms) < static_cast<std::uint32_t>(n)) {
    if (failed->load() || std::chrono::steady_clock::now() >= deadline) {
      for (auto& th : threads) th.join();  // one config for all: the others failed alike
      if (failed->load()) std::rethrow_exception(*failure);
      throw tickrail::Error(Errc::timed_out, "subscribers did not connect within 60 s");
    }
  }
  return threads;
}

Summary latency_round(const Options& o, RcPolling polling, Histogram& all) {
  const Clock& clk = Clock::instance();
  Publisher pub(pub_config(o, 4096));
  const SubscriberConfig c = sub_config(o, pub, polling, 4096);
  Histogram h;
  std::atomic<bool> done{false};
  const std::uint64_t total = o.warmup + o.samples;
  auto threads = start_subscribers(pub, c, 1, [&](Subscriber& sub, int) {
    std::uint64_t n = 0;
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    auto on_tick = [&](const Tick& t) {
      const std::uint64_t now = Clock::now();
      if (n++ >= o.warmup) h.record(static_cast<std::uint64_t>(clk.to_ns(now - t.send_ts)));
    };
    while (n < total && std::chrono::steady_clock::now() < deadline) {
      if (sub.poll(on_tick, 64) == 0) cpu_relax();
    }
    done.store(true, std::memory_order_release);
  });
  const std::uint64_t gap = clk.ns_to_cycles(static_cast<double>(o.gap_us) * 1000.0);
  const std::uint64_t start = Clock::now() + gap;
  Tick t{};
  t.kind = TickKind::Quote;
  for (std::uint64_t i = 0; i < total && !done.load(std::memory_order_acquire); ++i) {
    const std::uint64_t intended = start + i * gap;
    while (Clock::now() < intended) pub.service();
    t.send_ts = intended;  // a late send counts against us
    t.order_ref = i;
    while (pub.publish(t).status == PublishStatus::back_pressured) pub.service();
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
    pub.service();
  }
  for (auto& th : threads) th.join();
  all.merge(h);
  return summarize(h, total - o.warmup > h.count() ? total - o.warmup - h.count() : 0);
}

double throughput_run(const Options& o, RcPolling polling, int subscribers) {
  Publisher pub(pub_config(o, 16384));
  const SubscriberConfig c = sub_config(o, pub, polling, 16384);
  std::vector<std::uint64_t> last_at(static_cast<std::size_t>(subscribers), 0);
  std::atomic<int> finished{0};
  std::uint64_t first_seq = 0;
  std::atomic<std::uint64_t> end_seq{~std::uint64_t{0}};
  auto threads = start_subscribers(pub, c, subscribers, [&](Subscriber& sub, int i) {
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    auto none = [](const Tick&) {};
    // Spin, then yield, then sleep: on few cores the publisher and the others must run too.
    IdleStrategy idle(IdleKind::backoff, BackoffConfig{50, 5, 1'000, 100'000});
    while (std::chrono::steady_clock::now() < deadline) {
      const std::size_t n = sub.poll(none, 512);
      idle.idle(static_cast<int>(n));
      if (n == 0 && sub.next_sequence() >= end_seq.load(std::memory_order_acquire)) break;
    }
    last_at[static_cast<std::size_t>(i)] = Clock::now();
    finished.fetch_add(1);
  });
  first_seq = pub.next_sequence();
  end_seq.store(first_seq + o.ticks, std::memory_order_release);
  std::vector<Tick> buf(o.batch);
  const std::uint64_t t0 = Clock::now();
  std::uint64_t sent = 0;
  IdleStrategy idle(IdleKind::backoff, BackoffConfig{10, 5, 1'000, 100'000});
  while (sent < o.ticks) {
    const std::size_t n = std::min<std::uint64_t>(o.batch, o.ticks - sent);
    const PublishResult r = pub.publish(std::span<const Tick>(buf.data(), n));
    sent += r.published;
    idle.idle(r.published < n ? 0 : 1);  // back-pressured: let the subscribers run
  }
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (finished.load() < subscribers && std::chrono::steady_clock::now() < deadline) {
    pub.service();
    sched_yield();
  }
  for (auto& th : threads) th.join();
  const std::uint64_t t1 = *std::max_element(last_at.begin(), last_at.end());
  return static_cast<double>(o.ticks) / (Clock::instance().to_ns(t1 - t0) * 1e-9);
}

// One late joiner's snapshot of a table of `instruments`, every entry filled: seconds from its
// first poll to the poll that ended the snapshot, and the entries it delivered.
std::pair<double, std::uint64_t> snapshot_once(const Options& o, std::uint32_t instruments) {
  PublisherConfig pc = pub_config(o, 4096);
  pc.state.enabled = true;
  pc.state.capacity = instruments;
  Publisher pub(pc);
  std::vector<Tick> batch;
  for (std::uint32_t i = 0; i < instruments; ++i) {
    for (const TickKind k : {TickKind::Quote, TickKind::Trade, TickKind::Status}) {
      Tick t{};
      t.kind = k;
      t.instrument = i;
      batch.push_back(t);
    }
  }
  (void)pub.publish(batch);  // nobody subscribed yet: the table keeps them
  SubscriberConfig c = sub_config(o, pub, RcPolling::memory, 4096);
  c.start = StartMode::snapshot;
  std::atomic<bool> done{false};
  double seconds = 0;
  std::uint64_t entries = 0;
  auto threads = start_subscribers(pub, c, 1, [&](Subscriber& sub, int) {
    auto count = [&](const Tick& t) { entries += (t.flags & kTickFromTable) != 0; };
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    const std::uint64_t t0 = Clock::now();
    while (sub.in_snapshot() && std::chrono::steady_clock::now() < deadline) (void)sub.poll(count);
    seconds = Clock::instance().to_ns(Clock::now() - t0) * 1e-9;
    if (sub.in_snapshot() || sub.counters().table_abandoned != 0) seconds = -1;  // not delivered
    done.store(true, std::memory_order_release);
  });
  while (!done.load(std::memory_order_acquire)) {
    pub.service();
    std::this_thread::sleep_for(1ms);
  }
  for (auto& th : threads) th.join();
  return {seconds, entries};
}

// Rounds of: ib_read_lat, then for each table size ib_read_bw of its bytes and --snapshots
// snapshots of it.
void snapshot_rounds(const Options& o, nlohmann::json& out) {
  for (int r = 0; r < o.rounds; ++r) {
    nlohmann::json round;
    if (o.perftest) {
      const auto lat = perftest_pair("ib_read_lat", "-d " + o.device + " -s 64 -n 1000 -F");
      const auto v = lat ? result_line(*lat) : std::nullopt;
      round["ib_read_lat_t_typical_us"] = v && v->size() >= 5 ? (*v)[4] : -1.0;
      std::cout << "round " << r << ": ib_read_lat -s 64 t_typical " << round["ib_read_lat_t_typical_us"] << " us\n";
    }
    for (const std::uint32_t n : o.snapshot_instruments) {
      // The table's region: one line for table_next, then 3 entries of 64 bytes per instrument.
      const std::uint64_t bytes = 64 + std::uint64_t{n} * 3 * 64;
      nlohmann::json row;
      row["instruments"] = n;
      row["table_bytes"] = bytes;
      if (o.perftest) {
        const std::uint64_t iters = std::max<std::uint64_t>(5, (64ull << 20) / bytes);  // about 64 MiB
        const auto bw = perftest_pair("ib_read_bw", "-d " + o.device + " -s " + std::to_string(bytes) + " -n " +
                                                        std::to_string(iters) + " -F");
        const auto v = bw ? result_line(*bw, bytes) : std::nullopt;
        const double mbs = v && v->size() >= 4 ? (*v)[3] : -1.0;  // BW average, MB/s
        row["ib_read_bw_mb_per_s"] = mbs;
        // perftest's MB is 2^20 bytes: the time one READ of the table's bytes takes at that rate.
        row["ib_read_bw_table_s"] = mbs > 0 ? static_cast<double>(bytes) / (mbs * 1048576.0) : -1.0;
        std::cout << "round " << r << ": ib_read_bw -s " << bytes << ": " << mbs << " MB/s, the table's bytes in "
                  << row["ib_read_bw_table_s"].get<double>() * 1e3 << " ms\n";
      }
      for (int k = 0; k < o.snapshots; ++k) {
        const auto [seconds, entries] = snapshot_once(o, n);
        row["snapshot_s"].push_back(seconds);
        row["snapshot_entries"].push_back(entries);
        std::cout << "round " << r << ": snapshot of " << n << " instruments: " << entries << " entries in "
                  << seconds * 1e3 << " ms\n";
        std::cout.flush();
      }
      round["tables"].push_back(row);
    }
    out["snapshot_rounds"].push_back(round);
  }
}

// Parses the command line into `o`; an exit status when the program ends here (--help, a bad
// option, no address).
std::optional<int> parse_options(int argc, char** argv, Options& o) {
  o.device = env("TICKRAIL_RDMA_DEV");
  o.addr = env("TICKRAIL_RDMA_ADDR");
  cli::Cli command("tickrail-bench-rc", "tickrail-bench-rc: tickrail RC transport next to perftest, same device, same run");
  CLI::App& app = command.app();
  app.add_option("--device", o.device, "RDMA device (default TICKRAIL_RDMA_DEV)");
  app.add_option("--addr", o.addr, "address of the device's interface (default TICKRAIL_RDMA_ADDR)");
  app.add_option("--rounds", o.rounds, "latency rounds (contenders alternate)")->check(CLI::Range(1, 10000));
  app.add_option("--samples", o.samples, "latency samples per contender per round")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--gap-us", o.gap_us, "latency: microseconds between ticks")->check(CLI::Range(0, 1'000'000));
  app.add_option("--ticks", o.ticks, "throughput: ticks per run")->check(CLI::Range(1, 1'000'000'000));
  app.add_option("--batch", o.batch, "throughput: ticks per publish call")->check(CLI::Range(1, 4096));
  app.add_flag("!--no-split-commit", o.split_commit,
               "memory polling falls back to CQ polling where the device does not report "
               "in-order placement (default: keep memory polling, commit word in a 2nd WRITE)");
  app.add_flag("!--no-perftest", o.perftest, "skip perftest (ib_write_lat / ib_write_bw; with --snapshot, ib_read_lat / ib_read_bw)");
  app.add_option("--json", o.json_path, "also write the figures as JSON to this file");
  app.add_flag("--snapshot", o.snapshot,
               "instead: a late joiner's snapshot of a full last-value table, next to ib_read_lat / ib_read_bw");
  app.add_option("--snapshot-instruments", o.snapshot_instruments, "--snapshot: table sizes (default 1000 65536)")
      ->check(CLI::Range(1, 1048576));
  app.add_option("--snapshots", o.snapshots, "--snapshot: snapshots per table size per round")
      ->check(CLI::Range(1, 1000));
  if (const auto status = command.parse(argc, argv)) return *status;
  if (o.addr.empty()) {
    std::cerr << "tickrail-bench-rc: --addr (or TICKRAIL_RDMA_ADDR) is required\n";
    return cli::kExitUsage;
  }
  if (o.device.empty()) o.device = "rxe0";
  return std::nullopt;
}

// The latency rounds, contenders alternating, then their table and ratios to perftest.
void latency(const Options& o, nlohmann::json& out) {
  std::vector<double> perftest_typical;
  Histogram mem_all, cq_all;
  std::vector<TableRow> rows;
  for (int r = 0; r < o.rounds; ++r) {
    if (o.perftest) {
      const auto lat = perftest_pair("ib_write_lat", "-d " + o.device + " -s 64 -n " +
                                                         std::to_string(o.samples) + " -F");
      if (const auto v = lat ? result_line(*lat) : std::nullopt; v && v->size() >= 5) {
        perftest_typical.push_back((*v)[4]);
        std::cout << "round " << r << ": ib_write_lat t_typical " << (*v)[4] << " us\n";
      } else {
        std::cout << "round " << r << ": ib_write_lat failed\n" << lat.value_or("") << "\n";
      }
    }
    const Summary m = latency_round(o, RcPolling::memory, mem_all);
    std::cout << "round " << r << ": tickrail memory polling p50 " << m.p50_ns / 1000 << " us\n";
    const Summary q = latency_round(o, RcPolling::cq, cq_all);
    std::cout << "round " << r << ": tickrail CQ polling p50 " << q.p50_ns / 1000 << " us\n";
    std::cout.flush();
  }
  rows.push_back({"rc memory (one-way)", summarize(mem_all)});
  rows.push_back({"rc cq (one-way)", summarize(cq_all)});
  std::cout << "\nlatency, ns (" << o.rounds << " rounds x " << o.samples << " samples, one tick every "
            << o.gap_us << " us):\n"
            << format_table(rows);
  double perf_median = 0;
  if (!perftest_typical.empty()) {
    std::sort(perftest_typical.begin(), perftest_typical.end());
    perf_median = perftest_typical[perftest_typical.size() / 2];
    std::cout << "ib_write_lat -s 64 t_typical (RTT/2), median of rounds: " << perf_median
              << " us\n";
    for (const auto& row : rows) {
      std::cout << "  " << row.name << " p50 / t_typical = "
                << row.summary.p50_ns / 1000.0 / perf_median << "\n";
    }
  }
  out["latency"]["memory"] = to_json(rows[0].summary);
  out["latency"]["cq"] = to_json(rows[1].summary);
  out["latency"]["ib_write_lat_t_typical_us"] = perftest_typical;
}

// Throughput to 1 and 4 subscribers in each polling mode, then perftest's message rate.
void throughput(const Options& o, nlohmann::json& out) {
  std::cout << "\nthroughput, ticks/s (" << o.ticks << " ticks, batches of " << o.batch
            << ", block):\n";
  for (const RcPolling polling : {RcPolling::memory, RcPolling::cq}) {
    for (const int subs : {1, 4}) {
      const double rate = throughput_run(o, polling, subs);
      std::cout << "  rc " << to_string(polling) << " to " << subs << " subscriber(s): " << rate
                << "\n";
      out["throughput"][to_string(polling)][std::to_string(subs)] = rate;
    }
  }
  if (o.perftest) {
    const auto bw = perftest_pair("ib_write_bw", "-d " + o.device + " -s 64 -n " +
                                                     std::to_string(o.ticks) + " -F");
    if (const auto v = bw ? result_line(*bw) : std::nullopt; v && v->size() >= 5) {
      std::cout << "  ib_write_bw -s 64: " << (*v)[4] * 1e6 << " messages/s (" << (*v)[3]
                << " MB/s average)\n";
      out["throughput"]["ib_write_bw_msgs_per_s"] = (*v)[4] * 1e6;
    } else {
      std::cout << "  ib_write_bw failed\n" << bw.value_or("") << "\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto status = parse_options(argc, argv, o)) return *status;
  ::setenv("TICKRAIL_RDMA_ADDR_FOR_PERFTEST", o.addr.c_str(), 1);
  (void)Clock::instance();
  std::cout << "clock: " << Clock::instance().describe() << "\n";

  nlohmann::json out;
  out["device"] = o.device;
  out["latency_kind"] = "tickrail: one-way; ib_write_lat t_typical: RTT/2";
  try {
    if (o.snapshot) {
      snapshot_rounds(o, out);
    } else {
      latency(o, out);
      throughput(o, out);
    }
  } catch (const std::exception& e) {
    std::cerr << "tickrail-bench-rc: " << e.what() << "\n";
    return 1;
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(2) << "\n";
  std::cout << out.dump() << "\n";
  return 0;
}
