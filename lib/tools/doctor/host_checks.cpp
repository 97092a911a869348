// Host checks: locked memory, cores (isolation, nohz_full, rcu_nocbs, governor, SMT sibling,
// NUMA), irqbalance, invariant TSC, huge pages, vm.max_map_count.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <sstream>
#include <thread>

#include "tools/doctor/host_fs.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"

namespace tickrail::doctor {

using detail::finding;
using detail::HostFs;

namespace {

constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kSlot = 64;

std::string bytes_text(std::uint64_t b) {
  if (b == kUnlimited) return "unlimited";
  char buf[48];
  if (b >= (1ULL << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ULL << 30));
  } else if (b >= (1ULL << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ULL << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  }
  return buf;
}

std::optional<std::uint64_t> to_u64(const std::string& s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  try {
    return std::stoull(s);
  } catch (...) {
    return std::nullopt;
  }
}

// "Max locked memory   65536   65536   bytes" in /proc/<pid>/limits: the soft limit.
std::optional<std::uint64_t> memlock_from_limits(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max locked memory", 0) != 0) continue;
    std::istringstream w(line.substr(17));
    std::string soft;
    if (!(w >> soft)) return std::nullopt;
    if (soft == "unlimited") return kUnlimited;
    return to_u64(soft);
  }
  return std::nullopt;
}

// CAP_IPC_LOCK (bit 14) in CapEff of /proc/<pid>/status.
bool has_ipc_lock(const std::string& status) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    try {
      return ((std::stoull(line.substr(7), nullptr, 16) >> 14) & 1U) != 0;
    } catch (...) {
      return false;
    }
  }
  return false;
}

std::vector<int> cpus_or_empty(const std::optional<std::string>& text) {
  if (!text || *text == "(null)") return {};
  try {
    return parse_cpu_list(*text);
  } catch (const Error&) {
    return {};
  }
}

bool has(const std::vector<int>& v, int c) { return std::binary_search(v.begin(), v.end(), c); }

// A kernel command-line parameter's value ("rcu_nocbs=2-3" -> "2-3"); nullopt when absent.
std::optional<std::string> cmdline_param(const std::string& cmdline, const std::string& key) {
  std::istringstream in(cmdline);
  std::string w;
  std::optional<std::string> v;
  while (in >> w) {
    if (w.rfind(key + "=", 0) == 0) v = w.substr(key.size() + 1);
  }
  return v;
}

// isolcpus= may carry flags first: "isolcpus=nohz,domain,2-3".
std::string isolcpus_list(const std::string& v) {
  std::istringstream in(v);
  std::string item;
  std::string out;
  while (std::getline(in, item, ',')) {
    if (!item.empty() && (item[0] < '0' || item[0] > '9')) continue;
    out += (out.empty() ? "" : ",") + item;
  }
  return out;
}

int node_of_cpu(const HostFs& fs, int cpu) {
  for (const std::string& e : fs.list("sys/devices/system/cpu/cpu" + std::to_string(cpu))) {
    if (e.rfind("node", 0) == 0 && e.size() > 4) {
      if (const auto n = to_u64(e.substr(4))) return static_cast<int>(*n);
    }
  }
  for (const std::string& n : fs.list("sys/devices/system/node")) {
    if (n.rfind("node", 0) != 0) continue;
    const auto id = to_u64(n.substr(4));
    if (id && has(cpus_or_empty(fs.line("sys/devices/system/node/" + n + "/cpulist")), cpu)) {
      return static_cast<int>(*id);
    }
  }
  return -1;
}

std::vector<std::string> nodes(const HostFs& fs) {
  std::vector<std::string> out;
  for (const std::string& n : fs.list("sys/devices/system/node")) {
    if (n.rfind("node", 0) == 0 && to_u64(n.substr(4))) out.push_back(n);
  }
  return out;
}

// The NUMA node of an RDMA device: its PCI device, or (rxe) its netdev's. -1: not reported.
int node_of_device(const HostFs& fs, const std::string& dev) {
  auto read = [&](const std::string& rel) -> std::optional<int> {
    const auto t = fs.line(rel);
    if (!t) return std::nullopt;
    try {
      return std::stoi(*t);
    } catch (...) {
      return std::nullopt;
    }
  };
  if (const auto n = read("sys/class/infiniband/" + dev + "/device/numa_node")) return *n;
  for (const detail::PortRef& p : detail::rdma_ports(fs, dev)) {
    const std::string nd = detail::netdev_of(fs, p);
    if (!nd.empty()) {
      if (const auto n = read("sys/class/net/" + nd + "/device/numa_node")) return *n;
    }
  }
  return -1;
}

