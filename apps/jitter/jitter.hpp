// The pieces of tickrail-jitter: its options, the Recorder that turns received ticks into
// histograms, the one-way measuring loop and the report. main.cpp is the command line.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tickrail/tools/config_file.hpp"
#include "tickrail/tools/histogram.hpp"
#include "tickrail/tools/report.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/failover.hpp"
#include "tickrail/state.hpp"
#include "tickrail/subscriber.hpp"
#include "tickrail/tick.hpp"

namespace tickrail::jitter {

enum class Mode : std::uint8_t {
  one_way,   // receive time minus Tick::send_ts: needs one clock for both (same host, TSC)
  pingpong,  // publish pings, the far end echoes them: RTT/2 on this end's clock (pingpong.hpp)
  echo,      // the far end of pingpong: publish every tick received back to its sender
};
[[nodiscard]] const char* to_string(Mode m) noexcept;
[[nodiscard]] Mode parse_mode(std::string_view s, std::string_view key = "mode");

struct Options {
  Mode mode = Mode::one_way;
  int cpu = -1;                            // pin the polling thread (-1: do not pin)
  std::chrono::milliseconds duration{0};   // stop after this long; 0: when the publisher ends
  std::uint64_t count = 0;                 // stop after this many ticks; 0: no limit
  std::uint32_t batch = 256;               // ticks per poll, at most
  bool live = true;                        // the once-a-second line
  bool lock_memory = false;                // mlockall before measuring
  std::string json, hgrm, svg;             // report files
  // pingpong and echo (pingpong.hpp)
  std::string echo_address;                // the echo end's address; empty: [rdma] address
  std::string echo_group;                  // UD: the echo stream's group; empty: first group + 1
  std::uint64_t warmup = 1000;             // pings not recorded, after the first echo
  std::chrono::milliseconds ping_timeout{1000};  // a ping unanswered this long is lost
  // The market's state (docs/state.md): the view the run ends with, as JSON.
  std::string state_out;
  std::uint32_t state_capacity = 65536;    // instruments the view holds
  // Hot failover (docs/failover.md): given line B, the run reads both lines as one stream
  // (FailoverSubscriber) and reports each line's share and lead. [failover] in the config.
  LineB line_b;
  FailoverConfig failover;  // window, hole_timeout, reattach_every; its lines are set by the run
};

// Reads the [jitter] section (keys: the fields above).
void read_options(ConfigFile::Section s, Options& o);
// A config file as tickrail-jitter reads it: the subscriber's sections, [jitter] and
// [failover]; a key or table no program reads is an error.
void read_file(ConfigFile& f, SubscriberConfig& sc, Options& o);
void validate(const Options& o);

// The figures one second of the run shows.
struct Window {
  double seconds = 0;
  std::uint64_t count = 0;
  std::uint64_t p50_ns = 0, p99_ns = 0, max_ns = 0;
  std::uint64_t lost = 0;  // sequence gaps in the window
};

// Records ticks and polls. Every call here is hot-path safe: no allocation, no system call.
class Recorder {
 public:
  explicit Recorder(double ns_per_cycle);

  // A tick received at `now` (clock cycles, Clock::now()).
  void on_tick(const Tick& t, std::uint64_t now) noexcept {
    const std::uint64_t lat = now >= t.send_ts ? now - t.send_ts : 0;
    if (now < t.send_ts) [[unlikely]] ++negative_;
    const std::uint64_t ns = to_ns(lat);
    latency_.record(ns);
    window_.record(ns);
    if (last_rx_ != 0) {
      interarrival_.record(to_ns(now >= last_rx_ ? now - last_rx_ : 0));
    }
    last_rx_ = now;
    if (next_seq_ == 0) [[unlikely]] {
      first_seq_ = t.seq;
    } else if (t.seq > next_seq_) [[unlikely]] {
      ++gaps_;
      lost_ += t.seq - next_seq_;
      window_lost_ += t.seq - next_seq_;
    } else if (t.seq < next_seq_) [[unlikely]] {
      ++out_of_order_;
    }
    if (t.seq >= next_seq_) next_seq_ = t.seq + 1;
  }

