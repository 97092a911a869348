#include "replay.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <cinttypes>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <thread>

#include "tickrail/clock.hpp"
#include "cli.hpp"
#include "text.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/csv_reader.hpp"
#include "tickrail/tools/feed/itch.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/pcap_reader.hpp"
#include "tickrail/tools/record/recording.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/tools/report.hpp"

namespace tickrail::replay {

const char* to_string(Pacing p) noexcept {
  switch (p) {
    case Pacing::feed: return "feed";
    case Pacing::rate: return "rate";
    case Pacing::max: return "max";
  }
  return "unknown";
}

Pacing parse_pacing(std::string_view s, std::string_view key) {
  if (s == "feed") return Pacing::feed;
  if (s == "rate") return Pacing::rate;
  if (s == "max") return Pacing::max;
  cli::bad_value(key, "unknown pacing '" + std::string(s) + "' (expected feed, rate or max)");
}

const char* to_string(PaceBy p) noexcept { return p == PaceBy::send ? "send" : "exchange"; }

PaceBy parse_pace_by(std::string_view s, std::string_view key) {
  if (s == "exchange") return PaceBy::exchange;
  if (s == "send") return PaceBy::send;
  cli::bad_value(key, "unknown pace '" + std::string(s) + "' (expected exchange or send)");
}

feed::InputFormat parse_format(std::string_view s, std::string_view key) {
  if (s == "auto" || s == "automatic") return feed::InputFormat::automatic;
  if (s == "itch") return feed::InputFormat::itch;
  if (s == "pcap") return feed::InputFormat::pcap;
  if (s == "csv") return feed::InputFormat::csv;
  if (s == "recording") return feed::InputFormat::recording;
  cli::bad_value(key, "unknown format '" + std::string(s) + "' (expected auto, itch, pcap, csv or recording)");
}

std::chrono::nanoseconds parse_duration(std::string_view s, std::string_view key) {
  const std::string text(s);
  std::size_t unit = 0;
  while (unit < s.size() && ((s[unit] >= '0' && s[unit] <= '9') || s[unit] == '.')) ++unit;
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + unit, v);
  if (unit == 0 || ec != std::errc() || p != s.data() + unit) {
    cli::bad_value(key, "'" + text + "' is not a duration (a number and a unit: 10ms, 1.5s, 500us, 2m, 1h)");
  }
  const std::string_view u = s.substr(unit);
  double scale = 0;
  if (u == "ns") scale = 1;
  else if (u == "us") scale = 1e3;
  else if (u == "ms") scale = 1e6;
  else if (u == "s") scale = 1e9;
  else if (u == "m" || u == "min") scale = 60e9;
  else if (u == "h") scale = 3600e9;
  else if (u.empty() && v == 0) scale = 1;
  if (scale == 0) {
    cli::bad_value(key, "'" + text + "' has no unit (ns, us, ms, s, m or h)");
  }
  const double ns = v * scale;
  if (!std::isfinite(ns) || ns > 1e18) cli::bad_value(key, "'" + text + "' is longer than 31 years");
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

std::string duration_text(std::uint64_t ns) {
  char buf[64];
  const std::uint64_t s = ns / 1'000'000'000;
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lluh%02llum", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%llum%02llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  } else if (ns >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ns) * 1e-9);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f ms", static_cast<double>(ns) * 1e-6);
  }
  return buf;
}

std::string feed_time_text(std::uint64_t ts) {
  constexpr std::uint64_t kDay = 86'400'000'000'000;
  char buf[48];
  if (ts >= kDay) {
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ts));
  } else {
    const std::uint64_t ms = ts / 1'000'000;
    std::snprintf(buf, sizeof buf, "%02llu:%02llu:%02llu.%03llu",
                  static_cast<unsigned long long>(ms / 3'600'000),
                  static_cast<unsigned long long>(ms / 60'000 % 60),
                  static_cast<unsigned long long>(ms / 1000 % 60),
                  static_cast<unsigned long long>(ms % 1000));
  }
  return buf;
}