std::string stat_line(const std::string& text, int cpu) {
  std::istringstream in(text);
  std::string line;
  const std::string key = "cpu" + std::to_string(cpu) + " ";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return line;
  }
  return "";
}

}  // namespace

std::optional<double> cpu_busy(const std::string& before, const std::string& after, int cpu) {
  const auto parse = [&](const std::string& text) -> std::optional<std::pair<double, double>> {
    const std::string line = stat_line(text, cpu);
    if (line.empty()) return std::nullopt;
    std::istringstream w(line);
    std::string name;
    w >> name;
    std::vector<double> v;
    double x = 0;
    while (w >> x) v.push_back(x);
    if (v.size() < 4) return std::nullopt;
    double total = 0;
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) total += v[i];  // guest time is in user
    const double idle = v[3] + (v.size() > 4 ? v[4] : 0);              // idle + iowait
    return std::make_pair(total, idle);
  };
  const auto a = parse(before);
  const auto b = parse(after);
  if (!a || !b || b->first <= a->first) return std::nullopt;
  const double dt = b->first - a->first;
  const double di = b->second - a->second;
  return std::clamp((dt - di) / dt, 0.0, 1.0);
}

MemoryNeed locked_memory_needed(const Options& o, bool rdma_present) {
  MemoryNeed n;
  const auto add = [&](std::uint64_t b, std::string why) {
    n.bytes += b;
    n.items.push_back(bytes_text(b) + ": " + std::move(why));
  };
  std::optional<PublisherConfig> pub = o.publisher;
  std::optional<SubscriberConfig> sub = o.subscriber;
  if (!pub && !sub && rdma_present) {
    // No config: what one RC publisher and one RC subscriber with the defaults need.
    pub = PublisherConfig{};
    pub->transport = TransportKind::rc;
    sub = SubscriberConfig{};
    sub->transport = TransportKind::rc;
  }
  if (pub) {
    const std::uint64_t ring = std::uint64_t{pub->ring_capacity} * kSlot;
    switch (pub->transport) {
      case TransportKind::shm:
        if (pub->lock_memory) {
          add(pub->max_subscribers * ring, "shm publisher, lock_memory: " +
                                               std::to_string(pub->max_subscribers) + " rings of " +
                                               std::to_string(pub->ring_capacity) + " slots");
        }
        break;
      case TransportKind::rc:
        add(2 * ring, "rc publisher: registered staging ring of 2 x " +
                          std::to_string(pub->ring_capacity) + " slots");
        break;
      case TransportKind::ud:
        add(std::uint64_t{pub->rdma.history} * kSlot,
            "ud publisher: registered history of " + std::to_string(pub->rdma.history) + " ticks");
        break;
    }
  }
  if (sub) {
    std::uint64_t cap = sub->ring_capacity != 0 ? sub->ring_capacity
                        : pub                   ? pub->ring_capacity
                                                : PublisherConfig{}.ring_capacity;
    switch (sub->transport) {
      case TransportKind::shm:
        if (sub->lock_memory) {
          add(cap * kSlot, "shm subscriber, lock_memory: its ring of " + std::to_string(cap) + " slots");
        }
        break;
      case TransportKind::rc:
        add(cap * kSlot, "rc subscriber: registered ring of " + std::to_string(cap) + " slots");
        break;
      case TransportKind::ud: {
        const std::uint64_t groups = std::max<std::size_t>(1, sub->rdma.groups.size());
        add(groups * sub->rdma.recv_buffers * (64 + 4096),
            "ud subscriber: " + std::to_string(sub->rdma.recv_buffers) +
                " registered receive buffers per group (up to 4096-byte MTU)");
        break;
      }
    }
  }
  return n;
}

