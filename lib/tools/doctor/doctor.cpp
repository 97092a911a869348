// The doctor's frame: the table of checks, running them, config loading, renderings.
#include "tickrail/tools/doctor.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "tickrail/tools/config_file.hpp"
#include "tickrail/error.hpp"

namespace tickrail::doctor {

namespace {

std::vector<Finding> check_config(const Options& o) {
  std::vector<Finding> out;
  for (const std::string& e : o.config_errors) {
    out.push_back({"config", o.config_path.empty() ? "config" : o.config_path, Level::fail, e,
                   "correct the file (configs/*.toml are commented examples)"});
  }
  if (out.empty() && !o.config_path.empty()) {
    std::string what = "read";
    if (o.publisher) what += std::string("; publisher: ") + to_string(o.publisher->transport);
    if (o.subscriber) what += std::string("; subscriber: ") + to_string(o.subscriber->transport);
    out.push_back({"config", o.config_path, Level::ok, what, ""});
  }
  return out;
}

std::vector<Finding> rdma_all(const Options& o) {
  std::vector<Finding> out = check_rdma_devices(o);
  for (auto* f : {&check_rdma_ports, &check_gids, &check_mtu}) {
    std::vector<Finding> more = f(o);
    out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return out;
}

std::vector<Finding> memory_all(const Options& o) {
  std::vector<Finding> out = check_huge_pages(o);
  for (auto* f : {&check_max_map_count, &check_shm_memory}) {
    std::vector<Finding> more = f(o);
    out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return out;
}

constexpr Check kChecks[] = {
    {"config", "configuration file", &check_config},
    {"rdma", "RDMA devices, ports, GIDs, MTU", &rdma_all},
    {"qos", "RoCE PFC/ECN (information)", &check_roce_qos},
    {"memlock", "locked-memory limit", &check_locked_memory},
    {"cpu", "hot cores: isolation, nohz_full, rcu_nocbs, governor, SMT, NUMA", &check_cpus},
    {"threads", "tickrail's background threads off the hot cores", &check_threads},
    {"irqbalance", "irqbalance", &check_irqbalance},
    {"tsc", "invariant TSC", &check_tsc},
    {"memory", "huge pages, vm.max_map_count, shm ring memory", &memory_all},
};

const char* color_of(Level l) {
  switch (l) {
    case Level::ok: return "\033[32m";
    case Level::info: return "\033[36m";
    case Level::warn: return "\033[33m";
    case Level::fail: return "\033[31;1m";
  }
  return "";
}

}  // namespace

const char* to_string(Level l) noexcept {
  switch (l) {
    case Level::ok: return "OK";
    case Level::info: return "INFO";
    case Level::warn: return "WARN";
    case Level::fail: return "FAIL";
  }
  return "?";
}

std::span<const Check> checks() noexcept { return kChecks; }

std::size_t Report::count(Level l) const noexcept {
  return static_cast<std::size_t>(
      std::count_if(findings.begin(), findings.end(), [&](const Finding& f) { return f.level == l; }));
}

Report run(const Options& o, std::span<const std::string> only) {
  for (const std::string& name : only) {
    if (std::none_of(std::begin(kChecks), std::end(kChecks),
                     [&](const Check& c) { return name == c.name; })) {
      std::string known;
      for (const Check& c : kChecks) known += (known.empty() ? "" : ", ") + std::string(c.name);
      throw Error(Errc::invalid_argument, "unknown check '" + name + "' (checks: " + known + ")");
    }
  }
  Report r;
  for (const Check& c : kChecks) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    std::vector<Finding> f = c.run(o);
    r.findings.insert(r.findings.end(), std::make_move_iterator(f.begin()),
                      std::make_move_iterator(f.end()));
  }
  return r;
}

namespace {

// One file of load_config(), read over `pc` and `sc` as the programs read their -c files.
void load_one(const std::string& path, Options& o, PublisherConfig& pc, SubscriberConfig& sc,
              const std::function<void(ConfigFile&)>& read_programs) {
  const std::size_t errors_before = o.config_errors.size();
  ConfigFile file(path);
  // A file for one side only ([publisher] or [subscriber]) is checked for that side.
  const bool has_pub = file.section("publisher").present();
  const bool has_sub = file.section("subscriber").present();
  if (has_pub || !has_sub) {
    try {
      read_publisher_config(file, pc);
      o.publisher = pc;
    } catch (const Error& e) {
      o.config_errors.push_back(e.what());
    }
  }
  if (has_sub || !has_pub) {
    try {
      read_subscriber_config(file, sc);
      o.subscriber = sc;
    } catch (const Error& e) {
      o.config_errors.push_back(e.what());
    }
  }
  // The programs' own sections name the cores their hot threads use.
  for (const char* program : {"replay", "jitter"}) {
    ConfigFile::Section s = file.section(program);
    int cpu = -1;
    s.get("cpu", cpu);
    if (cpu >= 0 && std::find(o.cpus.begin(), o.cpus.end(), cpu) == o.cpus.end()) o.cpus.push_back(cpu);
  }
  if (o.config_errors.size() != errors_before) return;
  // A misspelt key would otherwise be checked as its default: name it (file:line: key).
  if (read_programs) {
    read_programs(file);
    file.check_all_read();
  } else {
    file.check_all_read({"replay", "jitter", "record", "failover"});
  }
}

}  // namespace

void load_config(const std::vector<std::string>& paths, Options& o,
                 const std::function<void(ConfigFile&)>& read_programs) {
  PublisherConfig pc;
  SubscriberConfig sc;
  for (const std::string& path : paths) {
    o.config_path += (o.config_path.empty() ? "" : ", ") + path;
    try {
      load_one(path, o, pc, sc, read_programs);
    } catch (const Error& e) {
      o.config_errors.push_back(e.what());
    }
  }
  std::sort(o.cpus.begin(), o.cpus.end());
}

void load_config(const std::string& path, Options& o) { load_config(std::vector<std::string>{path}, o); }

std::string format_text(const Report& r, bool color) {
  std::ostringstream out;
  std::size_t w_check = 5, w_subj = 4;
  for (const Finding& f : r.findings) {
    w_check = std::max(w_check, f.check.size());
    w_subj = std::max(w_subj, f.subject.size());
  }
  w_subj = std::min<std::size_t>(w_subj, 24);
  for (const Finding& f : r.findings) {
    const std::string level = to_string(f.level);
    if (color) out << color_of(f.level);
    out << level << std::string(5 - level.size(), ' ');
    if (color) out << "\033[0m";
    out << f.check << std::string(w_check - f.check.size() + 2, ' ') << f.subject
        << std::string(f.subject.size() < w_subj ? w_subj - f.subject.size() + 2 : 2, ' ')
        << f.message << "\n";
    if (!f.fix.empty()) out << "     fix: " << f.fix << "\n";
  }
  out << r.count(Level::ok) << " ok, " << r.count(Level::info) << " info, "
      << r.count(Level::warn) << " warn, " << r.count(Level::fail) << " fail\n";
  return out.str();
}

std::string format_json(const Report& r, int indent) {
  nlohmann::json j;
  nlohmann::json fs = nlohmann::json::array();
  for (const Finding& f : r.findings) {
    fs.push_back({{"check", f.check}, {"subject", f.subject}, {"level", to_string(f.level)},
                  {"message", f.message}, {"fix", f.fix}});
  }
  j["findings"] = std::move(fs);
  j["summary"] = {{"ok", r.count(Level::ok)}, {"info", r.count(Level::info)},
                  {"warn", r.count(Level::warn)}, {"fail", r.count(Level::fail)}};
  j["passed"] = r.passed();
  return j.dump(indent);
}

}  // namespace tickrail::doctor