std::string progress_text(const ProgressLine& p) {
  char buf[256];
  char pct[32] = "";
  if (p.percent >= 0) std::snprintf(pct, sizeof pct, "%5.1f%%  ", p.percent);
  if (p.wait_ns != 0) {
    std::snprintf(buf, sizeof buf,
                  "  %swaiting %s for feed time %s (gap in the feed); --max-gap to compress  "
                  "published %llu",
                  pct, duration_text(p.wait_ns).c_str(), feed_time_text(p.wait_feed_ts).c_str(),
                  static_cast<unsigned long long>(p.published));
  } else {
    std::snprintf(buf, sizeof buf,
                  "  %s%8.3f M msgs/s  lag p99 %9.1f us  max %9.1f us  published %llu", pct,
                  p.msgs_per_s / 1e6, static_cast<double>(p.lag_p99_ns) / 1e3,
                  static_cast<double>(p.lag_max_ns) / 1e3,
                  static_cast<unsigned long long>(p.published));
  }
  return buf;
}

feed::SyntheticConfig default_synthetic() {
  feed::SyntheticConfig c;
  c.limit = 5'000'000;
  return c;
}

void read_options(ConfigFile::Section s, Options& o) {
  s.get("input", o.input);
  s.get_enum("format", o.format, parse_format);
  s.get("skip_bad", o.skip_bad);
  s.get("status_ticks", o.status_ticks);
  s.get("udp_port", o.udp_port);
  s.get("count", o.synthetic.limit);
  s.get("seed", o.synthetic.seed);
  s.get("instruments", o.synthetic.instruments);
  s.get("gap_ns", o.synthetic.gap_ns);
  s.get("burst_every", o.synthetic.burst_every);
  s.get("burst_length", o.synthetic.burst_length);
  s.get("burst_gap_ns", o.synthetic.burst_gap_ns);
  s.get_enum("pacing", o.pacing, parse_pacing);
  s.get("speed", o.speed);
  s.get_enum("pace_by", o.pace_by, parse_pace_by);
  s.get("from_seq", o.range.from_seq);
  s.get("to_seq", o.range.to_seq);
  s.get("from_time", o.range.from_time);
  s.get("to_time", o.range.to_time);
  s.get("rate", o.rate);
  s.get_enum("max_gap", o.max_gap, parse_duration);
  s.get("duration_ms", o.duration);
  s.get("book", o.book);
  s.get("book_orders", o.book_orders);
  s.get("batch", o.batch);
  s.get("wait_subscribers", o.wait_subscribers);
  s.get("wait_timeout_ms", o.wait_timeout);
  s.get("drain_timeout_ms", o.drain_timeout);
  s.get("cpu", o.cpu);
  s.get("json", o.json);
  s.validated([&] { validate(o); });
}

void read_file(ConfigFile& f, PublisherConfig& pc, Options& o) {
  read_publisher_config(f, pc);
  read_options(f.section("replay"), o);
  f.check_all_read({"subscriber", "jitter", "record", "failover"});
}

void validate(const Options& o) {
  if (!(o.speed > 0) || !std::isfinite(o.speed)) cli::bad_value("speed", "must be a positive number");
  if (!(o.rate > 0) || !std::isfinite(o.rate)) cli::bad_value("rate", "must be a positive number");
  if (o.max_gap.count() < 0) cli::bad_value("max_gap", "must not be negative");
  validate_duration("max_gap", std::chrono::duration_cast<std::chrono::milliseconds>(o.max_gap));
  if (o.batch == 0 || o.batch > 65536) cli::bad_value("batch", std::to_string(o.batch) + " is outside 1..65536");
  if (o.synthetic.instruments == 0) cli::bad_value("instruments", "must be at least 1");
  if (o.synthetic.burst_length > o.synthetic.burst_every) {
    cli::bad_value("burst_length", "must not exceed burst_every");
  }
  if (o.cpu < -1) cli::bad_value("cpu", "must be a cpu number, or -1 for none");
  if (o.range.from_seq > o.range.to_seq) cli::bad_value("from_seq", "is after to_seq");
  if (o.range.from_time > o.range.to_time) cli::bad_value("from_time", "is after to_time");
  validate_duration("duration_ms", o.duration);
  validate_duration("wait_timeout_ms", o.wait_timeout);
  validate_duration("drain_timeout_ms", o.drain_timeout);
  if (o.wait_subscribers > kMaxSubscribers) {
    cli::bad_value("wait_subscribers", std::to_string(o.wait_subscribers) + " is above " +
                                std::to_string(kMaxSubscribers));
  }
}