std::vector<Finding> check_locked_memory(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const auto text = fs.text("proc/self/limits");
  const auto parsed = text ? memlock_from_limits(*text) : std::nullopt;
  const bool rdma_present = !detail::rdma_devices(fs, "").empty();
  const MemoryNeed need = locked_memory_needed(o, rdma_present);
  const bool configured = o.publisher || o.subscriber;
  const std::string fix =
      "ulimit -l unlimited (in the shell that starts the app); for a service: LimitMEMLOCK=infinity; "
      "for good: `echo '* - memlock unlimited' > /etc/security/limits.d/tickrail.conf` and log in "
      "again";
  if (!parsed) {
    out.push_back(finding("memlock", "host", Level::warn,
                          "cannot read the locked-memory limit from " + fs.path("proc/self/limits"),
                          "ulimit -l"));
    return out;
  }
  const std::uint64_t limit = parsed.value_or(0);
  std::string what = "locked-memory limit " + bytes_text(limit);
  if (need.items.empty()) {
    out.push_back(finding("memlock", "host", Level::ok,
                          what + (configured ? "; the configuration locks or registers no memory"
                                             : "; the shm transport locks nothing unless lock_memory "
                                               "is set")));
  } else {
    std::string items;
    for (const std::string& i : need.items) items += (items.empty() ? "" : "; ") + i;
    what += (configured ? ", the configuration needs " : ", an rc pair with default rings needs ") +
            bytes_text(need.bytes) + " (" + items + ")";
    if (limit >= need.bytes) {
      out.push_back(finding("memlock", "host", Level::ok, what));
    } else {
      // Registration beyond the limit fails (ENOMEM from ibv_reg_mr, EAGAIN from mlock).
      out.push_back(finding("memlock", "host", configured ? Level::fail : Level::warn,
                            what + ": registration or mlock will fail", fix));
    }
  }
  if (has_ipc_lock(fs.text("proc/self/status").value_or(""))) {
    out.push_back(finding("memlock", "host", Level::info,
                          "this process has CAP_IPC_LOCK, which ignores the limit; an app started "
                          "by another user has only its own limit"));
  }
  return out;
}

