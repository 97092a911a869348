#include "record.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <ctime>
#include <optional>

#include "cli.hpp"
#include "text.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/subscriber.hpp"
#include "tickrail/tools/feed/csv_writer.hpp"

namespace tickrail::recorder_app {

using cli::fmt;

void read_options(ConfigFile::Section s, Options& o) {
  s.get("output", o.file);
  s.get("force", o.force);
  s.get("compress", o.rec.writer.zstd);
  s.get("zstd_level", o.rec.writer.zstd_level);
  s.get("block_ticks", o.rec.block_ticks);
  s.get("queue_blocks", o.rec.queue_blocks);
  s.get("flush_after_ms", o.rec.flush_after);
  s.get("cpu", o.cpu);
  s.get("duration_ms", o.duration);
  s.get("count", o.count);
  s.get("json", o.json);
  s.validated([&] { validate(o); });
}

void read_file(ConfigFile& f, SubscriberConfig& sc, Options& o) {
  read_subscriber_config(f, sc);
  read_options(f.section("record"), o);
  f.check_all_read({"publisher", "replay", "jitter", "failover"});
}

void validate(const Options& o) {
  record::RecorderConfig rc = o.rec;
  if (rc.path.empty()) rc.path = "-";  // the output is checked on its own below
  rc.validate();
  if (o.cpu < -1) cli::bad_value("cpu", "must be a cpu number, or -1 for none");
  validate_duration("duration_ms", o.duration);
  if (o.range.from_seq > o.range.to_seq) cli::bad_value("from_seq", "is after to_seq");
  if (o.range.from_time > o.range.to_time) cli::bad_value("from_time", "is after to_time");
}

namespace {

std::string wall_text(std::uint64_t ns) {
  const auto secs = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt("%s.%09" PRIu64 "Z", buf, ns % 1'000'000'000);
}

// An exchange time as tickrail-replay shows it: a time of day for ITCH, else nanoseconds.
std::string exch_text(std::uint64_t ts) {
  constexpr std::uint64_t kDay = 86'400'000'000'000;
  if (ts >= kDay) return fmt("%" PRIu64 " ns", ts);
  const std::uint64_t s = ts / 1'000'000'000;
  return fmt("%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 ".%09" PRIu64, s / 3600, s / 60 % 60, s % 60,
             ts % 1'000'000'000);
}

}  // namespace

Info describe(const record::Recording& r) {
  Info out;
  std::string& t = out.text;
  nlohmann::json& j = out.json;
  const record::RecordingMeta& m = r.meta();
  const auto& blocks = r.blocks();
  t += "recording: " + r.path() + "\n";
  t += fmt("format version %u, channel '%s' over %s, recorded on a %.3f GHz clock\n", r.version(),
           m.channel.c_str(), to_string(m.transport), m.cycles_per_ns);
  t += "started: " + wall_text(m.start_ns) + "\n";
  t += std::string("compression: ") + (m.zstd ? "zstd" : "none") + "\n";
  std::uint64_t stored = 0;
  for (const auto& b : blocks) stored += b.header.stored_size;
  t += fmt("blocks: %zu, ticks: %" PRIu64 ", file: %" PRIu64 " bytes", blocks.size(), r.ticks(), r.file_size());
  if (r.ticks() != 0) t += fmt(" (%.2f bytes per tick)", static_cast<double>(r.file_size()) / static_cast<double>(r.ticks()));
  t += "\n";
  j["file"] = r.path();
  j["version"] = r.version();
  j["channel"] = m.channel;
  j["transport"] = to_string(m.transport);
  j["clock_ghz"] = m.cycles_per_ns;
  j["start_ns"] = m.start_ns;
  j["compression"] = m.zstd ? "zstd" : "none";
  j["blocks"] = blocks.size();
  j["ticks"] = r.ticks();
  j["bytes"] = r.file_size();
  j["payload_bytes"] = stored;
  if (!blocks.empty()) {
    std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
    for (const auto& b : blocks) {
      lo = std::min(lo, b.header.min_time);
      hi = std::max(hi, b.header.max_time);
    }
    const std::uint64_t first = blocks.front().header.first_seq, last = blocks.back().header.last_seq;
    t += fmt("sequence: %" PRIu64 " .. %" PRIu64 "\n", first, last);
    t += "exchange time: " + exch_text(lo) + " .. " + exch_text(hi) + "\n";
    t += "received: " + wall_text(blocks.front().header.recv_ns) + " .. " +
         wall_text(blocks.back().header.recv_ns) + " (first tick of the last block)\n";
    j["first_seq"] = first;
    j["last_seq"] = last;
    j["first_time"] = lo;
    j["last_time"] = hi;
  }
  std::uint64_t missing = 0;
  for (const auto& g : r.gaps()) missing += g.missing;
  t += fmt("gaps the recorder saw: %zu (%" PRIu64 " sequence numbers missing)\n", r.gaps().size(), missing);
  nlohmann::json gaps = nlohmann::json::array();
  constexpr std::size_t kShown = 20;
  for (std::size_t i = 0; i < r.gaps().size(); ++i) {
    const record::Gap& g = r.gaps()[i];
    gaps.push_back({{"after_seq", g.after_seq}, {"missing", g.missing}, {"block_offset", g.offset}});
    if (i < kShown) {
      t += fmt("  after seq %" PRIu64 ": %" PRIu64 " missing (block at byte %" PRIu64 ")\n", g.after_seq,
               g.missing, g.offset);
    } else if (i == kShown) {
      t += fmt("  ... %zu more (--json lists them all)\n", r.gaps().size() - kShown);
    }
  }
  j["gaps"] = gaps;
  j["missing"] = missing;
  j["clean"] = r.clean();
  if (r.clean()) {
    const record::Trailer& tr = r.trailer();
    const auto reason = static_cast<record::EndReason>(tr.end_reason);
    t += std::string("end: closed cleanly (") + record::to_string(reason) + ") at " + wall_text(tr.end_ns) + "\n";
    t += fmt("ticks the recorder could not keep: %" PRIu64 "\n", tr.dropped);
    j["end_reason"] = record::to_string(reason);
    j["end_ns"] = tr.end_ns;
    j["dropped"] = tr.dropped;
  } else {
    t += "end: NOT closed cleanly: " + r.stop_reason() + "\n";
    t += fmt("valid prefix: bytes 0 .. %" PRIu64 " of %" PRIu64 "\n", r.valid_end(), r.file_size());
    j["stop_reason"] = r.stop_reason();
    j["valid_end"] = r.valid_end();
  }
  return out;
}

std::uint64_t export_csv(const Options& o, std::uint64_t& bad_blocks) {
  record::RecordingSource src(o.file, o.range, o.skip_bad);
  feed::CsvTickWriter w(o.csv);
  std::vector<Tick> buf(4096);
  std::uint64_t n = 0;
  try {
    for (;;) {
      const std::size_t k = src.read(buf);
      w.write(std::span<const Tick>(buf.data(), k));
      n += k;
      if (k == 0 && src.at_end()) break;
    }
  } catch (...) {
    bad_blocks = src.bad_blocks();
    w.close();  // what came before the error stays, complete
    throw;
  }
  bad_blocks = src.bad_blocks();
  w.close();
  return n;
}

namespace {

// After an empty poll: why the stream ended, or nullptr while it goes on (as tickrail-jitter:
// one more poll after the state settles a race with the last ticks).
template <class Handler>
const char* stream_end(Subscriber& sub, Handler& handler, std::size_t want) {
  const SubscriberState st = sub.state();
  if (st != SubscriberState::publisher_gone && st != SubscriberState::evicted && st != SubscriberState::closed) {
    return nullptr;
  }
  if (want != 0 && sub.poll(handler, want) != 0) return nullptr;
  return st == SubscriberState::evicted ? "evicted" : "publisher_gone";
}

const std::atomic<bool> kNeverStop{false};

std::uint64_t wall_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

RunResult record_channel(const Options& o, const SubscriberConfig& sc, const std::atomic<bool>* stop,
                         const std::function<void(const RunResult&)>& progress) {
  const Clock& clock = Clock::instance();
  if (o.cpu >= 0) {
    const PinResult pin = pin_current_thread(o.cpu);
    if (!pin) throw Error(Errc::invalid_argument, "--cpu: " + pin.message);
  }
  // The file is checked first: an existing output without --force, or an unwritable one, fails
  // before anything waits for a publisher. It is made only once attached: a failed or
  // interrupted wait leaves nothing behind (nor replaces anything with --force).
  if (!o.force && ::access(o.file.c_str(), F_OK) == 0) {
    throw Error(Errc::config_error, "recording '" + o.file + "' exists (--force replaces it)");
  }
  cli::check_writable(o.file, "FILE");
  RunResult r;
  std::optional<Subscriber> attached;
  try {
    attached.emplace(cli::attach_subscriber(sc, stop != nullptr ? *stop : kNeverStop));
  } catch (const cli::Interrupted&) {
    r.ended = "interrupted";
    r.attached = false;
    return r;
  }
  Subscriber& sub = *attached;
  record::RecorderConfig rc = o.rec;
  rc.path = o.file;
  rc.writer.force = o.force;
  rc.housekeeping_cpus = sc.housekeeping_cpus;
  record::RecordingMeta meta;
  meta.channel = sc.channel;
  meta.transport = sc.transport;
  meta.cycles_per_ns = clock.cycles_per_ns();
  meta.start_ns = wall_now_ns();
  meta.start_cycles = Clock::now();
  meta.zstd = rc.writer.zstd;
  record::ChannelRecorder rec(rc, meta);
  auto handler = [&rec](const Tick& t) { (void)rec.on_tick(t); };
  const std::uint64_t start = Clock::now();
  const std::uint64_t end = o.duration.count() > 0
                                ? start + clock.ns_to_cycles(static_cast<double>(o.duration.count()) * 1e6)
                                : ~std::uint64_t{0};
  const std::uint64_t half_second = clock.ns_to_cycles(500e6);
  std::uint64_t next_progress = start + half_second;
  const std::uint64_t limit = o.count == 0 ? ~std::uint64_t{0} : o.count;
  std::uint64_t received = 0;
  std::uint32_t idle = 0;
  for (std::uint32_t spins = 0;; ++spins) {
    const std::uint64_t now = Clock::now();
    // Only as many ticks as the recorder has room for: with policy block the rest waits in the
    // ring and the publisher is held back; with drop the publisher drops them. The recorder
    // itself then never has to refuse a tick.
    const std::uint64_t room = std::min<std::uint64_t>(rec.room(), limit - received);
    const std::size_t n = room == 0 ? 0 : sub.poll(handler, static_cast<std::size_t>(std::min<std::uint64_t>(room, 256)));
    received += n;
    if (received >= limit) {
      r.ended = "count";
      break;
    }
    if (rec.failed()) [[unlikely]] {
      r.ended = "write_error";
      break;
    }
    if (n == 0) {
      rec.flush_due(now);
      // The state reads the clock (a heartbeat's age): every 64th idle poll is soon enough.
      if (room != 0 && (++idle & 63u) == 0) {
        if (const char* why = stream_end(sub, handler, static_cast<std::size_t>(std::min<std::uint64_t>(room, 256)))) {
          r.ended = why;
          r.why = sub.reason();
          break;
        }
      }
      cpu_relax();
    }
    if ((spins & 255u) == 0) {
      if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
        r.ended = "interrupted";
        break;
      }
      if (now >= end) {
        r.ended = "duration";
        break;
      }
      if (progress && now >= next_progress) {
        next_progress = now + half_second;
        r.stats = rec.stats();
        r.elapsed_s = clock.to_ns(now - start) * 1e-9;
        progress(r);
      }
    }
  }
  r.reason = r.ended == "publisher_gone" ? record::EndReason::publisher_gone
             : r.ended == "evicted"      ? record::EndReason::evicted
                                         : record::EndReason::stopped;
  r.counters = sub.counters();
  sub.close();
  try {
    rec.close(r.reason);
  } catch (const Error& e) {
    r.error = cli::message_of(e);
  }
  r.stats = rec.stats();
  r.elapsed_s = clock.to_ns(Clock::now() - start) * 1e-9;
  return r;
}

Info summary(const Options& o, const SubscriberConfig& sc, const RunResult& r) {
  Info out;
  if (!r.attached) {
    out.text = fmt("nothing recorded: %s channel '%s' not attached, %s not made\nended: %s\n",
                   to_string(sc.transport), sc.channel.c_str(), o.file.c_str(), r.ended.c_str());
    out.json = {{"file", o.file}, {"transport", to_string(sc.transport)}, {"channel", sc.channel},
                {"attached", false}, {"recorded", 0}, {"ended", r.ended}, {"error", r.error}};
    return out;
  }
  const record::RecorderStats& s = r.stats;
  out.text += fmt("recorded %" PRIu64 " ticks of %s channel '%s' into %s: %" PRIu64 " blocks, %" PRIu64
                  " bytes%s in %.3f s\n",
                  s.recorded, to_string(sc.transport), sc.channel.c_str(), o.file.c_str(), s.blocks, s.bytes,
                  o.rec.writer.zstd ? " (zstd)" : "", r.elapsed_s);
  if (s.recorded != 0) {
    out.text += fmt("bytes per tick: %.2f; rate: %.3f M ticks/s\n",
                    static_cast<double>(s.bytes) / static_cast<double>(s.recorded),
                    r.elapsed_s > 0 ? static_cast<double>(s.recorded) / r.elapsed_s / 1e6 : 0.0);
  }
  out.text += fmt("gaps: %" PRIu64 " sequence numbers missing; lost by the subscriber: %" PRIu64
                  "; not kept by the recorder: %" PRIu64 "\n",
                  s.missing, r.counters.lost, s.dropped + s.out_of_order);
  std::string ended = r.ended == "publisher_gone" ? "the publisher closed the channel (file closed cleanly)"
                      : r.ended == "evicted"      ? "evicted by the publisher: " + r.why
                                                  : r.ended;
  if (!r.error.empty()) ended = "write error: " + r.error + " (the file ends at its last complete block)";
  out.text += "ended: " + ended + "\n";
  out.json = {{"file", o.file},           {"transport", to_string(sc.transport)},
              {"channel", sc.channel},    {"received", s.received},
              {"recorded", s.recorded},   {"dropped", s.dropped},
              {"out_of_order", s.out_of_order}, {"blocks", s.blocks},
              {"bytes", s.bytes},         {"missing", s.missing},
              {"subscriber_lost", r.counters.lost}, {"compression", o.rec.writer.zstd ? "zstd" : "none"},
              {"elapsed_s", r.elapsed_s}, {"ended", r.ended},
              {"error", r.error}};
  return out;
}

}  // namespace tickrail::recorder_app
