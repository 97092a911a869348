// tickrail-bench-feed: how fast the feed layer turns ITCH bytes into ticks, on one core.
//
// Generates N ITCH 5.0 messages in memory from the synthetic order flow (BinaryFILE framing),
// then times, best and median of several runs: decoding to ticks in batches (ItchFileReader over
// the bytes in memory), decoding plus order book, and the synthetic generator itself. With
// --file PATH it also writes the bytes to PATH and times the memory-mapped file path. Rates are
// given by wall clock and by the thread's CPU time (the latter is what the code costs when other
// work shares the core; both are single-threaded).
//
//   tickrail-bench-feed [--messages N] [--runs R] [--batch B] [--file PATH]
//                       [--instruments I] [--depth D]   (synthetic flow: book size)
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/itch_writer.hpp"
#include "tickrail/tools/feed/order_book.hpp"
#include "tickrail/tools/feed/synthetic.hpp"

using namespace tickrail;
using namespace tickrail::feed;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double best = 0;      // wall clock
  double median = 0;
  double cpu_best = 0;  // this thread's CPU time: what the code costs when the core is shared
  double cpu_median = 0;
};

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Runs `body` (which returns messages processed) `runs` times, each after an untimed `setup`;
// rates in messages per second.
Result measure(int runs, const std::function<std::uint64_t()>& body,
               const std::function<void()>& setup = [] {}) {
  std::vector<double> wall;
  std::vector<double> cpu;
  for (int r = 0; r < runs; ++r) {
    setup();
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    const std::uint64_t n = body();
    const double c1 = thread_cpu_seconds();
    const std::chrono::duration<double> dt = Clock::now() - t0;
    wall.push_back(static_cast<double>(n) / dt.count());
    cpu.push_back(static_cast<double>(n) / (c1 - c0));
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall.back(), wall[wall.size() / 2], cpu.back(), cpu[cpu.size() / 2]};
}

void print(const char* what, const Result& r) {
  std::printf("%-32s wall: %7.2f best %7.2f median | cpu: %7.2f best %7.2f median M msgs/s"
              " (%.1f ns/msg cpu median)\n",
              what, r.best / 1e6, r.median / 1e6, r.cpu_best / 1e6, r.cpu_median / 1e6,
              1e9 / r.cpu_median);
}

volatile std::uint64_t g_sink;  // keeps the decoded ticks observable

struct Options {
  std::uint64_t messages = 20'000'000;
  int runs = 5;
  std::size_t batch = 1024;
  std::string file;
  std::uint32_t instruments = 64;
  std::uint32_t depth = 64;
};

SyntheticConfig flow_config(const Options& o) {
  SyntheticConfig cfg;
  cfg.instruments = o.instruments;
  cfg.depth = o.depth;
  cfg.max_orders = 2 * o.depth;
  cfg.seed = 2024;
  return cfg;
}

// The input: a directory spin, then the synthetic order flow encoded as ITCH, into `w`.
void write_input(const Options& o, const SyntheticConfig& cfg, ItchWriter& w, std::vector<Tick>& buf) {
  w.system_event(0, 'O');
  for (std::uint32_t i = 1; i <= o.instruments; ++i) {
    w.stock_directory(static_cast<std::uint16_t>(i), 0, "SYM" + std::to_string(i));
  }
  SyntheticFeed gen(cfg);
  while (w.messages() < o.messages) {
    const std::size_t n = gen.read(std::span<Tick>(buf).first(std::min<std::uint64_t>(o.batch, o.messages - w.messages())));
    for (std::size_t k = 0; k < n; ++k) (void)w.append(buf[k], "SYM");
  }
  const std::span<const std::uint8_t> bytes = w.span();
  std::printf("input: %llu ITCH messages, %.1f MB in memory (%.1f bytes/msg with framing), "
              "%u instruments, %zu live orders at the end; batch %zu ticks, %d runs\n",
              static_cast<unsigned long long>(w.messages()), static_cast<double>(bytes.size()) / 1e6,
              static_cast<double>(bytes.size()) / static_cast<double>(w.messages()), o.instruments,
              gen.live_orders(), o.batch, o.runs);
}

// Decoding to ticks from memory and, with --file, from the mapped file.
void time_decoding(const Options& o, std::span<const std::uint8_t> bytes, std::vector<Tick>& buf) {
  const auto decode = [&](ItchFileReader& r) {
    std::uint64_t n = 0;
    std::uint64_t sum = 0;
    while (const std::size_t k = r.read(buf)) {
      n += k;
      sum += buf[k - 1].order_ref;
    }
    g_sink = sum;
    return n;
  };
  print("decode ITCH -> ticks (memory)", measure(o.runs, [&] {
          ItchFileReader r(bytes, "bench");
          return decode(r);
        }));
  if (!o.file.empty()) {
    std::ofstream(o.file, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    print("decode ITCH -> ticks (mmap file)", measure(o.runs, [&] {
            ItchFileReader r(o.file);
            return decode(r);
          }));
  }
}

// Decoding plus the order book, with a large and a small table.
void time_order_book(const Options& o, std::span<const std::uint8_t> bytes, std::vector<Tick>& buf) {
  std::vector<Tick> quote_buf(o.batch);
  // The book is built (and emptied) outside the timed region: its table is touched up front.
  for (const std::size_t reserve : {std::size_t{1} << 20, std::size_t{1} << 16}) {
    OrderBook book(BookConfig{.expected_orders = reserve});
    const std::string what = "decode + order book (" + std::to_string(reserve >> 10) + "K)";
    print(what.c_str(), measure(o.runs, [&] {
            ItchFileReader r(bytes, "bench");
            std::uint64_t n = 0;
            std::uint64_t quotes = 0;
            while (const std::size_t k = r.read(buf)) {
              n += k;
              quotes += book.apply(std::span<const Tick>(buf.data(), k), quote_buf);
            }
            g_sink = quotes;
            return n;
          }, [&] { book.clear(); }));
  }
}

void time_generator(const Options& o, const SyntheticConfig& cfg, std::vector<Tick>& buf) {
  print("synthetic generator", measure(o.runs, [&] {
          SyntheticConfig c = cfg;
          c.limit = o.messages;
          SyntheticFeed f(c);
          std::uint64_t n = 0;
          while (const std::size_t k = f.read(buf)) n += k;
          g_sink = n;
          return n;
        }));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  cli::Cli command("tickrail-bench-feed",
                   "tickrail-bench-feed: how fast the feed layer turns ITCH bytes into ticks, on one core");
  CLI::App& app = command.app();
  app.add_option("--messages", o.messages, "ITCH messages generated (default 20000000)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
  app.add_option("--runs", o.runs, "timed runs of each case (default 5)")->check(CLI::Range(1, 1000));
  app.add_option("--batch", o.batch, "ticks per read (default 1024)")->check(CLI::Range(1, 1'000'000));
  app.add_option("--file", o.file, "also write the bytes to this file and time the mapped file path");
  app.add_option("--instruments", o.instruments, "synthetic flow: instruments (default 64)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--depth", o.depth, "synthetic flow: book depth (default 64)")->check(CLI::Range(1, 100'000));
  if (const auto status = command.parse(argc, argv)) return *status;

  const SyntheticConfig cfg = flow_config(o);
  ItchWriter w(o.messages * 36);
  std::vector<Tick> buf(o.batch);
  write_input(o, cfg, w, buf);
  time_decoding(o, w.span(), buf);
  time_order_book(o, w.span(), buf);
  time_generator(o, cfg, buf);
  return 0;
}