namespace {

// The host's cpu sets (sysfs and the kernel command line) and the boot-line fix for the cpus
// asked about.
struct CpuSets {
  std::vector<int> online, isolated, nohz, nocbs;
  std::vector<int> boot_isolated;  // isolated, plus isolcpus= of the command line
  std::string boot_fix;
};

CpuSets read_cpu_sets(const HostFs& fs, const Options& o) {
  CpuSets c;
  c.online = cpus_or_empty(fs.line("sys/devices/system/cpu/online"));
  c.isolated = cpus_or_empty(fs.line("sys/devices/system/cpu/isolated"));
  c.nohz = cpus_or_empty(fs.line("sys/devices/system/cpu/nohz_full"));
  const std::string cmdline = fs.line("proc/cmdline").value_or("");
  c.nocbs = cpus_or_empty(cmdline_param(cmdline, "rcu_nocbs"));
  c.boot_isolated = c.isolated;
  if (const auto iso = cmdline_param(cmdline, "isolcpus")) {
    const std::vector<int> more = cpus_or_empty(isolcpus_list(*iso));
    c.boot_isolated.insert(c.boot_isolated.end(), more.begin(), more.end());
    std::sort(c.boot_isolated.begin(), c.boot_isolated.end());
  }
  const std::string l = o.cpus.empty() ? std::string("<cpus>") : format_cpu_list(o.cpus);
  c.boot_fix = "add `isolcpus=" + l + " nohz_full=" + l + " rcu_nocbs=" + l +
               "` to GRUB_CMDLINE_LINUX in /etc/default/grub, then `update-grub` and reboot";
  return c;
}

std::string list_or_none(const std::vector<int>& cpus) {
  return cpus.empty() ? std::string("none") : format_cpu_list(cpus);
}

// No cpus named: one line on what the host isolates.
Finding isolation_summary(const CpuSets& c) {
  const std::string msg = "isolated: " + list_or_none(c.isolated) + "; nohz_full: " + list_or_none(c.nohz) +
                          "; rcu_nocbs: " + list_or_none(c.nocbs) +
                          " (name the hot threads' cores with --cpus to check them)";
  const bool none = c.isolated.empty() && c.boot_isolated.empty();
  return finding("cpu.isolated", "host", none ? Level::warn : Level::info, msg, none ? c.boot_fix : "");
}

// Isolated from the scheduler, no scheduler tick, RCU callbacks elsewhere.
void check_isolation(std::vector<Finding>& out, int cpu, const std::string& subj, const CpuSets& c) {
  if (has(c.isolated, cpu)) {
    out.push_back(finding("cpu.isolated", subj, Level::ok, "isolated from the scheduler"));
  } else {
    out.push_back(finding("cpu.isolated", subj, Level::warn,
                          "not isolated: other tasks may run on it (isolated: " + list_or_none(c.isolated) + ")",
                          c.boot_fix));
  }
  if (has(c.nohz, cpu)) {
    out.push_back(finding("cpu.nohz_full", subj, Level::ok, "in nohz_full: no scheduler tick while one task runs"));
  } else {
    out.push_back(finding("cpu.nohz_full", subj, Level::warn,
                          "not in nohz_full: the scheduler tick interrupts it (250-1000 times a second)",
                          c.boot_fix));
  }
  // nohz_full cpus have their RCU callbacks offloaded too.
  if (has(c.nocbs, cpu) || has(c.nohz, cpu)) {
    out.push_back(finding("cpu.rcu_nocbs", subj, Level::ok,
                          has(c.nocbs, cpu) ? "RCU callbacks offloaded (rcu_nocbs)"
                                            : "RCU callbacks offloaded (implied by nohz_full)"));
  } else {
    out.push_back(finding("cpu.rcu_nocbs", subj, Level::warn,
                          "RCU callbacks run on it (not in rcu_nocbs= of the kernel command line)", c.boot_fix));
  }
}

Finding governor_finding(const HostFs& fs, int cpu, const std::string& subj) {
  const std::string gov = cpu_governor(cpu, fs.root());
  if (gov.empty()) {
    return finding("cpu.governor", subj, Level::info, "no cpufreq governor (fixed frequency, or a virtual machine)");
  }
  if (gov == "performance") return finding("cpu.governor", subj, Level::ok, "governor performance");
  return finding("cpu.governor", subj, Level::warn,
                 "governor " + gov + ": the clock ramps down when idle and up on load",
                 "cpupower -c " + std::to_string(cpu) + " frequency-set -g performance");
}

std::string percent(double fraction) {
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.0f%%", fraction * 100);
  return pct;
}

// /proc/stat before and after the sample, for the SMT siblings' load.
struct StatSample {
  std::string before, after;
};

// SMT siblings share the core's execution units and caches.
void check_smt(std::vector<Finding>& out, const HostFs& fs, const Options& o, int cpu, const std::string& subj,
               const std::vector<int>& online, const StatSample& stat) {
  const std::string cpudir = "sys/devices/system/cpu/cpu" + std::to_string(cpu);
  const std::vector<int> sibs = cpus_or_empty(fs.line(cpudir + "/topology/thread_siblings_list"));
  bool any = false;
  for (const int s : sibs) {
    if (s == cpu) continue;
    any = true;
    const std::string sname = "cpu " + std::to_string(s);
    const std::string off = "echo 0 > /sys/devices/system/cpu/cpu" + std::to_string(s) + "/online";
    if (std::find(o.cpus.begin(), o.cpus.end(), s) != o.cpus.end()) {
      out.push_back(finding("cpu.smt", subj, Level::warn,
                            "its SMT sibling " + sname + " is also a hot cpu: the two threads share one core",
                            "put hot threads on different physical cores"));
    } else if (!online.empty() && !has(online, s)) {
      out.push_back(finding("cpu.smt", subj, Level::ok, "SMT sibling " + sname + " is offline"));
    } else if (const auto busy = cpu_busy(stat.before, stat.after, s); busy && *busy > 0.10) {
      out.push_back(finding("cpu.smt", subj, Level::warn,
                            "SMT sibling " + sname + " is busy (" + percent(*busy) + " over the sample): "
                            "its work slows this core's",
                            "keep " + sname + " idle (isolate it too), or `" + off + "`"));
    } else {
      const std::string idle = "SMT sibling " + sname + " is online" +
                               (busy ? " and idle (" + percent(*busy) + " busy over the sample)"
                                     : std::string(" (its load could not be measured)"));
      out.push_back(finding("cpu.smt", subj, Level::info, idle, "to be sure: `" + off + "`"));
    }
  }
  if (!any) out.push_back(finding("cpu.smt", subj, Level::ok, "no SMT sibling"));
}

// NUMA: the core against each RDMA device.
void check_numa(std::vector<Finding>& out, const HostFs& fs, int cpu, const std::string& subj,
                const std::vector<std::pair<std::string, int>>& nic_nodes) {
  const int cnode = node_of_cpu(fs, cpu);
  for (const auto& [dev, dnode] : nic_nodes) {
    if (dnode < 0 || cnode < 0) {
      out.push_back(finding("cpu.numa", subj, Level::info,
                            dev + " reports no NUMA node" + (cnode < 0 ? " (nor does the cpu)" : "")));
    } else if (dnode == cnode) {
      out.push_back(finding("cpu.numa", subj, Level::ok, "node " + std::to_string(cnode) + ", same as " + dev));
    } else {
      out.push_back(finding("cpu.numa", subj, Level::warn,
                            "node " + std::to_string(cnode) + ", but " + dev + " is on node " +
                                std::to_string(dnode) + ": every tick crosses the interconnect",
                            "use cpus of node " + std::to_string(dnode) + ": " +
                                fs.line("sys/devices/system/node/node" + std::to_string(dnode) + "/cpulist").value_or("?")));
    }
  }
}

}  // namespace

