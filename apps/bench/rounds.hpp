// The pieces every tickrail-bench round uses: two pinned threads, a spin to a TSC deadline, and
// the median of TSC-stepped samples.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/idle.hpp"

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

inline void spin_until(std::uint64_t t) {
  while (Clock::now() < t) cpu_relax();
}

// The median of samples that come in steps (a virtual TSC may advance 20 cycles at a time, 10 ns
// here): the median step, interpolated within it by how many samples fall below and on it, as
// for grouped data. The step's phase against the timed events is random, so this resolves
// differences finer than a step, which a plain median would round to a whole step. Sorts `v`.
double median_of(std::vector<std::uint64_t>& v);

}  // namespace tickrail::bench
