// Doctor: checks a host for what tickrail needs, before anything runs, and says how to fix it.
//
// Each check returns findings: OK, INFO (worth knowing, nothing to fix), WARN (works, but costs
// latency or robustness) or FAIL (will not work as configured), each with the command that fixes
// it. Checks read the host through files under Options::root ("/" on a real host), so tests run
// them against fake /sys and /proc trees; libibverbs (active MTU, which sysfs lacks) and external
// tools (dcb, mlnx_qos, ethtool) are consulted only when root is "/".
// Control plane: everything here allocates; nothing throws for a missing or broken file (that is
// a finding).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tickrail/config.hpp"

namespace tickrail {
class ConfigFile;
}  // namespace tickrail

namespace tickrail::doctor {

enum class Level : std::uint8_t { ok, info, warn, fail };
[[nodiscard]] const char* to_string(Level l) noexcept;  // "OK", "INFO", "WARN", "FAIL"

struct Finding {
  std::string check;    // the check's name: "rdma.port", "cpu.isolated", ...
  std::string subject;  // what it is about: "rxe0 port 1", "cpu 3", "host"
  Level level = Level::ok;
  std::string message;  // what was found, with the figures
  std::string fix;      // the command (or config change) that fixes it; empty when none needed
};

// What libibverbs says about the devices (sysfs has no active MTU).
struct VerbsPort {
  int port = 0;
  std::string state;       // "ACTIVE", "DOWN", ...
  int active_mtu = 0;      // bytes
  int max_mtu = 0;         // bytes
  std::string link_layer;  // "Ethernet", "InfiniBand"
};
struct VerbsDevice {
  std::string name;
  std::string error;  // why it could not be opened or queried
  std::vector<VerbsPort> ports;
};
struct VerbsView {
  bool queried = false;  // false: libibverbs was not asked (fake root)
  std::string error;
  std::vector<VerbsDevice> devices;
};
// ibv_get_device_list, ibv_open_device, ibv_query_port for every device. Never throws.
[[nodiscard]] VerbsView query_verbs();

struct Options {
  std::string root = "/";
  std::vector<int> cpus;   // the cores the hot threads run on (empty: report isolation only)
  std::string device;      // check only this RDMA device (empty: all)
  std::string address;     // the local RoCE address whose GID must exist (default: from config)
  std::optional<PublisherConfig> publisher;    // from --config: rings, transport, rdma settings
  std::optional<SubscriberConfig> subscriber;
  std::string config_path;                     // for messages
  std::vector<std::string> config_errors;      // reported as FAIL findings
  // libibverbs; empty: query_verbs() when root is "/", not asked otherwise. Tests inject one.
  std::function<VerbsView()> verbs;
  // SMT sibling load is /proc/stat sampled twice this far apart; `between_samples`, when set,
  // runs instead of the sleep (tests rewrite the file there).
  std::chrono::milliseconds busy_sample{200};
  std::function<void()> between_samples;
  bool run_tools = true;  // dcb, mlnx_qos, ethtool: only when root is "/"
};

// Reads a tickrail TOML file (config_file.hpp) into `o`: publisher and subscriber settings, and
// the `cpu` of the [replay] and [jitter] sections. Errors, an unknown key or table among them
// (the [replay] and [jitter] keys are left to those programs), go to o.config_errors.
void load_config(const std::string& path, Options& o);
// The same over several files, read in order as the programs read -c files (a later file's keys
// over an earlier's). `read_programs`, when given, reads each file's program sections ([replay],
// [jitter], [record], [failover]) as those programs do, and then every key of the file must have
// been read.
void load_config(const std::vector<std::string>& paths, Options& o,
                 const std::function<void(ConfigFile&)>& read_programs = {});

// The checks, in the order run() runs them.
[[nodiscard]] std::vector<Finding> check_rdma_devices(const Options& o);  // rdma.devices
[[nodiscard]] std::vector<Finding> check_rdma_ports(const Options& o);    // rdma.port, rdma.link_layer
[[nodiscard]] std::vector<Finding> check_gids(const Options& o);          // rdma.gid
[[nodiscard]] std::vector<Finding> check_mtu(const Options& o);           // rdma.mtu
[[nodiscard]] std::vector<Finding> check_roce_qos(const Options& o);      // roce.pfc_ecn (info)
[[nodiscard]] std::vector<Finding> check_locked_memory(const Options& o); // memlock
[[nodiscard]] std::vector<Finding> check_cpus(const Options& o);  // cpu.* (isolation, governor,
                                                                   // SMT, NUMA)
[[nodiscard]] std::vector<Finding> check_threads(const Options& o);       // threads.placement
[[nodiscard]] std::vector<Finding> check_irqbalance(const Options& o);    // irqbalance
[[nodiscard]] std::vector<Finding> check_tsc(const Options& o);           // tsc
[[nodiscard]] std::vector<Finding> check_huge_pages(const Options& o);    // thp, hugepages
[[nodiscard]] std::vector<Finding> check_max_map_count(const Options& o); // vm.max_map_count
[[nodiscard]] std::vector<Finding> check_shm_memory(const Options& o);    // shm.memory, shm.dir

struct Check {
  const char* name;   // "rdma", "memlock", "cpu", ... (for --only)
  const char* title;
  std::vector<Finding> (*run)(const Options&);
};
[[nodiscard]] std::span<const Check> checks() noexcept;

struct Report {
  std::vector<Finding> findings;
  [[nodiscard]] std::size_t count(Level l) const noexcept;
  [[nodiscard]] bool passed() const noexcept { return count(Level::fail) == 0; }
};

// Runs every check (or those named in `only`); throws Error(invalid_argument) for an unknown name.
[[nodiscard]] Report run(const Options& o, std::span<const std::string> only = {});

// One line per finding, its fix indented below it, and a summary line.
[[nodiscard]] std::string format_text(const Report& r, bool color = false);
// {"findings": [{check, subject, level, message, fix}], "summary": {ok, info, warn, fail},
//  "passed": bool}
[[nodiscard]] std::string format_json(const Report& r, int indent = 2);

// Helpers exposed for tests.
// Bytes a config's rings pin (registered or mlocked), with one line per item saying why.
struct MemoryNeed {
  std::uint64_t bytes = 0;
  std::vector<std::string> items;
};
[[nodiscard]] MemoryNeed locked_memory_needed(const Options& o, bool rdma_present);
// Share of non-idle time of `cpu` between two /proc/stat texts, in [0, 1]; nullopt when the
// cpu's line is missing or no time passed.
[[nodiscard]] std::optional<double> cpu_busy(const std::string& stat_before,
                                             const std::string& stat_after, int cpu);

}  // namespace tickrail::doctor