std::unique_ptr<feed::TickSource> open_input(const Options& o) {
  if (o.input.empty()) {
    if (!o.range.all() || o.pace_by == PaceBy::send) {
      cli::bad_value("pace_by", "--pace-by send and ranges are for recordings, not the synthetic feed");
    }
    return std::make_unique<feed::SyntheticFeed>(o.synthetic);
  }
  feed::SourceOptions so;
  so.format = o.format;
  so.skip_bad = o.skip_bad;
  so.decoder.status_ticks = o.status_ticks;
  so.udp_port = o.udp_port;
  so.range = o.range;
  std::unique_ptr<feed::TickSource> src = feed::open_source(o.input, so);
  const bool recording = dynamic_cast<const record::RecordingSource*>(src.get()) != nullptr;
  if (!recording && !o.range.all()) {
    cli::bad_value("from_seq", "--from-seq, --to-seq, --from-time and --to-time are for recordings; " + o.input +
                                   " is not one");
  }
  if (!recording && o.pace_by == PaceBy::send) {
    cli::bad_value("pace_by", "send: only recordings carry their send stamps; " + o.input + " is not one");
  }
  return src;
}

// ---------------------------------------------------------------------------------------------
std::unique_ptr<feed::OrderBook> make_book(const Options& o) {
  if (!o.book) return nullptr;
  feed::BookConfig bc;
  bc.expected_orders = o.book_orders;
  return std::make_unique<feed::OrderBook>(bc);
}

Replayer::Replayer(const Options& o, feed::TickSource& source, Publisher& pub,
                   std::unique_ptr<feed::OrderBook> book)
    : o_(o), src_(source), pub_(pub), book_(std::move(book)), in_(o.batch), out_(o.batch),
      due_(o.batch) {
  validate(o_);
  if (o_.book && !book_) book_ = make_book(o_);
  if (const auto* rec = dynamic_cast<const record::RecordingSource*>(&source)) {
    send_ns_per_cycle_ = 1.0 / rec->recording().meta().cycles_per_ns;
  } else if (o_.pace_by == PaceBy::send) {
    throw Error(Errc::config_error, "pace_by: send: only recordings carry their send stamps");
  }
}

bool Replayer::publish_pending() {
  if (pending_ == 0) return true;
  if (o_.pacing != Pacing::max) {
    // Lag of each tick: when it leaves (now) against when it was due.
    const Clock& clock = Clock::instance();
    const std::uint64_t now = Clock::now();
    for (std::size_t i = 0; i < pending_; ++i) {
      const auto late = static_cast<std::uint64_t>(clock.to_ns(now > due_[i] ? now - due_[i] : 0));
      stats_.lag_ns.record(late);
      window_lag_.record(late);
    }
  }
  std::size_t done = 0;
  std::uint32_t retries = 0;
  while (done < pending_) {
    const PublishResult r = pub_.publish(std::span<const Tick>(out_.data() + done, pending_ - done));
    done += r.published;
    if (r.status == PublishStatus::closed) {
      stats_.abandoned += pending_ - done;
      pending_ = 0;
      throw Error(Errc::closed, "publish: the channel '" + pub_.config().channel + "' was closed");
    }
    if (r.status == PublishStatus::back_pressured) {
      ++stats_.back_pressure_waits;
      // A block subscriber that stopped reading holds us here: the stop request and the
      // duration still end the run.
      if ((++retries & 1023u) == 0 &&
          ((stop_ != nullptr && stop_->load(std::memory_order_relaxed)) || Clock::now() >= end_)) {
        stats_.offered += done;
        stats_.abandoned += pending_ - done;
        stats_.stopped = true;
        pending_ = 0;
        return false;
      }
      cpu_relax();
    }
  }
  stats_.offered += pending_;
  pending_ = 0;
  return true;
}

