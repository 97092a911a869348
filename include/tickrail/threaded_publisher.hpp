// ThreadedPublisher: for apps whose threads must not touch the transport themselves.
//
// Each producing thread gets its own Producer, a single-producer/single-consumer queue
// (boost::lockfree::spsc_queue) that the publishing thread drains into Publisher::publish in
// batches. Ticks keep their order per producer; producers are interleaved. Sequence numbers are
// assigned when the publishing thread publishes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "tickrail/idle.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/export.hpp"

namespace tickrail {

struct TICKRAIL_API ThreadedPublisherOptions {
  std::size_t queue_capacity = 65536;  // ticks per producer queue
  std::size_t batch = 64;              // ticks drained from one queue at a time
  // Pin the publishing thread (named tr-pub) here; -1: it runs where the creating thread may. A
  // hot thread, never placed with the background ones: while it runs, the process's background
  // threads whose housekeeping_cpus is not set keep off this cpu (docs/apps.md, "Threads").
  int cpu = -1;
  IdleKind idle = IdleKind::busy_spin;
  std::size_t max_producers = 64;
  // At stop(), how long to keep retrying ticks that a block subscriber has no room for.
  std::chrono::milliseconds drain_timeout{1000};
};

struct TICKRAIL_API ThreadedPublisherCounters {
  std::uint64_t forwarded = 0;         // ticks handed to Publisher::publish and accepted
  std::uint64_t back_pressure_waits = 0;
  std::uint64_t abandoned = 0;  // dequeued at stop() but never accepted (drain_timeout)
};

class TICKRAIL_API ThreadedPublisher {
 public:
  class Producer {
   public:
    // Enqueues a tick for publishing; false when this producer's queue is full. Never blocks,
    // allocates or throws. Call from one thread only (the one this producer belongs to).
    [[nodiscard]] bool offer(const Tick& tick) noexcept;
    // Enqueues as many as fit, from the front; returns how many.
    [[nodiscard]] std::size_t offer(std::span<const Tick> ticks) noexcept;

   private:
    friend class ThreadedPublisher;
    struct Queue;
    explicit Producer(std::unique_ptr<Queue> q);
    std::unique_ptr<Queue> queue_;

   public:
    ~Producer();
    Producer(Producer&&) noexcept;
    Producer(const Producer&) = delete;
  };

  // Creates the publisher and starts the publishing thread.
  ThreadedPublisher(const PublisherConfig& config, const ThreadedPublisherOptions& options = {});
  // Drains every queue, then stops the thread and closes the publisher.
  ~ThreadedPublisher();
  ThreadedPublisher(const ThreadedPublisher&) = delete;
  ThreadedPublisher& operator=(const ThreadedPublisher&) = delete;

  // Control plane, any thread: a new producer queue. The reference stays valid for the life of
  // the ThreadedPublisher. Throws Error(no_capacity) past max_producers.
  Producer& add_producer();

  // Stops accepting work once every queue is empty, joins the publishing thread. Idempotent.
  void stop();

  // Counters of the publishing thread (read after stop(), or approximate while running).
  [[nodiscard]] ThreadedPublisherCounters counters() const noexcept;
  // The underlying publisher; only its control-plane calls may be used while running.
  [[nodiscard]] Publisher& publisher() noexcept { return publisher_; }

 private:
  void run(std::stop_token st);
  std::size_t drain_once(std::vector<Tick>& batch, IdleStrategy& idle,
                         std::chrono::steady_clock::time_point give_up) noexcept;

  Publisher publisher_;
  ThreadedPublisherOptions options_;
  std::mutex producers_mutex_;
  std::vector<std::unique_ptr<Producer>> producers_;  // owned; slots published via the array
  std::unique_ptr<std::atomic<Producer*>[]> slots_;
  std::atomic<std::size_t> n_producers_{0};
  std::atomic<std::uint64_t> forwarded_{0};
  std::atomic<std::uint64_t> back_pressure_waits_{0};
  std::atomic<std::uint64_t> abandoned_{0};
  std::jthread thread_;
};

}  // namespace tickrail
