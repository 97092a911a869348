#include "core/thread.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <memory>

#include "tickrail/affinity.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"

namespace tickrail::detail {
namespace {

bool has(const std::vector<int>& v, int c) { return std::binary_search(v.begin(), v.end(), c); }

// The process-wide threads and the placement they follow: the last endpoint's.
struct ProcessThreads {
  std::mutex mutex;
  std::vector<pthread_t> threads;
  Placement placement;

  static ProcessThreads& instance() {
    // Leaked: the log writer leaves during static destruction.
    static ProcessThreads* p = [] {
      auto* t = new ProcessThreads;
      // A forked child has none of its parent's threads, and must find the lock free.
      pthread_atfork([] { instance().mutex.lock(); }, [] { instance().mutex.unlock(); },
                     [] {
                       instance().threads.clear();
                       instance().mutex.unlock();
                     });
      return t;
    }();
    return *p;
  }

  void place_all(const Placement& where) {
    std::lock_guard lock(mutex);
    placement = where;
    for (pthread_t t : threads) {
      int err = 0;
      (void)where.apply(t, err);  // a thread that cannot move keeps its mask
    }
  }
};

Placement explicit_placement(std::string_view text, std::string_view who) {
  const auto bad = [&](const std::string& why) {
    return Error(Errc::config_error, std::string(who) + ": housekeeping_cpus: '" +
                                         std::string(text) + "': " + why);
  };
  std::vector<int> cpus;
  try {
    cpus = parse_cpu_list(text);
  } catch (const Error&) {
    throw bad("not a cpu list like 2-3,6");
  }
  const std::vector<int> process = process_cpus();
  std::vector<int> online;
  try {
    online = online_cpus();
  } catch (const Error&) {
    // Unreadable sysfs: every cpu outside the process's set is reported as not allowed.
  }
  for (int c : cpus) {
    if (has(process, c)) continue;
    const std::string may = "this process may use " + format_cpu_list(process);
    if (!online.empty() && !has(online, c)) {
      throw bad("cpu " + std::to_string(c) + " does not exist or is offline (" + may + ")");
    }
    throw bad("cpu " + std::to_string(c) + " is outside this process's cpus (" + may +
              "; see taskset and cgroup cpuset)");
  }
  return Placement(std::move(cpus));
}

}  // namespace

std::vector<int> cpus_off(const std::vector<int>& process, const std::vector<int>& mine) {
  std::vector<int> rest;
  for (int c : process) {
    if (!has(mine, c)) rest.push_back(c);
  }
  const bool subset = std::all_of(mine.begin(), mine.end(), [&](int c) { return has(process, c); });
  if (!subset || mine.size() >= process.size()) return {};
  return rest;
}

Placement Placement::for_endpoint(std::string_view housekeeping_cpus, std::string_view who) {
  Placement where;
  const std::vector<int> mine = allowed_cpus();
  const std::vector<int> rest = cpus_off(process_cpus(), mine);
  const bool pinned = !rest.empty() || mine.size() == 1;
  if (housekeeping_cpus.find_first_not_of(" \t\n") != std::string_view::npos) {
    where = explicit_placement(housekeeping_cpus, who);
    const auto hot = std::find_if(mine.begin(), mine.end(), [&](int c) { return has(where.cpus_, c); });
    if (pinned && hot != mine.end()) {
      logger()->warn("{}: housekeeping_cpus '{}' includes cpu {}, where the thread creating it is "
                     "pinned: background threads will wake up beside it",
                     who, housekeeping_cpus, *hot);
    }
  } else {
    where = Placement(rest);
    static std::atomic<bool> warned{false};
    if (pinned && rest.empty() && !warned.exchange(true)) {
      logger()->warn("{}: the thread creating it is pinned to cpu {} and this process may use no "
                     "other cpu: background threads share it (set housekeeping_cpus, or give the "
                     "process more cpus)",
                     who, mine.front());
    }
  }
  ProcessThreads::instance().place_all(where);
  return where;
}

bool Placement::apply(pthread_t thread, int& err) const noexcept {
  if (cpus_.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus_) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  err = pthread_setaffinity_np(thread, sizeof set, &set);
  return err == 0;
}

void name_current_thread(const char* name) noexcept {
  char cut[16] = {};
  std::strncpy(cut, name, sizeof cut - 1);
  (void)pthread_setname_np(pthread_self(), cut);
}

std::jthread start_thread(const char* name, const Placement& where,
                          std::function<void(std::stop_token)> body) {
  // Shared: the thread may still be inside set_value() when this function has returned.
  auto started = std::make_shared<std::promise<void>>();
  std::future<void> ready = started->get_future();
  std::jthread t([started, name, where, run = std::move(body)](std::stop_token st) {
    int err = 0;
    if (!where.apply(pthread_self(), err)) {
      logger()->warn("thread {}: cannot move to cpus {}: {}; it keeps its inherited cpus", name,
                     format_cpu_list(where.cpus()), std::strerror(err));
    }
    name_current_thread(name);  // named once placed: a thread that shows its name is where it runs
    started->set_value();
    run(st);
  });
  ready.wait();
  return t;
}

ProcessThread::ProcessThread(const char* name) noexcept { enter_process_thread(name); }
ProcessThread::~ProcessThread() { leave_process_thread(); }

void enter_process_thread(const char* name) noexcept {
  try {
    ProcessThreads& p = ProcessThreads::instance();
    std::lock_guard lock(p.mutex);
    int err = 0;
    (void)p.placement.apply(pthread_self(), err);
    p.threads.push_back(pthread_self());
  } catch (...) {
    // Out of memory: the thread runs unregistered, where it was started.
  }
  name_current_thread(name);  // named once placed, as start_thread does
}

void leave_process_thread() noexcept {
  ProcessThreads& p = ProcessThreads::instance();
  std::lock_guard lock(p.mutex);
  std::erase_if(p.threads, [](pthread_t t) { return pthread_equal(t, pthread_self()) != 0; });
}

}  // namespace tickrail::detail