bool Replayer::wait_until(std::uint64_t due, std::uint64_t feed_ts) {
  const Clock& clock = Clock::instance();
  std::uint64_t now = Clock::now();
  if (due <= now) return true;
  // A long wait is a gap in the feed: the progress line says so at once, and while it lasts.
  waiting_until_ = due;
  waiting_ts_ = feed_ts;
  announce_wait_ = clock.to_ns(due - now) > 1e9;
  struct Done {
    std::uint64_t& until;
    ~Done() { until = 0; }
  } done{waiting_until_};
  std::uint32_t spins = 0;
  while ((now = Clock::now()) < due) {
    const std::uint64_t sleep_ns =
        sleep_before(static_cast<std::uint64_t>(clock.to_ns(due - now)));
    if (sleep_ns != 0) {
      if (!control(now)) return false;
      pub_.service();  // subscribers join, and transports that need it send heartbeats
      std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
      continue;
    }
    if ((++spins & 1023u) == 0 && !control(now)) return false;
    cpu_relax();
  }
  return true;
}

bool Replayer::control(std::uint64_t now) {
  if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) return false;
  if (now >= end_) return false;
  if (progress_ != nullptr && *progress_ && (now >= next_progress_ || announce_wait_)) {
    announce_wait_ = false;
    report_progress(now);
  }
  return true;
}

void Replayer::report_progress(std::uint64_t now) {
  const Clock& clock = Clock::instance();
  const feed::Progress p = src_.progress();
  ProgressLine line;
  line.msgs_per_s = static_cast<double>(stats_.ticks_read - last_read_) /
                    std::max(clock.to_ns(now - last_progress_) * 1e-9, 1e-9);
  line.percent = p.total != 0 ? 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total) : -1;
  line.lag_p99_ns = window_lag_.value_at_percentile(99.0);
  line.lag_max_ns = window_lag_.max();
  line.published = pub_.counters().published;
  if (waiting_until_ > now + clock.ns_to_cycles(1e9)) {  // a wait this long is worth a line
    line.wait_ns = static_cast<std::uint64_t>(clock.to_ns(waiting_until_ - now));
    line.wait_feed_ts = waiting_ts_;
  }
  (*progress_)(line);
  window_lag_.reset();
  last_read_ = stats_.ticks_read;
  last_progress_ = now;
  next_progress_ = now + clock.ns_to_cycles(500e6);
}

// As fast as possible, ticks as read: publishes the read buffer itself, no copy.
bool Replayer::publish_as_read(std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) ++stats_.by_kind[static_cast<std::uint8_t>(in_[i].kind) & 15u];
  stats_.ticks_read += n;
  std::swap(in_, out_);
  pending_ = n;
  const bool ok = publish_pending();
  std::swap(in_, out_);
  return ok;
}

// Intended send time of the next tick (clock cycles), open loop: from the feed's clock or the
// rate, never from when the previous tick left.
std::uint64_t Replayer::due_time(std::uint64_t feed_elapsed) {
  std::uint64_t due;
  if (o_.pacing == Pacing::feed) {
    due = start_ + static_cast<std::uint64_t>(static_cast<double>(feed_elapsed) * feed_factor_);
  } else {
    due = start_ + static_cast<std::uint64_t>(static_cast<double>(index_) * rate_period_);
  }
  ++index_;
  due = std::max(due, last_due_);  // a feed whose clock steps back keeps its order
  last_due_ = due;
  return due;
}