  // A tick from the publisher's last-value table (a snapshot or a conflation): not a latency
  // sample; the sequence it carries is the entry's, not the stream's.
  void on_table_tick(bool conflated) noexcept { ++(conflated ? conflated_ticks_ : snapshot_ticks_); }
  // When the snapshot was delivered (Subscriber::in_snapshot() turned false).
  void on_snapshot_end(std::uint64_t now) noexcept { snapshot_end_ = now; }
  [[nodiscard]] std::uint64_t snapshot_ticks() const noexcept { return snapshot_ticks_; }
  [[nodiscard]] std::uint64_t conflated_ticks() const noexcept { return conflated_ticks_; }
  [[nodiscard]] std::uint64_t snapshot_end() const noexcept { return snapshot_end_; }

  // The top of one turn of the polling loop, at `now`: the time since the previous turn is how
  // long this thread did not poll (the OS taking the core, an interrupt, a page fault...).
  void on_poll(std::uint64_t now) noexcept {
    if (last_poll_ != 0) {
      poll_gap_.record(to_ns(now >= last_poll_ ? now - last_poll_ : 0));
    }
    last_poll_ = now;
  }
  // Clock cycles to ns, saturating: a double at or above 2^64 has no uint64 value.
  [[nodiscard]] std::uint64_t to_ns(std::uint64_t cycles) const noexcept {
    const double ns = static_cast<double>(cycles) * ns_per_cycle_;
    return ns < 18446744073709549568.0 ? static_cast<std::uint64_t>(ns) : ~std::uint64_t{0};
  }
  // Forget the previous turn (after work the loop did on purpose, such as printing a line).
  void skip_poll_gap() noexcept { last_poll_ = 0; }

  // The window since the previous call, then starts a new one.
  Window take_window(double seconds) noexcept;

  [[nodiscard]] const Histogram& latency() const noexcept { return latency_; }
  [[nodiscard]] const Histogram& interarrival() const noexcept { return interarrival_; }
  [[nodiscard]] const Histogram& poll_gap() const noexcept { return poll_gap_; }
  [[nodiscard]] std::uint64_t received() const noexcept { return latency_.count(); }
  [[nodiscard]] std::uint64_t first_seq() const noexcept { return first_seq_; }
  [[nodiscard]] std::uint64_t last_seq() const noexcept { return next_seq_ == 0 ? 0 : next_seq_ - 1; }
  [[nodiscard]] std::uint64_t gaps() const noexcept { return gaps_; }
  [[nodiscard]] std::uint64_t lost() const noexcept { return lost_; }  // ticks in the gaps
  [[nodiscard]] std::uint64_t out_of_order() const noexcept { return out_of_order_; }
  [[nodiscard]] std::uint64_t negative() const noexcept { return negative_; }

 private:
  double ns_per_cycle_;
  Histogram latency_;
  Histogram interarrival_;
  Histogram poll_gap_;
  Histogram window_;
  std::uint64_t last_rx_ = 0;
  std::uint64_t last_poll_ = 0;
  std::uint64_t next_seq_ = 0;  // 0: nothing received yet
  std::uint64_t first_seq_ = 0;
  std::uint64_t gaps_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t window_lost_ = 0;
  std::uint64_t out_of_order_ = 0;
  std::uint64_t negative_ = 0;
  std::uint64_t snapshot_ticks_ = 0;
  std::uint64_t conflated_ticks_ = 0;
  std::uint64_t snapshot_end_ = 0;  // when the snapshot's last tick arrived (cycles); 0: none
};

// "tickrail-jitter: <s>" on stderr, and the once-a-second live line (one system call).
void note(const std::string& s);
void live_line(const Window& w, std::uint64_t total);

// The one-second windows of a run: each closed with the subscriber's own lost count (which also
// holds ticks lapped before the first receipt), and shown as a live line with --live.
class LiveWindows {
 public:
  LiveWindows(std::uint64_t start, std::uint64_t second)
      : second_(second), next_(start + second), last_(start) {}
  [[nodiscard]] bool due(std::uint64_t now) const noexcept { return now >= next_; }
  void close(std::uint64_t now, Recorder& rec, std::uint64_t lost_now, bool live) {
    Window w = rec.take_window(Clock::instance().to_ns(now - last_) * 1e-9);
    w.lost = std::max(w.lost, lost_now - lost_seen_);
    lost_seen_ = lost_now;
    if (live && rec.received() != 0) live_line(w, rec.received());
    last_ = now;
    next_ = now + second_;
    rec.skip_poll_gap();  // the line was our doing, not the OS's
  }

