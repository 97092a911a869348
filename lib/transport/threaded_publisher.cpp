#include "tickrail/threaded_publisher.hpp"

#include <boost/lockfree/spsc_queue.hpp>

#include <algorithm>

#include "tickrail/affinity.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "core/thread.hpp"

namespace tickrail {

namespace {
bool has(const std::vector<int>& v, int c) { return std::find(v.begin(), v.end(), c) != v.end(); }

}  // namespace

struct ThreadedPublisher::Producer::Queue {
  explicit Queue(std::size_t capacity) : q(capacity) {}
  boost::lockfree::spsc_queue<Tick> q;
};

ThreadedPublisher::Producer::Producer(std::unique_ptr<Queue> q) : queue_(std::move(q)) {}
ThreadedPublisher::Producer::~Producer() = default;
ThreadedPublisher::Producer::Producer(Producer&&) noexcept = default;

bool ThreadedPublisher::Producer::offer(const Tick& tick) noexcept { return queue_->q.push(tick); }

std::size_t ThreadedPublisher::Producer::offer(std::span<const Tick> ticks) noexcept {
  return queue_->q.push(ticks.data(), ticks.size());
}

ThreadedPublisher::ThreadedPublisher(const PublisherConfig& config,
                                     const ThreadedPublisherOptions& options)
    : publisher_(config), options_(options) {
  if (options_.queue_capacity < 2 || options_.batch == 0 || options_.max_producers == 0) {
    throw Error(Errc::config_error,
                "threaded publisher: queue_capacity must be >= 2, batch and max_producers >= 1");
  }
  slots_ = std::make_unique<std::atomic<Producer*>[]>(options_.max_producers);
  for (std::size_t i = 0; i < options_.max_producers; ++i) slots_[i].store(nullptr);
  // A hot thread, not a background one: on options_.cpu from its first instruction when that is
  // one of the process's cpus (run() pins it again, and says what is wrong with the cpu), or
  // where the creating thread may run.
  const std::vector<int> process = process_cpus();
  const detail::Placement where = has(process, options_.cpu) ? detail::Placement({options_.cpu})
                                                              : detail::Placement{};
  // Its cpu is hot while it runs: the background threads placed by default, this publisher's
  // among them, move off it.
  auto hot = std::make_shared<const detail::HotCpus>(std::vector<int>{options_.cpu});
  thread_ = detail::start_thread("tr-pub", where, [this, hot](std::stop_token st) { run(st); });
}

ThreadedPublisher::~ThreadedPublisher() {
  stop();
  publisher_.close();
}

ThreadedPublisher::Producer& ThreadedPublisher::add_producer() {
  std::lock_guard lock(producers_mutex_);
  const std::size_t n = n_producers_.load(std::memory_order_relaxed);
  if (n >= options_.max_producers) {
    throw Error(Errc::no_capacity, "threaded publisher: all " +
                                       std::to_string(options_.max_producers) +
                                       " producer queues are taken (raise max_producers)");
  }
  producers_.push_back(std::unique_ptr<Producer>(
      new Producer(std::make_unique<Producer::Queue>(options_.queue_capacity))));
  slots_[n].store(producers_.back().get(), std::memory_order_release);
  n_producers_.store(n + 1, std::memory_order_release);
  return *producers_.back();
}

void ThreadedPublisher::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

ThreadedPublisherCounters ThreadedPublisher::counters() const noexcept {
  return {forwarded_.load(std::memory_order_relaxed),
          back_pressure_waits_.load(std::memory_order_relaxed),
          abandoned_.load(std::memory_order_relaxed)};
}

std::size_t ThreadedPublisher::drain_once(std::vector<Tick>& batch, IdleStrategy& idle,
                                          std::chrono::steady_clock::time_point give_up) noexcept {
  using clock = std::chrono::steady_clock;
  std::size_t work = 0;
  const std::size_t n = n_producers_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    Producer* p = slots_[i].load(std::memory_order_acquire);
    const std::size_t got = p->queue_->q.pop(batch.data(), batch.size());
    std::size_t done = 0;
    while (done < got) {
      const PublishResult r = publisher_.publish(std::span<const Tick>(batch.data() + done, got - done));
      done += r.published;
      if (r.status == PublishStatus::closed) return work + got;  // nothing more can be sent
      if (done < got) {
        back_pressure_waits_.fetch_add(1, std::memory_order_relaxed);
        if (give_up != clock::time_point{} && clock::now() >= give_up) {
          abandoned_.fetch_add(got - done, std::memory_order_relaxed);
          break;  // stopping, and a block subscriber will not make room in time
        }
        idle.idle(0);
      }
    }
    idle.reset();
    forwarded_.fetch_add(done, std::memory_order_relaxed);
    work += got;
  }
  return work;
}

void ThreadedPublisher::run(std::stop_token st) {
  if (options_.cpu >= 0) {
    const PinResult pin = pin_current_thread(options_.cpu);
    if (!pin.ok || !pin.isolated) logger()->warn("threaded publisher: {}", pin.message);
  }
  std::vector<Tick> batch(options_.batch);  // the only allocations, before the loop
  IdleStrategy idle(options_.idle);
  IdleStrategy wait(options_.idle);
  while (!st.stop_requested()) {
    const std::size_t work = drain_once(batch, wait, {});
    if (work == 0) publisher_.service();  // let new subscribers in while idle
    idle.idle(static_cast<int>(work));
  }
  // Drain what producers enqueued before stop(), for a bounded time.
  const auto give_up = std::chrono::steady_clock::now() + options_.drain_timeout;
  while (drain_once(batch, wait, give_up) != 0) {
  }
}

}  // namespace tickrail