bool Replayer::take(const Tick& t) {
  ++stats_.ticks_read;
  ++stats_.by_kind[static_cast<std::uint8_t>(t.kind) & 15u];
  // Every tick read moves the feed's clock, also one the book turns into no quote: gaps are
  // between consecutive feed timestamps.
  const std::uint64_t feed_elapsed =
      o_.pacing != Pacing::feed ? 0
      : o_.pace_by == PaceBy::send
          ? schedule_.elapsed(static_cast<std::uint64_t>(static_cast<double>(t.send_ts) * send_ns_per_cycle_))
          : schedule_.elapsed(t.exch_ts);
  Tick& send = out_[pending_];
  if (book_ && t.kind >= TickKind::Add && t.kind <= TickKind::Execute) {
    if (!book_->apply(t, send)) return true;  // top of book unchanged: nothing to send
  } else {
    send = t;
  }
  if (o_.pacing != Pacing::max) {
    const std::uint64_t due = due_time(feed_elapsed);
    if (due > Clock::now()) {
      // Not due yet: send what is due, then wait for this one's time (open loop).
      if (pending_ != 0) {
        const Tick keep = send;
        if (!publish_pending()) return false;
        out_[0] = keep;
      }
      if (!wait_until(due, t.exch_ts)) {
        stats_.stopped = true;
        return false;
      }
    }
    due_[pending_] = due;
  }
  return ++pending_ != out_.size() || publish_pending();
}

