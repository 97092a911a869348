#include "state_bench.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "tickrail/error.hpp"

namespace tickrail::bench {
namespace {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string classes_text(const StateConfig& c) {
  std::string s;
  for (const auto& [on, name] : {std::pair{c.quote, "quote"}, {c.trade, "trade"}, {c.status, "status"}}) {
    if (on) s += (s.empty() ? "" : ",") + std::string(name);
  }
  return s;
}

// The target of issue 14: the table costs at most 5% of p50 latency and of throughput.
constexpr double kTarget = 0.05;

struct Spread {
  double p50, min, max;
};
Spread spread(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0};
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {median(v), *lo, *hi};
}
template <class F>
std::vector<double> each(const std::vector<SnapshotRep>& reps, F f) {
  std::vector<double> v;
  for (const SnapshotRep& r : reps) v.push_back(static_cast<double>(f(r)));
  return v;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void add_state_options(CLI::App& app, StateOptions& o) {
  app.add_option("--state", o.state,
                 "the tickrail contender's last-value table: on, off, or both (on and off compared "
                 "in the same rounds)")
      ->check(CLI::IsMember({"on", "off", "both"}))
      ->capture_default_str();
  app.add_option("--state-capacity", o.capacity,
                 "instruments of the table (the ticks spread over all of them); with --snapshot N, "
                 "N unless given")
      ->check(CLI::Range(std::uint32_t{1}, kMaxStateCapacity))
      ->each([&o](const std::string&) { o.capacity_given = true; })
      ->capture_default_str();
  app.add_option("--state-classes", o.classes, "the classes the table keeps, a comma list of quote, trade, status")
      ->capture_default_str();
  app.add_option("--snapshot", o.snapshot,
                 "instead of the rounds: time --rounds snapshots of a table holding N instruments "
                 "over shm")
      ->check(CLI::Range(std::uint32_t{1}, kMaxStateCapacity));
  app.add_option("--snapshot-rate", o.snapshot_rate,
                 "with --snapshot: ticks/s the publisher publishes meanwhile (0: none)")
      ->check(CLI::Range(0.0, 1e8))
      ->capture_default_str();
}

void parse_classes(const std::string& text, StateConfig& c) {
  StateConfig out = c;
  out.quote = out.trade = out.status = false;
  std::istringstream in(text);
  std::string name;
  int n = 0;
  while (std::getline(in, name, ',')) {
    bool* cls = name == "quote" ? &out.quote : name == "trade" ? &out.trade : name == "status" ? &out.status : nullptr;
    if (cls == nullptr) throw Error(Errc::config_error, "--state-classes: unknown class '" + name + "' (quote, trade, status)");
    if (*cls) throw Error(Errc::config_error, "--state-classes: '" + name + "' named twice");
    *cls = true;
    ++n;
  }
  if (n == 0) throw Error(Errc::config_error, "--state-classes: no class named (quote, trade, status)");
  c = out;
}

std::string check_state_options(const StateOptions& o) {
  try {
    StateConfig c;
    parse_classes(o.classes, c);
  } catch (const Error& e) {
    return e.what();
  }
  if (o.snapshot == 0) {
    return o.snapshot_rate > 0 ? "--snapshot-rate: needs --snapshot" : "";
  }
  if (o.state != "off") return "--snapshot keeps a table of its own: --state is for the rounds";
  if (o.capacity_given && o.snapshot > o.capacity) {
    return fmt("--snapshot %" PRIu32 ": more instruments than --state-capacity %" PRIu32, o.snapshot,
               o.capacity);
  }
  return "";
}

StateConfig rounds_table(const StateOptions& o, bool on) {
  StateConfig c;
  parse_classes(o.classes, c);
  c.enabled = on;
  c.capacity = o.capacity;
  return c;
}

StateConfig snapshot_table(const StateOptions& o) {
  StateConfig c = rounds_table(o, true);
  if (!o.capacity_given) c.capacity = o.snapshot;
  return c;
}

// A stride near 0.618 of the instruments, coprime with them: the walk visits each once per lap.
TickMix::TickMix(std::uint32_t instruments) : n_(std::max<std::uint32_t>(instruments, 1)) {
  stride_ = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(static_cast<double>(n_) * 0.618));
  while (std::gcd(stride_, n_) != 1) --stride_;
  stride_ %= n_;  // one instrument: stride 0
}

std::string on_off_round_text(const OnOffRound& r) {
  return fmt("            table on/off: p50 %6.1f / %6.1f ns, ratio %.3f | throughput %6.2f / %6.2f "
             "M/s, ratio %.3f\n",
             r.p50_on, r.p50_off, r.p50_on / r.p50_off, r.tp_on / 1e6, r.tp_off / 1e6, r.tp_on / r.tp_off);
}

nlohmann::json on_off_json(const std::vector<OnOffRound>& rounds) {
  nlohmann::json per = nlohmann::json::array();
  std::vector<double> p50, tp;
  for (const OnOffRound& r : rounds) {
    p50.push_back(r.p50_on / r.p50_off);
    tp.push_back(r.tp_on / r.tp_off);
    per.push_back({{"p50_on_ns", r.p50_on}, {"p50_off_ns", r.p50_off}, {"p50_ratio", p50.back()},
                   {"throughput_on", r.tp_on}, {"throughput_off", r.tp_off}, {"throughput_ratio", tp.back()}});
  }
  const double mp = median(p50), mt = median(tp);
  return {{"rounds", per},
          {"p50_ratio_median", mp},
          {"throughput_ratio_median", mt},
          {"within_5_percent", {{"p50", mp <= 1 + kTarget}, {"throughput", mt >= 1 - kTarget}}}};
}

std::string on_off_summary_text(const std::vector<OnOffRound>& rounds) {
  const nlohmann::json j = on_off_json(rounds);
  const auto met = [](bool b) { return b ? "met" : "NOT met"; };
  std::vector<double> p50, tp;
  for (const nlohmann::json& r : j["rounds"]) {
    p50.push_back(r["p50_ratio"].get<double>());
    tp.push_back(r["throughput_ratio"].get<double>());
  }
  const Spread p = spread(p50), t = spread(tp);
  return fmt("last-value table, on/off in the same rounds (median of per-round ratios): p50 %.3f "
             "(rounds %.3f..%.3f), throughput %.3f (rounds %.3f..%.3f); target within 5%%: p50 %s, "
             "throughput %s\n",
             p.p50, p.min, p.max, t.p50, t.min, t.max, met(j["within_5_percent"]["p50"].get<bool>()),
             met(j["within_5_percent"]["throughput"].get<bool>()));
}

std::string snapshot_text(const SnapshotRun& run) {
  const Spread t = spread(each(run.reps, [](const SnapshotRep& r) { return r.snapshot_us; }));
  const Spread e = spread(each(run.reps, [](const SnapshotRep& r) { return r.entries; }));
  const Spread p = spread(each(run.reps, [](const SnapshotRep& r) { return r.polls; }));
  const Spread s = spread(each(run.reps, [](const SnapshotRep& r) { return r.setup_us; }));
  std::string text = fmt("snapshot of %" PRIu32 " instruments over shm: table capacity %" PRIu32
                         ", classes %s; publisher %s; %zu repetitions\n",
                         run.instruments, run.table.capacity, classes_text(run.table).c_str(),
                         run.rate > 0 ? fmt("publishing %.0f ticks/s", run.rate).c_str() : "idle (serving only)",
                         run.reps.size());
  text += fmt("  first poll after activation to the end of the snapshot: p50 %.1f us, min %.1f us, "
              "max %.1f us\n", t.p50, t.min, t.max);
  text += fmt("  entries delivered: p50 %.0f (min %.0f, max %.0f), in p50 %.0f polls of 256 at most\n",
              e.p50, e.min, e.max, p.p50);
  text += fmt("  not timed: attach and activation, p50 %.1f us (max %.1f us)\n", s.p50, s.max);
  const double abandoned = std::accumulate(run.reps.begin(), run.reps.end(), 0.0,
                                           [](double a, const SnapshotRep& r) { return a + static_cast<double>(r.abandoned); });
  if (abandoned > 0) text += fmt("  warning: %.0f snapshots given up (table_abandoned)\n", abandoned);
  return text;
}

nlohmann::json snapshot_json(const SnapshotRun& run) {
  const auto j3 = [](const Spread& s) { return nlohmann::json{{"p50", s.p50}, {"min", s.min}, {"max", s.max}}; };
  nlohmann::json reps = nlohmann::json::array();
  for (const SnapshotRep& r : run.reps) {
    reps.push_back({{"snapshot_us", r.snapshot_us}, {"entries", r.entries}, {"polls", r.polls},
                    {"setup_us", r.setup_us}, {"abandoned", r.abandoned}});
  }
  return {{"instruments", run.instruments},
          {"capacity", run.table.capacity},
          {"classes", classes_text(run.table)},
          {"rate", run.rate},
          {"published", run.published},
          {"repetitions", run.reps.size()},
          {"snapshot_us", j3(spread(each(run.reps, [](const SnapshotRep& r) { return r.snapshot_us; })))},
          {"entries", j3(spread(each(run.reps, [](const SnapshotRep& r) { return r.entries; })))},
          {"setup_us", j3(spread(each(run.reps, [](const SnapshotRep& r) { return r.setup_us; })))},
          {"per_repetition", reps}};
}

}  // namespace tickrail::bench
