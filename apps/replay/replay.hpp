// The pieces of tickrail-replay: its options, the input it opens, the paced publishing loop and
// the summary. main.cpp only wires them to the command line; tests drive them directly.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tickrail/tools/config_file.hpp"
#include "tickrail/tools/feed/open_source.hpp"
#include "tickrail/tools/feed/order_book.hpp"
#include "tickrail/tools/feed/synthetic.hpp"
#include "tickrail/tools/feed/tick_source.hpp"
#include "tickrail/tools/histogram.hpp"
#include "tickrail/publisher.hpp"

namespace tickrail::replay {

enum class Pacing : std::uint8_t {
  feed,  // the feed's own timestamps (Tick::exch_ts), divided by `speed`
  rate,  // a fixed rate of `rate` ticks per second
  max,   // as fast as the publisher accepts
};
[[nodiscard]] const char* to_string(Pacing p) noexcept;
[[nodiscard]] Pacing parse_pacing(std::string_view s, std::string_view key = "pacing");
// What feed pacing follows: the ticks' exchange timestamps, or (recordings) the send stamps
// their publisher put on them when they were recorded.
enum class PaceBy : std::uint8_t { exchange, send };
[[nodiscard]] const char* to_string(PaceBy p) noexcept;
[[nodiscard]] PaceBy parse_pace_by(std::string_view s, std::string_view key = "pace_by");
[[nodiscard]] feed::InputFormat parse_format(std::string_view s, std::string_view key = "format");
// A duration with its unit: "10ms", "1.5s", "500us", "250ns", "2m", "1h"; "0" alone is none.
// Throws Error(config_error) naming `key`.
[[nodiscard]] std::chrono::nanoseconds parse_duration(std::string_view s,
                                                      std::string_view key = "duration");
// "2h13m", "4m05s", "12.5s", "300 ms": a wait, for people.
[[nodiscard]] std::string duration_text(std::uint64_t ns);
// A feed timestamp: the time of day for ITCH's nanoseconds since midnight ("09:30:00.000"),
// else the nanoseconds.
[[nodiscard]] std::string feed_time_text(std::uint64_t exch_ts);

// Feed pacing as a pure function of the schedule: each tick is due `elapsed(exch_ts)` feed
// nanoseconds after the first one, where any gap between consecutive timestamps longer than
// `max_gap` counts as `max_gap` (0: gaps are kept). A timestamp that steps back counts as no time.
class FeedSchedule {
 public:
  explicit FeedSchedule(std::uint64_t max_gap_ns = 0) noexcept : max_gap_(max_gap_ns) {}
  [[nodiscard]] std::uint64_t elapsed(std::uint64_t exch_ts) noexcept {
    if (!started_) {
      started_ = true;
      last_ = exch_ts;
      return 0;
    }
    std::uint64_t dt = exch_ts > last_ ? exch_ts - last_ : 0;
    if (max_gap_ != 0 && dt > max_gap_) dt = max_gap_;
    if (exch_ts > last_) last_ = exch_ts;
    elapsed_ += dt;
    return elapsed_;
  }

