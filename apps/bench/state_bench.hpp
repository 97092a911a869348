// tickrail-bench's market-state figures (issue 14, docs/state.md): its options, the synthetic
// tick mix that writes the last-value table, the table on/off comparison and the snapshot time.
// Kept apart from main.cpp so that tests drive the options and the reports.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/tick.hpp"

namespace tickrail::bench {

struct StateOptions {
  std::string state = "off";                 // the rounds' table: on, off, or both
  std::uint32_t capacity = 65536;            // --state-capacity
  bool capacity_given = false;               // --snapshot: the table is N instruments unless given
  std::string classes = "quote,trade,status";
  std::uint32_t snapshot = 0;                // --snapshot N; 0: the rounds instead
  double snapshot_rate = 0;                  // ticks/s published during the snapshots
};

// --state, --state-capacity, --state-classes, --snapshot, --snapshot-rate.
void add_state_options(CLI::App& app, StateOptions& o);
// After parsing: what the options cannot mean together, in words ("" when they can).
[[nodiscard]] std::string check_state_options(const StateOptions& o);
// "quote,trade" -> those classes on (capacity and enabled untouched); throws Error(config_error)
// on an unknown or repeated name or an empty list.
void parse_classes(const std::string& text, StateConfig& c);
// The table of the rounds (enabled as `on` says) or of the snapshot (capacity as documented).
[[nodiscard]] StateConfig rounds_table(const StateOptions& o, bool on);
[[nodiscard]] StateConfig snapshot_table(const StateOptions& o);

// The synthetic ticks of the table's contenders: in every 16 ticks 10 Quote, 2 Trade, 2 Execute,
// 1 Status and 1 Add (kept by no class: the branch that writes no entry), each for the next
// instrument of a walk that visits all `instruments` once per `instruments` ticks with a large
// stride, so that consecutive ticks write entries far apart, as a feed over many names does.
class TickMix {
 public:
  explicit TickMix(std::uint32_t instruments);
  const Tick& next() noexcept {
    tick_.kind = kKinds[k_++ & 15];
    instrument_ += stride_;
    if (instrument_ >= n_) instrument_ -= n_;
    tick_.instrument = instrument_;
    return tick_;
  }
  [[nodiscard]] std::uint32_t stride() const noexcept { return stride_; }
  static constexpr TickKind kKinds[16] = {
      TickKind::Quote, TickKind::Quote, TickKind::Trade,  TickKind::Quote,
      TickKind::Quote, TickKind::Execute, TickKind::Quote, TickKind::Status,
      TickKind::Quote, TickKind::Quote, TickKind::Trade,  TickKind::Quote,
      TickKind::Add,   TickKind::Execute, TickKind::Quote, TickKind::Quote};

 private:
  Tick tick_{};
  std::uint32_t n_;
  std::uint32_t stride_;
  std::uint32_t instrument_ = 0;
  std::uint32_t k_ = 0;
};

// --state both: one round's table-on and table-off contenders, and the summary over rounds.
struct OnOffRound {
  double p50_on = 0, p50_off = 0;  // ns
  double tp_on = 0, tp_off = 0;    // ticks/s
};
[[nodiscard]] std::string on_off_round_text(const OnOffRound& r);
[[nodiscard]] std::string on_off_summary_text(const std::vector<OnOffRound>& rounds);
[[nodiscard]] nlohmann::json on_off_json(const std::vector<OnOffRound>& rounds);

// --snapshot: one repetition, and the report over them.
struct SnapshotRep {
  double setup_us = 0;     // Subscriber constructed (attach) and wait_active(): not timed below
  double snapshot_us = 0;  // first poll after activation to the return of the poll ending it
  std::uint64_t entries = 0;  // ticks flagged kTickFromTable
  std::uint64_t polls = 0;
  std::uint64_t abandoned = 0;  // counters().table_abandoned: a snapshot given up
};
struct SnapshotRun {
  std::uint32_t instruments = 0;
  StateConfig table;
  double rate = 0;          // ticks/s published meanwhile (0: the publisher only serves)
  std::uint64_t published = 0;  // ticks published during the repetitions
  std::vector<SnapshotRep> reps;
};
[[nodiscard]] std::string snapshot_text(const SnapshotRun& run);
// The measurement (snapshot.cpp): a publisher whose table holds o.snapshot instruments of every
// class kept, served (and publishing at o.snapshot_rate) by the calling thread, and `reps`
// snapshot subscribers one after another on `receiver_cpu`.
[[nodiscard]] SnapshotRun measure_snapshots(const StateOptions& o, int reps, int receiver_cpu,
                                            const std::string& housekeeping_cpus);
[[nodiscard]] nlohmann::json snapshot_json(const SnapshotRun& run);

[[nodiscard]] double median(std::vector<double> v);  // the middle two's mean for an even count; 0 for none

}  // namespace tickrail::bench
