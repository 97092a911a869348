// The pieces of tickrail-record: its options, the recording loop over a Subscriber and a
// ChannelRecorder, --info and the CSV export. main.cpp only wires them to the command line;
// tests drive them directly.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tickrail/config.hpp"
#include "tickrail/counters.hpp"
#include "tickrail/tools/config_file.hpp"
#include "tickrail/tools/record/recorder.hpp"
#include "tickrail/tools/record/recording.hpp"

namespace tickrail::recorder_app {

struct Options {
  std::string file;        // the recording: written (record), or read (--info, --csv)
  bool info = false;       // print the file's header, ranges, gaps and how it ends
  std::string csv;         // export the range of `file` to this CSV file
  std::string json;        // the summary (record) or the info (--info) as JSON here
  bool force = false;      // replace an existing output file (the recording, the CSV)
  bool skip_bad = false;   // --csv: skip corrupt blocks (counted) instead of failing
  bool quiet = false;      // no progress line
  record::Range range{};   // --csv: the ticks exported
  record::RecorderConfig rec{};  // path, compression, blocks (rec.path is `file` when recording)
  int cpu = -1;            // pin the polling thread
  std::chrono::milliseconds duration{0};  // stop after this long (0: when the channel ends)
  std::uint64_t count = 0;  // stop after this many ticks (0: no limit)
};

// Reads the [record] section (keys: docs/recording.md, configs/record.toml).
void read_options(ConfigFile::Section s, Options& o);
// A config file as tickrail-record reads it: the subscriber's sections and [record]; a key or
// table no program reads is an error.
void read_file(ConfigFile& f, SubscriberConfig& sc, Options& o);
void validate(const Options& o);  // throws Error(config_error) naming the key

// What --info prints, and its JSON.
struct Info {
  std::string text;
  nlohmann::json json;
};
[[nodiscard]] Info describe(const record::Recording& r);

// Exports o.range of o.file to o.csv. Returns how many ticks; throws the reader's error after
// writing the ticks before it (a corrupt block without skip_bad, an unclosed file's end).
// `bad_blocks`: the corrupt blocks skipped (skip_bad), set on return and before a throw.
std::uint64_t export_csv(const Options& o, std::uint64_t& bad_blocks);

// Why a recording run ended.
struct RunResult {
  record::RecorderStats stats;
  record::EndReason reason = record::EndReason::stopped;
  std::string ended;         // "publisher_gone", "evicted", "count", "duration", "interrupted"
  std::string why;           // the subscriber's reason, when the publisher ended it
  std::string error;         // the writer's error ("" when none)
  SubscriberCounters counters{};
  double elapsed_s = 0;
  bool attached = true;      // false: interrupted before the channel was there (no file made)
};
// Subscribes with `sc` and records into o.file until the channel ends, o.count, o.duration or
// `stop` (which also ends the wait for the channel). o.file is made once attached: a failed
// attach throws and leaves no file. `progress` (may be empty) is called about twice a second.
RunResult record_channel(const Options& o, const SubscriberConfig& sc, const std::atomic<bool>* stop,
                         const std::function<void(const RunResult&)>& progress = {});
[[nodiscard]] Info summary(const Options& o, const SubscriberConfig& sc, const RunResult& r);

}  // namespace tickrail::recorder_app