 private:
  std::uint64_t max_gap_;
  std::uint64_t last_ = 0;
  std::uint64_t elapsed_ = 0;
  bool started_ = false;
};

// How the replay waits `remaining_ns` for a tick's send time: it sleeps, in steps short enough
// that a stop request is seen within kMaxSleepNs, and spins only the last kSpinNs (a sleep wakes
// up tens of microseconds late). Returns the nanoseconds to sleep now; 0: spin (or send).
inline constexpr std::uint64_t kSpinNs = 50'000;
inline constexpr std::uint64_t kMaxSleepNs = 100'000'000;
[[nodiscard]] constexpr std::uint64_t sleep_before(std::uint64_t remaining_ns) noexcept {
  if (remaining_ns <= kSpinNs) return 0;
  const std::uint64_t s = remaining_ns - kSpinNs;
  return s < kMaxSleepNs ? s : kMaxSleepNs;
}

// The generator with the replay's defaults: 5 million ticks (5 s at its 1 us mean gap).
[[nodiscard]] feed::SyntheticConfig default_synthetic();

struct Options {
  // Input: a file (ITCH 5.0 BinaryFILE plain or gzip, pcap/pcapng of MoldUDP64, CSV of ticks),
  // or the synthetic generator when empty.
  std::string input;
  feed::InputFormat format = feed::InputFormat::automatic;
  bool skip_bad = false;        // count bad input and go on
  bool status_ticks = true;     // ITCH non-order messages become Status ticks
  std::uint16_t udp_port = 0;   // pcap: MoldUDP64 destination port, 0 = any
  record::Range range{};        // recordings: the ticks replayed (sequence numbers, exch_ts)
  // Synthetic feed.
  feed::SyntheticConfig synthetic = default_synthetic();
  // Pacing.
  Pacing pacing = Pacing::feed;
  double speed = 1.0;  // feed pacing: 2.0 replays twice as fast as the feed's clock
  PaceBy pace_by = PaceBy::exchange;  // feed pacing: by exch_ts, or by send_ts (recordings)
  double rate = 1e6;   // rate pacing: ticks per second
  std::chrono::nanoseconds max_gap{0};    // feed pacing: longer gaps in the feed shrink to this
  std::chrono::milliseconds duration{0};  // stop after this long; 0: at the end of the input
  // Top of book: publish Quote ticks for best bid/ask changes instead of the order messages.
  bool book = false;
  std::size_t book_orders = 1 << 20;  // expected live orders (the book's hash table size)
  // Publishing.
  std::uint32_t batch = 256;            // ticks read, and at most published, per call
  std::uint32_t wait_subscribers = 1;   // before starting, wait for this many subscribers...
  std::chrono::milliseconds wait_timeout{3000};  // ...at most this long (then start anyway)
  std::chrono::milliseconds drain_timeout{2000};  // at the end, wait for subscribers to catch up
  int cpu = -1;                         // pin the publishing thread (-1: do not pin)
  std::string json;                     // write the summary as JSON here
};

// Reads the [replay] section (keys: the fields above; synthetic_* for the generator).
void read_options(ConfigFile::Section s, Options& o);
// A config file as tickrail-replay reads it: the publisher's sections and [replay]; a key or
// table no program reads is an error.
void read_file(ConfigFile& f, PublisherConfig& pc, Options& o);
void validate(const Options& o);  // throws Error(config_error) naming the key

// The source of ticks for `o`: the file, or the synthetic generator.
[[nodiscard]] std::unique_ptr<feed::TickSource> open_input(const Options& o);

struct Stats {
  std::uint64_t ticks_read = 0;          // ticks from the source
  std::uint64_t by_kind[16] = {};        // ticks read, by TickKind
  std::uint64_t offered = 0;             // ticks handed to publish(): read, or quotes (--book)
  std::uint64_t back_pressure_waits = 0; // publish calls that had to be retried
  std::uint64_t abandoned = 0;           // ticks never published: the run ended while held back
  double elapsed_s = 0;
  bool stopped = false;                  // stopped by request or by the duration
  Histogram lag_ns{1, 3'600'000'000'000, 3};  // how late each tick left vs its schedule (paced)
};

struct ProgressLine {
  double msgs_per_s = 0;
  double percent = -1;  // of the input; -1 when unknown (endless synthetic)
  std::uint64_t lag_p99_ns = 0, lag_max_ns = 0;  // over the interval
  std::uint64_t published = 0;
  // Waiting for a tick whose send time is far off (a gap in the feed): how long still, and the
  // tick's feed timestamp. 0: not waiting.
  std::uint64_t wait_ns = 0;
  std::uint64_t wait_feed_ts = 0;
};
// The progress line as the terminal shows it (no line ending).
[[nodiscard]] std::string progress_text(const ProgressLine& p);

// The order book --book asks for (null without it). Its table is touched page by page when
// made: make it before the publisher exists, which serves no subscriber meanwhile.
[[nodiscard]] std::unique_ptr<feed::OrderBook> make_book(const Options& o);

// The publishing loop: reads the source in batches, applies the book, paces open-loop (each
// tick's intended send time comes from the schedule, never from when the previous one left, so a
// stall shows as lag instead of stretching the run), publishes, retries back-pressured ticks.
class Replayer {
 public:
  // `book`: one from make_book(o), or null to have one made here when o.book.
  Replayer(const Options& o, feed::TickSource& source, Publisher& pub,
           std::unique_ptr<feed::OrderBook> book = nullptr);

