#include "core/thread.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

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

std::vector<int> minus(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  for (int c : a) {
    if (!has(b, c)) out.push_back(c);
  }
  return out;
}

void place(const std::vector<pthread_t>& threads, const Placement& where) noexcept {
  for (pthread_t t : threads) {
    int err = 0;
    (void)where.apply(t, err);  // a thread that cannot move keeps its mask
  }
}

// The process's hot cpus and the threads that keep off them: the process-wide threads, at the
// last endpoint's placement, and the endpoints' threads placed by default.
struct ProcessThreads {
  std::mutex mutex;
  std::vector<pthread_t> threads;    // tr-stats, tr-log
  std::vector<pthread_t> defaulted;  // endpoints' threads at a default placement
  std::vector<int> pinned;           // cpus of pinned threads that created endpoints: for good
  std::vector<int> claimed;          // cpus of live publishing threads, once per thread
  std::vector<int> hot;              // pinned and claimed, sorted
  Placement placement;               // the process-wide threads'
  Placement off_hot;                 // the process's cpus off `hot`; empty when none is left

  static ProcessThreads& instance() {
    // Leaked: the log writer leaves during static destruction.
    static ProcessThreads* p = [] {
      auto* t = new ProcessThreads;
      // A forked child has none of its parent's threads, and must find the lock free.
      pthread_atfork([] { instance().mutex.lock(); }, [] { instance().mutex.unlock(); },
                     [] {
                       instance().threads.clear();
                       instance().defaulted.clear();
                       instance().mutex.unlock();
                     });
      return t;
    }();
    return *p;
  }

  // Under `mutex`. Adds `cpus` to the pinned ones, or claims them for a publishing thread.
  void add_hot(const std::vector<int>& cpus, const std::vector<int>& process, bool for_good) {
    for (int c : cpus) {
      if (!for_good) claimed.push_back(c);
      else if (!has(pinned, c)) pinned.insert(std::upper_bound(pinned.begin(), pinned.end(), c), c);
    }
    refresh(process);
  }
  // Under `mutex`. A publishing thread's cpus, claimed by add_hot(), are no longer hot.
  void drop_hot(const std::vector<int>& cpus, const std::vector<int>& process) {
    for (int c : cpus) {
      const auto it = std::find(claimed.begin(), claimed.end(), c);
      if (it != claimed.end()) claimed.erase(it);
    }
    refresh(process);
  }

  // Under `mutex`. When more cpus are hot, the default-placed and process-wide threads move off
  // them (while some cpu is left); when fewer, they stay where they are.
  void refresh(const std::vector<int>& process) {
    std::vector<int> now = pinned;
    for (int c : claimed) {
      if (!has(now, c)) now.insert(std::upper_bound(now.begin(), now.end(), c), c);
    }
    const bool more = std::any_of(now.begin(), now.end(), [&](int c) { return !has(hot, c); });
    hot = std::move(now);
    off_hot = Placement(minus(process, hot), true);
    if (!more || off_hot.cpus().empty()) return;
    place(defaulted, off_hot);
    placement = Placement(minus(placement.cpus().empty() ? process : placement.cpus(), hot));
    if (placement.cpus().empty()) placement = off_hot;
    place(threads, placement);
  }