void Replayer::run(const std::atomic<bool>* stop,
                   const std::function<void(const ProgressLine&)>& progress) {
  const Clock& clock = Clock::instance();
  start_ = Clock::now();
  const double cycles_per_ns = clock.cycles_per_ns();
  end_ = o_.duration.count() > 0
             ? start_ + clock.ns_to_cycles(static_cast<double>(o_.duration.count()) * 1e6)
             : ~std::uint64_t{0};
  stop_ = stop;
  progress_ = &progress;
  // Sleeps before a send time wake up within the kSpinNs left to spin, not the default 50 us late.
  (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  // The elapsed time is kept also when bad input ends the run with an exception.
  struct Elapsed {
    Stats& s;
    std::uint64_t t0;
    ~Elapsed() { s.elapsed_s = Clock::instance().to_ns(Clock::now() - t0) * 1e-9; }
  } elapsed{stats_, start_};
  feed_factor_ = cycles_per_ns / o_.speed;        // clock cycles per feed nanosecond
  rate_period_ = cycles_per_ns * 1e9 / o_.rate;   // clock cycles from one tick to the next
  next_progress_ = start_ + clock.ns_to_cycles(500e6);
  last_progress_ = start_;
  last_read_ = 0;
  schedule_ = FeedSchedule(static_cast<std::uint64_t>(o_.max_gap.count()));
  last_due_ = start_;
  index_ = 0;

  bool running = true;
  while (running) {
    if (!control(Clock::now())) {
      stats_.stopped = true;
      break;
    }
    const std::size_t n = src_.read(std::span<Tick>(in_.data(), in_.size()));
    if (n == 0) {
      if (src_.at_end()) break;
      continue;  // the source did a bounded amount of work and found nothing yet
    }
    if (!book_ && o_.pacing == Pacing::max) {
      running = publish_as_read(n);
      continue;
    }
    for (std::size_t i = 0; i < n && running; ++i) running = take(in_[i]);
    if (running && !publish_pending()) running = false;
  }
  if (running) (void)publish_pending();
  pending_ = 0;
  progress_ = nullptr;
}

// ---------------------------------------------------------------------------------------------
namespace {

using cli::fmt;

std::string price_text(std::int64_t p) {
  const char* sign = p < 0 ? "-" : "";
  const std::uint64_t a = p < 0 ? static_cast<std::uint64_t>(-p) : static_cast<std::uint64_t>(p);
  return fmt("%s%" PRIu64 ".%04" PRIu64, sign, a / kPriceScale, a % kPriceScale);
}

const feed::ItchCounts* itch_counts(const feed::TickSource& src) {
  if (const auto* i = dynamic_cast<const feed::ItchFileReader*>(&src)) return &i->counts();
  if (const auto* p = dynamic_cast<const feed::PcapMoldReader*>(&src)) return &p->counts();
  return nullptr;
}

const feed::SymbolDirectory* symbols(const feed::TickSource& src) {
  if (const auto* i = dynamic_cast<const feed::ItchFileReader*>(&src)) return &i->symbols();
  if (const auto* p = dynamic_cast<const feed::PcapMoldReader*>(&src)) return &p->symbols();
  return nullptr;
}

// The report's sections, in the order they are printed.
void report_input(Report& rep, const Options& o, const feed::TickSource& src, const Publisher& pub) {
  nlohmann::json& j = rep.json;
  std::string& t = rep.text;
  t += "input: " + src.name() + "\n";
  j["input"] = src.name();
  j["transport"] = to_string(pub.config().transport);
  j["channel"] = pub.config().channel;
  j["pacing"] = to_string(o.pacing);
  if (o.pacing == Pacing::feed) j["speed"] = o.speed;
  if (o.pacing == Pacing::rate) j["rate"] = o.rate;
}

// Messages by type (ITCH inputs), then ticks read by kind.
void report_messages(Report& rep, const feed::TickSource& src, const Stats& st) {
  nlohmann::json& j = rep.json;
  std::string& t = rep.text;
  if (const feed::ItchCounts* c = itch_counts(src)) {
    t += fmt("messages: %" PRIu64 " valid ITCH 5.0 messages\n", c->messages);
    nlohmann::json by = nlohmann::json::object();
    for (feed::itch::MsgType type : feed::itch::kAllTypes) {
      const std::uint64_t n = (*c)[type];
      if (n == 0) continue;
      const char code[2] = {static_cast<char>(type), 0};
      t += fmt("  %s %-28s %12" PRIu64 "\n", code, feed::itch::type_name(static_cast<std::uint8_t>(type)), n);
      by[code] = n;
    }
    j["messages"] = c->messages;
    j["messages_by_type"] = by;
  }
  {
    nlohmann::json by = nlohmann::json::object();
    std::string line;
    for (std::size_t k = 0; k < 16; ++k) {
      if (st.by_kind[k] == 0) continue;
      const char* name = to_string(static_cast<TickKind>(k));
      line += fmt(" %s %" PRIu64, name, st.by_kind[k]);
      by[name] = st.by_kind[k];
    }
    t += fmt("ticks read: %" PRIu64 " (", st.ticks_read) + (line.empty() ? "" : line.substr(1)) + ")\n";
    j["ticks_read"] = st.ticks_read;
    j["ticks_by_kind"] = by;
  }
}

void report_capture(Report& rep, const feed::TickSource& src) {
  nlohmann::json& j = rep.json;
  std::string& t = rep.text;
  if (const auto* p = dynamic_cast<const feed::PcapMoldReader*>(&src)) {
    const feed::PcapCounts& cc = p->capture_counts();
    const feed::mold::SequenceTracker& sq = p->sequence();
    t += fmt("capture: %" PRIu64 " packets, %" PRIu64 " MoldUDP64 (%" PRIu64 " heartbeats), %" PRIu64
             " skipped; sequence gaps %" PRIu64 " (%" PRIu64 " messages missing), %" PRIu64 " duplicates\n",
             cc.packets, cc.mold_packets, sq.heartbeats(), cc.not_udp + cc.other_port + cc.fragments,
             sq.gap_count(), sq.missing(), sq.duplicates());
    for (const feed::mold::Gap& g : sq.gaps()) {
      if (&g - sq.gaps().data() >= 10) {
        t += fmt("  ... %zu more gaps\n", sq.gaps().size() - 10);
        break;
      }
      t += "  gap in session '" + feed::mold::session_string(g.session) +
           fmt("': messages %" PRIu64 "..%" PRIu64 " missing (packet %" PRIu64 ")\n", g.expected,
               g.received - 1, g.packet);
    }
    j["capture"] = {{"packets", cc.packets}, {"mold_packets", cc.mold_packets},
                    {"heartbeats", sq.heartbeats()}, {"gaps", sq.gap_count()},
                    {"missing", sq.missing()}, {"duplicates", sq.duplicates()}};
  }
}

void report_bad_input(Report& rep, const feed::TickSource& src) {
  nlohmann::json& j = rep.json;
  std::string& t = rep.text;
  const feed::ErrorCounts& e = src.errors();
  if (e.total() != 0 || !src.first_error().empty()) {
    t += fmt("bad input skipped: %" PRIu64 " (truncated %" PRIu64 ", bad length %" PRIu64
             ", unknown type %" PRIu64 ", bad packet %" PRIu64 ", bad line %" PRIu64 ")\n",
             e.total(), e.truncated, e.bad_length, e.unknown_type, e.bad_packet, e.bad_line);
    t += "  first: " + src.first_error() + "\n";
  }
  j["bad_input"] = {{"total", e.total()}, {"truncated", e.truncated}, {"bad_length", e.bad_length},
                    {"unknown_type", e.unknown_type}, {"bad_packet", e.bad_packet},
                    {"bad_line", e.bad_line}, {"first", src.first_error()}};
}

// What was published, how often back-pressure held it, and the lag behind schedule.
void report_publishing(Report& rep, const Options& o, const Stats& st, const PublisherCounters& pc) {
  nlohmann::json& j = rep.json;
  std::string& t = rep.text;
  const double rate = st.elapsed_s > 0 ? static_cast<double>(st.ticks_read) / st.elapsed_s : 0;
  t += fmt("published: %" PRIu64 " ticks%s in %.3f s (%.2f M input msgs/s), %" PRIu64
           " while no subscriber was attached\n",
           pc.published, o.book ? " (top-of-book quotes, trades, status)" : "", st.elapsed_s,
           rate / 1e6, pc.unheard);
  t += fmt("back-pressure: %" PRIu64 " publish calls retried", st.back_pressure_waits);
  if (st.abandoned != 0) t += fmt("; %" PRIu64 " ticks never published (run ended while held back)", st.abandoned);
  t += st.stopped ? "; stopped before the end of the input\n" : "\n";
  j["ticks_published"] = pc.published;
  j["unheard"] = pc.unheard;
  j["back_pressure_events"] = st.back_pressure_waits;
  j["abandoned"] = st.abandoned;
  j["evictions"] = pc.evictions;
  j["reclaimed"] = pc.reclaimed;
  j["elapsed_s"] = st.elapsed_s;
  j["input_msgs_per_s"] = rate;
  j["stopped_early"] = st.stopped;

  if (o.pacing != Pacing::max && !st.lag_ns.empty()) {
    const Summary s = summarize(st.lag_ns);
    t += fmt("lag behind schedule: p50 %.1f us, p99 %.1f us, p99.99 %.1f us, max %.1f us\n",
             s.p50_ns / 1e3, s.p99_ns / 1e3, s.p9999_ns / 1e3, s.max_ns / 1e3);
    j["lag"] = to_json(s);
  }
}

void report_subscribers(Report& rep, const std::vector<SubscriberStatus>& subscribers) {
  nlohmann::json& j = rep.json;
  std::string& t = rep.text;
  t += fmt("subscribers: %zu\n", subscribers.size());
  nlohmann::json subs = nlohmann::json::array();
  for (const SubscriberStatus& s : subscribers) {
    const std::string who = s.peer.empty() ? fmt("pid %d", s.pid) : "peer " + s.peer;
    t += fmt("  slot %u %s policy %s state %s position %" PRIu64 " lag %" PRIu64
             " back-pressure %" PRIu64 "\n",
             s.slot, who.c_str(), to_string(s.policy), s.state.c_str(), s.position, s.lag,
             s.back_pressure);
    subs.push_back({{"slot", s.slot}, {"pid", s.pid}, {"peer", s.peer},
                    {"policy", to_string(s.policy)}, {"state", s.state},
                    {"position", s.position}, {"lag", s.lag}, {"back_pressure", s.back_pressure}});
  }
  j["subscribers"] = subs;
}

// The book at the end: counts, then the instruments with the most live orders first.
void report_book(Report& rep, const feed::OrderBook* b, const feed::TickSource& src) {
  nlohmann::json& j = rep.json;
  std::string& t = rep.text;
  const feed::BookCounts& bc = b->counts();
  t += fmt("book: %zu live orders; quotes %" PRIu64 ", unknown references %" PRIu64
           ", duplicate adds %" PRIu64 ", overfills %" PRIu64 "\n",
           b->live_orders(), bc.quotes, bc.unknown_refs, bc.duplicate_adds, bc.overfills);
  const feed::SymbolDirectory* dir = symbols(src);
  std::vector<std::uint32_t> ins = b->instruments();
  std::stable_sort(ins.begin(), ins.end(), [&](std::uint32_t a, std::uint32_t c) {
    return b->live_orders(a) > b->live_orders(c);
  });
  constexpr std::size_t kShown = 20;
  t += fmt("  %-10s %-8s %8s %22s %22s\n", "instrument", "symbol", "orders", "best bid", "best ask");
  nlohmann::json books = nlohmann::json::array();
  for (std::size_t i = 0; i < ins.size(); ++i) {
    const std::uint32_t id = ins[i];
    const feed::TopOfBook top = b->top(id);
    const std::string sym = dir != nullptr ? std::string(dir->symbol(id)) : std::string();
    const std::string bid = top.has_bid() ? fmt("%" PRIu64 " @ ", top.bid.qty) + price_text(top.bid.price) : "-";
    const std::string ask = top.has_ask() ? fmt("%" PRIu64 " @ ", top.ask.qty) + price_text(top.ask.price) : "-";
    if (i < kShown) {
      t += fmt("  %-10u %-8s %8zu %22s %22s\n", id, sym.c_str(), b->live_orders(id), bid.c_str(), ask.c_str());
    }
    nlohmann::json one = {{"instrument", id}, {"symbol", sym}, {"live_orders", b->live_orders(id)}};
    if (top.has_bid()) one["bid"] = {{"price", top.bid.price}, {"qty", top.bid.qty}, {"orders", top.bid.orders}};
    if (top.has_ask()) one["ask"] = {{"price", top.ask.price}, {"qty", top.ask.qty}, {"orders", top.ask.orders}};
    books.push_back(one);
  }
  if (ins.size() > kShown) t += fmt("  ... %zu more instruments (see --json)\n", ins.size() - kShown);
  j["book"] = {{"live_orders", b->live_orders()}, {"quotes", bc.quotes},
               {"unknown_refs", bc.unknown_refs}, {"instruments", books}};
}

}  // namespace

Report make_report(const Options& o, const feed::TickSource& src, const Replayer& r,
                   const Publisher& pub, const std::vector<SubscriberStatus>& subscribers) {
  Report rep;
  report_input(rep, o, src, pub);
  report_messages(rep, src, r.stats());
  report_capture(rep, src);
  report_bad_input(rep, src);
  report_publishing(rep, o, r.stats(), pub.counters());
  report_subscribers(rep, subscribers);
  if (const feed::OrderBook* b = r.book()) report_book(rep, b, src);
  return rep;
}

}  // namespace tickrail::replay