  // Runs to the end of the input, the duration, or `stop`. Bad input throws (tick_source.hpp),
  // with stats() holding what was done before. `progress` (may be empty) is called about twice a
  // second from this thread.
  void run(const std::atomic<bool>* stop = nullptr,
           const std::function<void(const ProgressLine&)>& progress = {});

  [[nodiscard]] const Stats& stats() const noexcept { return stats_; }
  [[nodiscard]] const feed::OrderBook* book() const noexcept { return book_.get(); }

 private:
  // Publishes out_[0, pending_), retrying back-pressured ticks; false when the stop request or
  // the duration ended the run while it was held back.
  bool publish_pending();
  // Waits until clock time `due` for the tick of feed time `feed_ts`: sleeps, serving the
  // publisher, then spins the last microseconds. Calls control() at least every kMaxSleepNs and
  // every 1024 spins; false when it says the run must end.
  bool wait_until(std::uint64_t due, std::uint64_t feed_ts);
  // Stop request, duration and progress line: every batch and while waiting for a tick's
  // time. False when the run must end.
  bool control(std::uint64_t now);
  void report_progress(std::uint64_t now);
  // Pacing max without a book: the batch as read; false when the run must end.
  bool publish_as_read(std::size_t n);
  // One tick read: counted, through the book, paced, queued; false when the run must end.
  bool take(const Tick& t);
  std::uint64_t due_time(std::uint64_t feed_elapsed);

  Options o_;
  feed::TickSource& src_;
  Publisher& pub_;
  std::unique_ptr<feed::OrderBook> book_;
  Stats stats_;
  std::vector<Tick> in_, out_;
  std::vector<std::uint64_t> due_;  // intended send time of each out_ tick (clock cycles)
  std::size_t pending_ = 0;         // ticks in out_ not yet published
  const std::atomic<bool>* stop_ = nullptr;
  std::uint64_t end_ = ~std::uint64_t{0};  // clock cycles at which the duration runs out
  Histogram window_lag_{1, 3'600'000'000'000, 2};  // lag since the last progress line
  std::uint64_t waiting_until_ = 0;  // clock cycles: the send time being waited for (0: none)
  std::uint64_t waiting_ts_ = 0;     // its tick's feed timestamp
  bool announce_wait_ = false;       // a long wait began: show it on the progress line now
  // The run's clock and pacing (clock cycles), set by run().
  const std::function<void(const ProgressLine&)>* progress_ = nullptr;
  std::uint64_t start_ = 0;
  std::uint64_t next_progress_ = 0, last_progress_ = 0;
  std::uint64_t last_read_ = 0;  // ticks_read at the last progress line
  double feed_factor_ = 0;       // clock cycles per feed nanosecond (pacing feed)
  double send_ns_per_cycle_ = 0; // pace_by send: the recording host's clock, ns per cycle
  double rate_period_ = 0;       // clock cycles from one tick to the next (pacing rate)
  FeedSchedule schedule_;
  std::uint64_t last_due_ = 0;
  std::uint64_t index_ = 0;  // ticks scheduled so far (pacing rate)
};

// The end-of-run report: input and messages by type, ticks published, back-pressure events,
// pacing lag, subscribers, and with a book each instrument's live orders and best bid/ask.
struct Report {
  std::string text;
  nlohmann::json json;
};
[[nodiscard]] Report make_report(const Options& o, const feed::TickSource& src,
                                 const Replayer& r, const Publisher& pub,
                                 const std::vector<SubscriberStatus>& subscribers);

}  // namespace tickrail::replay