std::vector<Finding> check_cpus(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const CpuSets sets = read_cpu_sets(fs, o);
  if (o.cpus.empty()) out.push_back(isolation_summary(sets));

  // SMT sibling load: /proc/stat twice.
  StatSample stat;
  if (!o.cpus.empty()) {
    stat.before = fs.text("proc/stat").value_or("");
    if (o.between_samples) {
      o.between_samples();
    } else {
      std::this_thread::sleep_for(o.busy_sample);
    }
    stat.after = fs.text("proc/stat").value_or("");
  }

  const std::vector<std::string> node_dirs = nodes(fs);
  std::vector<std::pair<std::string, int>> nic_nodes;
  for (const std::string& dev : detail::rdma_devices(fs, o.device)) {
    nic_nodes.emplace_back(dev, node_of_device(fs, dev));
  }

  for (const int cpu : o.cpus) {
    const std::string subj = "cpu " + std::to_string(cpu);
    if (!sets.online.empty() && !has(sets.online, cpu)) {
      const bool exists = fs.exists("sys/devices/system/cpu/cpu" + std::to_string(cpu));
      out.push_back(finding("cpu.online", subj, Level::fail,
                            exists ? "offline" : "no such cpu (online: " + format_cpu_list(sets.online) + ")",
                            exists ? "echo 1 > /sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/online"
                                   : "pick an online cpu"));
      continue;
    }
    check_isolation(out, cpu, subj, sets);
    out.push_back(governor_finding(fs, cpu, subj));
    check_smt(out, fs, o, cpu, subj, sets.online, stat);
    if (node_dirs.size() <= 1) {
      out.push_back(finding("cpu.numa", subj, Level::ok, "single NUMA node"));
    } else {
      check_numa(out, fs, cpu, subj, nic_nodes);
    }
  }
  return out;
}

std::vector<Finding> check_irqbalance(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  bool running = false;
  for (const std::string& pid : fs.list("proc")) {
    if (!to_u64(pid)) continue;
    if (fs.line("proc/" + pid + "/comm").value_or("") == "irqbalance") {
      running = true;
      break;
    }
  }
  if (!running) {
    out.push_back(finding("irqbalance", "host", Level::ok,
                          "not running (NIC interrupts stay where /proc/irq/*/smp_affinity_list puts them)"));
    return out;
  }
  // irqbalance leaves alone the cpus its banned list names.
  std::vector<int> banned;
  for (const char* f : {"etc/default/irqbalance", "etc/sysconfig/irqbalance"}) {
    std::istringstream in(fs.text(f).value_or(""));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("IRQBALANCE_BANNED_CPULIST=", 0) != 0) continue;
      std::string v = line.substr(26);
      v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
      const std::vector<int> b = cpus_or_empty(v);
      banned.insert(banned.end(), b.begin(), b.end());
    }
  }
  std::sort(banned.begin(), banned.end());
  std::vector<int> exposed;
  for (int c : o.cpus) {
    if (!has(banned, c)) exposed.push_back(c);
  }
  if (!o.cpus.empty() && exposed.empty()) {
    out.push_back(finding("irqbalance", "host", Level::ok,
                          "running, with the hot cpus in IRQBALANCE_BANNED_CPULIST (" + format_cpu_list(banned) + ")"));
  } else {
    const std::string l = exposed.empty() ? std::string("<cpus>") : format_cpu_list(exposed);
    out.push_back(finding("irqbalance", "host", Level::warn,
                          "running: it may move NIC and other interrupts onto the hot cpus" +
                              (exposed.empty() ? std::string() : " (" + l + " not banned)"),
                          "set IRQBALANCE_BANNED_CPULIST=" + l +
                              " in /etc/default/irqbalance and `systemctl restart irqbalance`, or "
                              "`systemctl disable --now irqbalance` and pin IRQs by hand"));
  }
  return out;
}