 private:
  std::uint64_t second_;
  std::uint64_t next_;
  std::uint64_t last_;
  std::uint64_t lost_seen_ = 0;
};

// What ended the run, and the context the report prints.
struct RunInfo {
  std::string ended;          // "publisher_gone", "duration", "count", "interrupted", "evicted"
  std::string reason;         // the subscriber's reason() when gone or evicted
  std::string transport, channel, clock;
  double elapsed_s = 0;
  SubscriberCounters counters;  // the Subscriber's own (lost, laps; UD gaps and recovery; RDMA errors)
  std::uint64_t position = 0;   // the Subscriber's next sequence at the end
  int cpu = -1;
  std::vector<std::string> warnings;
  Mode mode = Mode::one_way;
  std::uint64_t timeouts = 0;  // pingpong: pings never answered within ping_timeout
  bool snapshot = false;         // started with start = snapshot
  bool snapshot_complete = false;  // ...and the whole table was delivered (not cut short, not given up)
  bool snapshot_given_up = false;  // ...given up after publisher_timeout without progress
  double snapshot_us = 0;        // from the first poll to the snapshot's last tick
  // Failover runs: both lines' counters, what each line is, and by how much (ns) each line's
  // copy came before the other's, for the ticks both lines brought within the window.
  bool failover = false;
  FailoverCounters lines;
  std::string line_name[2];
  std::uint32_t window = 0;
  Histogram lead[2];
};

// What the subscriber lost, told apart. `total` is the Subscriber's own count (one-way), which
// also holds ticks lapped before the first receipt: received + total = the ticks published from
// `start_seq` (the first sequence it was served) up to its position. `between` is what the
// sequence gaps between two receipts hold (the Recorder's count), `before_first` what was lost
// before the first receipt, `after_last` after the last one. In ping-pong, unanswered pings.
struct Loss {
  std::uint64_t total = 0;
  std::uint64_t between = 0;
  std::uint64_t before_first = 0;
  std::uint64_t after_last = 0;
  std::uint64_t start_seq = 0;
};
[[nodiscard]] Loss loss(const Recorder& r, const RunInfo& info) noexcept;

// The end-of-run table (one-way latency, inter-arrival, poll gap) with its heading, and the JSON
// object (count, lost, min_ns ... max_ns of the latency, plus interarrival, poll_gap and the run).
[[nodiscard]] std::string format_report(const Recorder& r, const RunInfo& info);
[[nodiscard]] nlohmann::json report_json(const Recorder& r, const RunInfo& info);

// The whole run in o.mode (pin and lock as asked, measure, print the report and write its
// files); the exit status (cli.hpp). Ends on the publisher's end, --duration, --count or a stop
// signal (installed before the attach: a stop while waiting for the channel ends it too).
[[nodiscard]] int run(const Options& o, const SubscriberConfig& sc);

// One-way: attaches (waiting attach_timeout), then records receive time minus the publisher's
// send stamp, one clock, until the run ends; info says how.
void measure_one_way(const SubscriberConfig& sc, const Options& o, Recorder& rec, RunInfo& info);

// The two lines of a failover run: line A is `sc`, line B `sc` changed by o.line_b (throws
// Error(config_error) for a line B option its transport does not use).
[[nodiscard]] FailoverConfig failover_config(const Options& o, const SubscriberConfig& sc);
// One-way over two lines (o.line_b): the same, through a FailoverSubscriber (failover.cpp).
void measure_failover(const SubscriberConfig& sc, const Options& o, Recorder& rec, RunInfo& info);

// The failover lines' part of the report: a line per line, and the lead table.
[[nodiscard]] std::string format_lines(const RunInfo& info);
[[nodiscard]] nlohmann::json lines_json(const RunInfo& info);

// --state-out: the view's JSON into `path`, and a warning in `info` for ticks beyond its capacity.
void write_state(const MarketView& view, RunInfo& info, const std::string& path);

// The view's JSON (--state-out): per instrument with any, its latest quote, trade and status
// with their sequence numbers; two subscribers' views compare with diff.
[[nodiscard]] nlohmann::json state_json(const MarketView& v, std::uint64_t position);

}  // namespace tickrail::jitter
