// The reader of the live counters files (lib/core/stats.hpp has their layout): what
// tickrail-stat and the tests see of every process's counters, and its renderings.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/stats.hpp"

namespace tickrail::stats {

struct RowSnapshot {
  std::uint32_t slot = 0;
  int pid = 0;
  std::string peer;
  std::string policy;
  std::string state;
  std::uint64_t position = 0;
  std::uint64_t lag = 0;
  std::uint64_t back_pressure = 0;
};

// One line of a FailoverSubscriber (a failover block).
struct FailoverLineSnapshot {
  std::string transport;
  std::string label;
  bool up = false;
  std::uint64_t first = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t downs = 0;
  std::uint64_t down_ns = 0;        // time down; a line down now: until the file was read
  std::uint64_t down_since_ns = 0;  // Unix time it went down; 0 while up
};

struct BlockSnapshot {
  std::uint32_t index = 0;
  BlockKind kind = BlockKind::free;
  std::string transport;            // a failover: line A's (lines[0])
  std::string label;
  EndpointState state = EndpointState::open;
  std::uint64_t registered_ns = 0;
  std::array<std::uint64_t, kCounters> counters{};
  std::vector<RowSnapshot> rows;   // publishers
  bool rows_consistent = true;     // false: the stats thread kept rewriting them while we read
  std::uint64_t refreshed_ns = 0;
  std::array<FailoverLineSnapshot, 2> lines{};  // a failover: line A and line B

  [[nodiscard]] std::uint64_t get(FoCounter c) const noexcept { return counters[fo_word(c)]; }
  [[nodiscard]] std::uint64_t get(PubCounter c) const noexcept {
    return counters[static_cast<std::uint32_t>(c)];
  }
  [[nodiscard]] std::uint64_t get(SubCounter c) const noexcept {
    return counters[static_cast<std::uint32_t>(c)];
  }
};

enum class ProcessStatus : std::uint8_t {
  alive,
  dead,         // pid gone, or reused by another process: the file is stale
  starting,     // the file is being created (no magic yet) by a live process
  incompatible, // bad magic, another version, truncated or shrinking, foreign owner: not read
};
[[nodiscard]] const char* to_string(ProcessStatus s) noexcept;

struct ProcessSnapshot {
  std::string path;
  int pid = 0;
  ProcessStatus status = ProcessStatus::incompatible;
  std::string note;            // why dead or incompatible
  std::string program;
  std::uint64_t start_time = 0;
  std::uint64_t created_ns = 0;
  double ns_per_cycle = 0;
  std::vector<BlockSnapshot> blocks;  // blocks in use (alive or dead: a dead one's last values)
  bool removed = false;               // the reader removed the stale file
  std::uint32_t owner_uid = 0;        // the file's owner: root or one of the process's uids

  // max_poll_gap in ns (cycles when the TSC rate is unknown).
  [[nodiscard]] double cycles_to_ns(std::uint64_t c) const noexcept {
    return ns_per_cycle > 0 ? static_cast<double>(c) * ns_per_cycle : static_cast<double>(c);
  }
};

// Reads one stat file. A file that is bad is reported, not thrown; an unreadable path throws
// Error naming it. `proc_root` is where /proc is looked up (tests).
[[nodiscard]] ProcessSnapshot read_stat_file(const std::string& path,
                                             const std::string& proc_root = "/");

struct ScanOptions {
  std::string dir = stat_dir();
  bool remove_dead = true;  // unlink the files of dead processes (after reading them)
  std::string proc_root = "/";
};
// Every tickrail-stat.<pid> file of `dir`, sorted by pid. Throws Error when dir is unreadable.
[[nodiscard]] std::vector<ProcessSnapshot> scan(const ScanOptions& options = {});

// Renderings for tickrail-stat. `before` (optional) is an earlier scan `seconds` ago, for rates.
// JSON: an array of processes, each with its blocks, counters by name, rows and status.
[[nodiscard]] std::string format_json(std::span<const ProcessSnapshot> ps, int indent = 2);
[[nodiscard]] std::string format_text(std::span<const ProcessSnapshot> now,
                                      std::span<const ProcessSnapshot> before = {},
                                      double seconds = 0);
// Prometheus text exposition format (0.0.4, what node exporter's textfile collector reads):
// every counter of every endpoint, labelled pid, program, role, transport, channel and endpoint
// (its block index); a publisher's subscribers add slot, subscriber_pid, peer and policy.
// Counters that only grow are `counter`s named *_total; positions, lags and states are gauges.
[[nodiscard]] std::string format_prometheus(std::span<const ProcessSnapshot> ps);

}  // namespace tickrail::stats