std::vector<Finding> check_tsc(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  bool tsc = false, constant = false, nonstop = false, cpuid = false;
  std::istringstream in(fs.text("proc/cpuinfo").value_or(""));
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    found = true;
    std::istringstream w(line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1));
    std::string f;
    while (w >> f) {
      tsc |= f == "tsc";
      constant |= f == "constant_tsc";
      nonstop |= f == "nonstop_tsc";
    }
    break;
  }
  if (fs.real()) cpuid = read_tsc_flags("/").cpuid_invariant;  // CPUID speaks only for this host
  if (!found && !cpuid) {
    out.push_back(finding("tsc", "host", Level::warn,
                          "no cpu flags in " + fs.path("proc/cpuinfo") + ": TSC invariance unknown"));
    return out;
  }
  if ((constant && nonstop) || cpuid) {
    std::string src = fs.line("sys/devices/system/clocksource/clocksource0/current_clocksource").value_or("");
    out.push_back(finding("tsc", "host", Level::ok,
                          std::string("invariant TSC (") + (cpuid ? "CPUID" : "constant_tsc nonstop_tsc") +
                              "): latency stamps use RDTSC" +
                              (src.empty() ? "" : "; kernel clocksource " + src)));
  } else {
    // The fallback's cost is the kernel clocksource's: tsc and kvm-clock are read in the vDSO
    // (tens of ns); hpet and acpi_pm make every read a system call and a device-register read
    // (microseconds in a VM: 3.6 us in a QEMU TCG guest), paid by every stamped tick.
    const std::string src =
        fs.line("sys/devices/system/clocksource/clocksource0/current_clocksource").value_or("");
    const bool vdso = src.empty() || src == "tsc" || src == "kvm-clock";
    const std::string cost =
        src.empty() ? "tens of ns per stamp"
        : vdso      ? "kernel clocksource " + src + ": tens of ns per stamp"
                    : "kernel clocksource " + src +
                      ": every stamp is a system call, microseconds each, on the publish and poll paths";
    out.push_back(finding(
        "tsc", "host", Level::warn,
        std::string(tsc ? "TSC present but not reported invariant (" : "no TSC (") +
            (constant ? "constant_tsc" : "no constant_tsc") + ", " + (nonstop ? "nonstop_tsc" : "no nonstop_tsc") +
            "): tickrail's clock falls back to CLOCK_MONOTONIC_RAW (" + cost + ")",
        "in a VM: expose it (`-cpu host,+invtsc` for QEMU/KVM); if the host's TSC is known stable "
        "(a QEMU TCG guest's RDTSC reads the host's counter), TICKRAIL_CLOCK=tsc"));
  }
  return out;
}

