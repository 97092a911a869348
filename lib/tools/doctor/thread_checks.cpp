// threads.placement: where a configuration puts tickrail's background threads against the cores
// its hot threads use (docs/apps.md, "Threads").
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "tools/doctor/host_fs.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/error.hpp"

namespace tickrail::doctor {

using detail::finding;
using detail::HostFs;

namespace {

std::vector<int> cpus_of(const std::optional<std::string>& text) {
  try {
    return text ? parse_cpu_list(*text) : std::vector<int>{};
  } catch (const Error&) {
    return {};
  }
}

std::vector<int> minus(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  for (int c : a) {
    if (std::find(b.begin(), b.end(), c) == b.end()) out.push_back(c);
  }
  return out;
}

std::vector<int> common(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  for (int c : a) {
    if (std::find(b.begin(), b.end(), c) != b.end()) out.push_back(c);
  }
  return out;
}

// A housekeeping_cpus that is set, against the hot cpus.
Finding judge_given(const std::string& key, const std::string& text, const std::vector<int>& hot,
                    const std::vector<int>& online, const std::string& suggestion) {
  const std::vector<int> cpus = cpus_of(text);  // its form was checked when the file loaded
  const std::vector<int> absent = online.empty() ? std::vector<int>{} : minus(cpus, online);
  if (!absent.empty()) {
    return finding("threads.placement", key, Level::fail,
                   "'" + text + "' names cpu " + format_cpu_list(absent) +
                       ", which is not online (online: " + format_cpu_list(online) +
                       "): creating the endpoint fails",
                   suggestion.empty() ? "name online cpus" : suggestion);
  }
  const std::vector<int> both = common(cpus, hot);
  if (!both.empty()) {
    return finding("threads.placement", key, Level::warn,
                   "'" + text + "' includes hot cpu " + format_cpu_list(both) +
                       ": background threads wake up beside a busy-polling thread",
                   suggestion.empty() ? "give the host a cpu for housekeeping" : suggestion);
  }
  return finding("threads.placement", key, Level::ok,
                 "background threads on " + format_cpu_list(cpus) + ", apart from the hot cpus");
}

// A housekeeping_cpus left to the library's default, against the hot cpus.
Finding judge_default(const std::string& key, const std::vector<int>& hot, const std::vector<int>& rest,
                      const std::string& suggestion) {
  if (hot.empty()) {
    return finding("threads.placement", key, Level::info,
                   "not set: background threads run off the creating thread's core when it is "
                   "pinned (name the hot cores with --cpus to check them)");
  }
  if (rest.empty()) {
    return finding("threads.placement", key, Level::warn,
                   "not set, and the hot cpus " + format_cpu_list(hot) +
                       " are every online cpu: background threads share a hot core",
                   "leave a cpu for housekeeping (fewer hot threads, or more cpus)");
  }
  if (hot.size() > 1) {
    // The default keeps them off one process's hot cpus only, not another process's.
    return finding("threads.placement", key, Level::info,
                   "not set: each process keeps its background threads off its own hot cpus "
                   "only, so they may land on another of the hot cpus " + format_cpu_list(hot),
                   suggestion);
  }
  return finding("threads.placement", key, Level::ok,
                 "not set: background threads run on " + format_cpu_list(rest) +
                     ", off the pinned thread's cpu " + format_cpu_list(hot));
}

// One side's housekeeping_cpus against the hot cpus.
Finding judge(const std::string& subject, const std::string& text, const std::vector<int>& hot,
              const std::vector<int>& online) {
  const std::string key = subject.empty() ? "housekeeping_cpus" : subject + " housekeeping_cpus";
  const std::vector<int> rest = minus(online, hot);
  const std::string suggestion =
      rest.empty() ? std::string() : "set housekeeping_cpus = \"" + format_cpu_list(rest) + "\"";
  const Finding f = text.empty() ? judge_default(key, hot, rest, suggestion)
                                 : judge_given(key, text, hot, online, suggestion);
  if (online.size() == 1 && f.level != Level::fail) {
    // Whatever the configuration says: the one cpu is the hot thread's too.
    return finding("threads.placement", key, Level::warn,
                   "this host has one online cpu (" + format_cpu_list(online) +
                       "): background threads wake up beside the publishing or polling thread",
                   "give the host a second cpu for housekeeping");
  }
  return f;
}

}  // namespace

std::vector<Finding> check_threads(const Options& o) {
  const HostFs fs(o.root);
  const std::vector<int> online = cpus_of(fs.line("sys/devices/system/cpu/online"));
  std::vector<int> hot = o.cpus;
  std::sort(hot.begin(), hot.end());
  std::vector<Finding> out;
  if (o.publisher) out.push_back(judge("publisher", o.publisher->housekeeping_cpus, hot, online));
  if (o.subscriber) out.push_back(judge("subscriber", o.subscriber->housekeeping_cpus, hot, online));
  if (!o.publisher && !o.subscriber) out.push_back(judge("", "", hot, online));
  return out;
}

}  // namespace tickrail::doctor