  // Under `mutex`. The process-wide threads follow the new endpoint's placement, off the hot cpus.
  void follow(const Placement& where) {
    const std::vector<int> cool = minus(where.cpus(), hot);
    placement = cool.empty() ? where : Placement(cool);
    place(threads, placement);
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
  if (const std::string why = unusable_cpus(cpus); !why.empty()) throw bad(why);
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

std::vector<int> default_cpus(const std::vector<int>& process, const std::vector<int>& hot,
                              const std::vector<int>& rest) {
  if (hot.empty()) return rest;
  std::vector<int> off = minus(process, hot);
  return off.empty() ? rest : off;
}

HotCpus::HotCpus(std::vector<int> cpus) : cpus_(std::move(cpus)) {
  const std::vector<int> process = process_cpus();
  std::erase_if(cpus_, [&](int c) { return !has(process, c); });
  std::vector<int> hot;
  {
    ProcessThreads& p = ProcessThreads::instance();
    std::lock_guard lock(p.mutex);
    p.add_hot(cpus_, process, false);
    if (p.off_hot.cpus().empty()) hot = p.hot;
  }
  if (!cpus_.empty() && !hot.empty()) {
    logger()->warn("a publishing thread on cpu {}: every cpu of this process is now hot ({}): "
                   "background threads stay where they are, beside some (set housekeeping_cpus)",
                   format_cpu_list(cpus_), format_cpu_list(hot));
  }
}

HotCpus::~HotCpus() {
  ProcessThreads& p = ProcessThreads::instance();
  std::lock_guard lock(p.mutex);
  p.drop_hot(cpus_, process_cpus());
}

namespace {
// What is wrong with an endpoint's placement, said once per process for each kind.
void warn_crowded(std::string_view who, std::string_view given, const Placement& where,
                  const std::vector<int>& mine, bool pinned, const std::vector<int>& hot) {
  if (!given.empty()) {
    const auto beside = std::find_if(mine.begin(), mine.end(), [&](int c) { return has(where.cpus(), c); });
    if (pinned && beside != mine.end()) {
      logger()->warn("{}: housekeeping_cpus '{}' includes cpu {}, where the thread creating it is "
                     "pinned: background threads will wake up beside it",
                     who, given, *beside);
    }
    return;
  }
  static std::atomic<bool> warned_alone{false};
  static std::atomic<bool> warned_hot{false};
  if (pinned && where.cpus().empty() && !warned_alone.exchange(true)) {
    logger()->warn("{}: the thread creating it is pinned to cpu {} and this process may use no "
                   "other cpu: background threads share it (set housekeeping_cpus, or give the "
                   "process more cpus)",
                   who, mine.front());
  } else if (!hot.empty() && std::all_of(where.cpus().begin(), where.cpus().end(),
                                         [&](int c) { return has(hot, c); }) &&
             !where.cpus().empty() && !warned_hot.exchange(true)) {
    logger()->warn("{}: every cpu of this process is hot ({}: pinned threads): background "
                   "threads run on {}, beside some of them (set housekeeping_cpus)",
                   who, format_cpu_list(hot), format_cpu_list(where.cpus()));
  }
}
}  // namespace

Placement Placement::for_endpoint(std::string_view housekeeping_cpus, std::string_view who) {
  const std::vector<int> process = process_cpus();
  const std::vector<int> mine = allowed_cpus();
  const std::vector<int> rest = cpus_off(process, mine);
  const bool pinned = !rest.empty() || mine.size() == 1;
  const bool given = housekeeping_cpus.find_first_not_of(" \t\n") != std::string_view::npos;
  const Placement chosen = given ? explicit_placement(housekeeping_cpus, who) : Placement();
  Placement where;
  std::vector<int> hot;
  {
    ProcessThreads& p = ProcessThreads::instance();
    std::lock_guard lock(p.mutex);  // nothing logged under it: the log writer takes it too
    if (!rest.empty()) p.add_hot(mine, process, true);
    where = given ? chosen : Placement(default_cpus(process, p.hot, rest), true);
    p.follow(where);
    hot = p.hot;
  }
  warn_crowded(who, given ? housekeeping_cpus : std::string_view(), where, mine, pinned, hot);
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

StopSignal::StopSignal(const std::stop_token& stop)
    : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  on_stop_.emplace(stop, Notify{fd_});
}

StopSignal::~StopSignal() {
  on_stop_.reset();  // waits for a callback running on the stopping thread
  if (fd_ >= 0) ::close(fd_);
}

void StopSignal::Notify::operator()() const noexcept {
  if (fd < 0) return;
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);  // a full counter is still readable
}

void name_current_thread(const char* name) noexcept {
  char cut[16] = {};
  std::strncpy(cut, name, sizeof cut - 1);
  (void)pthread_setname_np(pthread_self(), cut);
}

namespace {
// Registers the calling thread, placed by default, for as long as it lives: it keeps off the cpus
// that become hot after it started (HotCpus).
class DefaultPlaced {
 public:
  explicit DefaultPlaced(const Placement& where) noexcept : on_(where.by_default()) {
    if (!on_) return;
    try {
      ProcessThreads& p = ProcessThreads::instance();
      std::lock_guard lock(p.mutex);
      int err = 0;
      if (!p.off_hot.cpus().empty()) (void)p.off_hot.apply(pthread_self(), err);  // hot since
      p.defaulted.push_back(pthread_self());
    } catch (...) {
      on_ = false;  // out of memory: it stays where it was placed
    }
  }
  ~DefaultPlaced() {
    if (!on_) return;
    ProcessThreads& p = ProcessThreads::instance();
    std::lock_guard lock(p.mutex);
    std::erase_if(p.defaulted, [](pthread_t t) { return pthread_equal(t, pthread_self()) != 0; });
  }
  DefaultPlaced(const DefaultPlaced&) = delete;
  DefaultPlaced& operator=(const DefaultPlaced&) = delete;

 private:
  bool on_;
};
}  // namespace

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
    const DefaultPlaced registered(where);
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