std::vector<Finding> check_huge_pages(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const auto thp = fs.line("sys/kernel/mm/transparent_hugepage/enabled");
  if (!thp) {
    out.push_back(finding("thp", "host", Level::info,
                          "no transparent huge pages (kernel without THP): rings use 4 KiB pages"));
  } else {
    const std::size_t a = thp->find('['), b = thp->find(']');
    const std::string mode = a != std::string::npos && b > a ? thp->substr(a + 1, b - a - 1) : *thp;
    if (mode == "madvise") {
      out.push_back(finding("thp", "host", Level::ok,
                            "transparent huge pages: madvise (rings ask for them; nothing else is compacted)"));
    } else if (mode == "always") {
      out.push_back(finding("thp", "host", Level::warn,
                            "transparent huge pages: always: khugepaged and compaction may stall any "
                            "process's page faults",
                            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"));
    } else if (mode == "never") {
      out.push_back(finding("thp", "host", Level::info,
                            "transparent huge pages: never: large rings take more TLB misses",
                            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"));
    } else {
      out.push_back(finding("thp", "host", Level::warn, "transparent huge pages: unreadable mode '" + *thp + "'"));
    }
  }
  std::istringstream in(fs.text("proc/meminfo").value_or(""));
  std::string line;
  std::optional<std::uint64_t> total, free_pages, size_kb;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string key;
    std::uint64_t v = 0;
    if (!(w >> key >> v)) continue;
    if (key == "HugePages_Total:") total = v;
    if (key == "HugePages_Free:") free_pages = v;
    if (key == "Hugepagesize:") size_kb = v;
  }
  if (!total) {
    out.push_back(finding("hugepages", "host", Level::info,
                          "no HugePages_Total in " + fs.path("proc/meminfo")));
  } else if (*total == 0) {
    out.push_back(finding("hugepages", "host", Level::info,
                          "no reserved huge pages: huge-page rings fall back to transparent huge pages",
                          "sysctl -w vm.nr_hugepages=<pages>  (e.g. 512 x 2 MiB = 1 GiB)"));
  } else {
    out.push_back(finding("hugepages", "host", Level::ok,
                          std::to_string(*total) + " reserved huge pages of " +
                              bytes_text(size_kb.value_or(0) * 1024) + ", " +
                              std::to_string(free_pages.value_or(0)) + " free"));
  }
  return out;
}

std::vector<Finding> check_max_map_count(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const auto v = fs.line("proc/sys/vm/max_map_count");
  const auto n = v ? to_u64(*v) : std::nullopt;
  if (!n) {
    out.push_back(finding("vm.max_map_count", "host", Level::warn,
                          "cannot read " + fs.path("proc/sys/vm/max_map_count")));
  } else if (*n < 65530) {
    out.push_back(finding("vm.max_map_count", "host", Level::warn,
                          std::to_string(*n) + ", below the kernel default 65530: many channels and "
                          "registered regions may run out of mappings",
                          "sysctl -w vm.max_map_count=262144"));
  } else {
    out.push_back(finding("vm.max_map_count", "host", Level::ok, std::to_string(*n)));
  }
  return out;
}

std::vector<Finding> check_shm_memory(const Options& o) {
  std::vector<Finding> out;
  if (!o.publisher || o.publisher->transport != TransportKind::shm) return out;
  const HostFs fs(o.root);
  const PublisherConfig& p = *o.publisher;
  // The rings are memfds reserved at start (not files in shm_dir): they need available memory.
  const std::uint64_t need = std::uint64_t{p.max_subscribers} * p.ring_capacity * kSlot;
  const std::string what = "the shm publisher reserves " + bytes_text(need) + " at start (" +
                           std::to_string(p.max_subscribers) + " rings of " +
                           std::to_string(p.ring_capacity) + " slots)";
  std::optional<std::uint64_t> avail;
  std::istringstream in(fs.text("proc/meminfo").value_or(""));
  for (std::string key, unit; in >> key;) {
    std::uint64_t kb = 0;
    if (key == "MemAvailable:" && (in >> kb)) avail = kb * 1024;
    std::getline(in, unit);
  }
  if (!avail) {
    out.push_back(finding("shm.memory", "host", Level::warn,
                          what + "; cannot read MemAvailable from " + fs.path("proc/meminfo")));
  } else if (*avail < need) {
    out.push_back(finding("shm.memory", "host", Level::fail,
                          what + ", but only " + bytes_text(*avail) + " is available: it will fail",
                          "lower ring_capacity or max_subscribers"));
  } else {
    out.push_back(finding("shm.memory", "host", Level::ok, what + "; " + bytes_text(*avail) + " available"));
  }
  // The channel's socket lives in shm_dir.
  struct stat st {};
  const std::string dir = fs.path(p.shm_dir);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    out.push_back(finding("shm.dir", "host", Level::fail,
                          "shm_dir " + p.shm_dir + " is not a directory: the channel socket cannot be made",
                          "set shm_dir to an existing directory (default /dev/shm)"));
  } else if (p.shm_dir.size() + 10 + p.channel.size() >= 108) {
    out.push_back(finding("shm.dir", "host", Level::fail,
                          "shm_dir " + p.shm_dir + ": the channel socket's path is longer than the "
                          "107 bytes a UNIX socket name may have", "use a shorter shm_dir or channel"));
  } else {
    out.push_back(finding("shm.dir", "host", Level::ok, "shm_dir " + p.shm_dir + " is a directory"));
  }
  return out;
}

}  // namespace tickrail::doctor
