// The pieces every tickrail-bench round uses: two pinned threads, a spin to a TSC deadline, and
// the median of TSC-stepped samples.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::bench {

// Two threads on two pinned cores: the caller (pinned already) runs `send`, a new thread pinned
// to `receiver_cpu` runs `receive`.
template <class Send, class Receive>
void on_two_cores(int receiver_cpu, Send&& send, Receive&& receive) {
  std::atomic<bool> ready{false};
  std::thread r([&] {
    (void)pin_current_thread(receiver_cpu);
    ready.store(true, std::memory_order_release);
    receive();
  });
  while (!ready.load(std::memory_order_acquire)) cpu_relax();
  send();
  r.join();
}

// A channel and its subscriber, in this process, served until active (throws Error naming `what`
// otherwise).
struct Channel {
  Publisher pub;
  Subscriber sub;
  Channel(const PublisherConfig& pc, const std::string& what) : pub(pc), sub(subscriber_for(pc)) {
    (void)pub.wait_subscribers(1, std::chrono::seconds(1));
    if (!sub.wait_active(std::chrono::seconds(5))) {
      throw Error(Errc::timed_out, "the " + what + " never became active");
    }
  }
  static SubscriberConfig subscriber_for(const PublisherConfig& pc) {
    SubscriberConfig sc;
    sc.channel = pc.channel;
    sc.stats = pc.stats;
    return sc;
  }
};

inline void spin_until(std::uint64_t t) {
  while (Clock::now() < t) cpu_relax();
}

// The median of samples that come in steps (a virtual TSC may advance 20 cycles at a time, 10 ns
// here): the median step, interpolated within it by how many samples fall below and on it, as
// for grouped data. The step's phase against the timed events is random, so this resolves
// differences finer than a step, which a plain median would round to a whole step. Sorts `v`.
double median_of(std::vector<std::uint64_t>& v);

}  // namespace tickrail::bench
