// tickrail-bench --snapshot: how long a subscriber with start = snapshot takes to deliver a
// table of N instruments over shared memory.
//
// Timed: from right before the first poll() after wait_active() returned to right after the
// poll() that turned in_snapshot() false: the copy of the table, the check after it, the roll
// forward and the delivery of every entry to an empty handler, 256 ticks per poll at most (as
// tickrail-jitter's default batch). Not timed: constructing the Subscriber (the attach, and the
// allocation of its private copy of the table) and waiting for the publisher to serve it.
#include <atomic>
#include <exception>
#include <thread>
#include <unistd.h>

#include "state_bench.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/state.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::bench {
namespace {

constexpr std::size_t kBatch = 256;

// Entries 0..n-1 of every class: a Quote, a Trade and a Status each (no subscriber yet: the
// table is written all the same).
void fill(Publisher& pub, std::uint32_t n) {
  Tick t{};
  for (std::uint32_t i = 0; i < n; ++i) {
    t.instrument = i;
    for (const TickKind k : {TickKind::Quote, TickKind::Trade, TickKind::Status}) {
      t.kind = k;
      (void)pub.publish(t);
    }
  }
}

void check_active(const Subscriber& sub) {
  if (sub.state() != SubscriberState::active) {
    throw Error(Errc::peer_gone, "the snapshot subscriber is " + std::string(to_string(sub.state())) + ": " +
                                     sub.reason());
  }
}

// One subscriber: attached and activated (setup), then polled through its snapshot (timed).
SnapshotRep take_snapshot(const SubscriberConfig& sc) {
  const Clock& clk = Clock::instance();
  SnapshotRep rep;
  const std::uint64_t attach = Clock::now();
  Subscriber sub(sc);
  if (!sub.wait_active(std::chrono::seconds(5))) {
    throw Error(Errc::timed_out, "a snapshot subscriber never became active");
  }
  std::uint64_t entries = 0;
  auto handler = [&entries](const Tick& t) { entries += (t.flags & kTickFromTable) != 0 ? 1 : 0; };
  const std::uint64_t t0 = Clock::now();
  while (sub.in_snapshot()) {
    const std::size_t got = sub.poll(handler, kBatch);
    ++rep.polls;
    // Only a poll that brought nothing asks why: state() reads the lines the publisher keeps
    // writing and the clock, which after every busy poll would be in the time measured.
    if (got == 0) [[unlikely]] check_active(sub);
  }
  const std::uint64_t t1 = Clock::now();
  check_active(sub);  // a publisher gone during the last polls: no snapshot to report
  rep.setup_us = clk.to_ns(t0 - attach) * 1e-3;
  rep.snapshot_us = clk.to_ns(t1 - t0) * 1e-3;
  rep.entries = entries;
  rep.abandoned = sub.counters().table_abandoned;
  return rep;
}

// Serves the publisher (attaches, detaches) and publishes the mix at `rate` ticks/s until `done`;
// the ticks published.
std::uint64_t serve(Publisher& pub, std::uint32_t instruments, double rate, const std::atomic<bool>& done) {
  TickMix mix(instruments);
  const std::uint64_t gap = rate > 0 ? Clock::instance().ns_to_cycles(1e9 / rate) : 0;
  std::uint64_t next = Clock::now(), published = 0;
  while (!done.load(std::memory_order_acquire)) {
    if (gap == 0 || Clock::now() < next) {
      pub.service();
      cpu_relax();
      continue;
    }
    if (pub.publish(mix.next()).status != PublishStatus::back_pressured) {
      ++published;
      next += gap;
    }
  }
  return published;
}

}  // namespace

SnapshotRun measure_snapshots(const StateOptions& o, int reps, int receiver_cpu,
                              const std::string& housekeeping_cpus) {
  SnapshotRun run;
  run.instruments = o.snapshot;
  run.table = snapshot_table(o);
  run.rate = o.snapshot_rate;
  PublisherConfig pc;
  pc.channel = "bench-snapshot-" + std::to_string(::getpid());
  pc.max_subscribers = 2;  // the next repetition may attach before the last one's seat is freed
  pc.state = run.table;
  pc.housekeeping_cpus = housekeeping_cpus;
  Publisher pub(pc);
  fill(pub, o.snapshot);
  SubscriberConfig sc;
  sc.channel = pc.channel;
  sc.start = StartMode::snapshot;
  sc.attach_timeout = std::chrono::seconds(5);
  sc.housekeeping_cpus = housekeeping_cpus;

  std::atomic<bool> done{false};
  std::exception_ptr failed;
  std::thread receiver([&] {
    (void)pin_current_thread(receiver_cpu);
    try {
      for (int i = 0; i < reps; ++i) run.reps.push_back(take_snapshot(sc));
    } catch (...) {
      failed = std::current_exception();
    }
    done.store(true, std::memory_order_release);
  });
  run.published = serve(pub, o.snapshot, o.snapshot_rate, done);
  receiver.join();
  if (failed) std::rethrow_exception(failed);
  return run;
}

}  // namespace tickrail::bench
