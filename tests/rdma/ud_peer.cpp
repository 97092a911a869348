// A UD publisher or subscriber process for the multi-process and two-guest rig tests (driven by
// ud_*_test.py), printing what it saw in lines the scripts parse.
//
//   ud_peer publish   --group G [--port P] --count N [--batch T] [--rate R] [--history H]
//                     [--heartbeat-ms M] [--wait-subscribers K] [--linger-ms L] [--hold]
//   ud_peer subscribe --group G [--group G2...] --count N [--timeout-ms T] [--late-join K]
//                     [--drop-mod M] [--expect-gone] [--publisher-timeout-ms P]
//                     [--expect-foreign F] [--allow-loss]
//   ud_peer failover  --group G --group-b G2 --count N [--timeout-ms T] [--recovery-delay-us D]
//                     [--hole-timeout-ms H]
// publish --group-b G2 publishes every batch on a second line too (group G2, port P + 1): the
// same ticks under the same sequence numbers, for a FailoverSubscriber (failover) to arbitrate.
// The device and address come from the rig (TICKRAIL_RDMA_DEV, TICKRAIL_RDMA_ADDR). Every wait
// is bounded. Exit status 0 only when the role's checks hold:
//   subscriber: every tick delivered once, in order, with the content ud_tick(seq) gave it
//   (or, with --allow-loss, delivered + lost = N), and the foreign/gone expectations met;
//   publisher: every tick published.
#include <execinfo.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "tickrail/clock.hpp"
#include "tickrail/failover.hpp"
#include "tickrail/idle.hpp"
#include "transport/rdma/ud/ud_publisher.hpp"
#include "transport/rdma/ud/ud_subscriber.hpp"
#include "ud_support.hpp"

using namespace tickrail;
using namespace tickrail::rdma::test;
using rdma::ud::UdPublisher;
using rdma::ud::UdSubscriber;
using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

namespace {

// Diagnostics for a rig run that cannot attach a debugger: a crash prints its stack, and a
// process still alive long after its work prints every thread's stack (addr2line -e ud_peer).
void print_stack(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  char line[64];
  const int len = std::snprintf(line, sizeof line, "ud_peer: signal %d in thread %ld:\n", sig,
                                static_cast<long>(syscall(SYS_gettid)));
  (void)!write(STDOUT_FILENO, line, static_cast<std::size_t>(len));
  backtrace_symbols_fd(frames, n, STDOUT_FILENO);
}

void on_crash(int sig) {
  print_stack(sig);
  _exit(128 + sig);
}

void install_diagnostics() {
  void* warm[2];
  (void)backtrace(warm, 2);  // loads libgcc's unwinder now, not in a signal handler
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGABRT, on_crash);
  signal(SIGUSR2, print_stack);
}

// After the role's work: if teardown takes longer than `secs`, dump every thread's stack.
void watchdog(int secs) {
  std::thread([secs] {
    std::this_thread::sleep_for(std::chrono::seconds(secs));
    std::printf("ud_peer: teardown still running after %d s; thread stacks:\n", secs);
    std::fflush(stdout);
    if (DIR* d = opendir("/proc/self/task")) {
      while (dirent* e = readdir(d)) {
        const long tid = std::atol(e->d_name);
        if (tid > 0) syscall(SYS_tgkill, getpid(), tid, SIGUSR2);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      closedir(d);
    }
  }).detach();
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

struct PubOpts {
  std::string group = kUdGroup;
  std::string group_b;  // a second line, or none
  std::uint16_t port = 7480;
  std::uint64_t count = 1000;
  std::uint32_t batch = 1;
  double rate = 0;  // ticks/s; 0: as fast as the send queue takes them
  std::uint32_t history = 65536;
  int heartbeat_ms = 20;
  std::uint32_t wait_subscribers = 0;
  int wait_ms = 60000;
  int linger_ms = 2000;
  bool hold = false;
};

int publish(const PubOpts& o) {
  PublisherConfig c = ud_publisher_config(o.group, o.port);
  c.rdma.max_ticks_per_datagram = o.batch;
  c.rdma.history = o.history;
  c.rdma.heartbeat_interval = Ms(o.heartbeat_ms);
  UdPublisher pub(c);
  std::optional<UdPublisher> pub_b;
  if (!o.group_b.empty()) {
    PublisherConfig cb = c;
    cb.rdma.groups = {o.group_b};
    cb.rdma.port = static_cast<std::uint16_t>(o.port + 1);
    pub_b.emplace(cb);
  }
  for (UdPublisher* p : {&pub, pub_b ? &*pub_b : nullptr}) {
    if (p == nullptr) continue;
    std::printf("ud_peer publisher: session %016" PRIx64 " group %s port %u mtu %u ticks/datagram %u "
                "inline %u membership %s\n",
                p->session(), p->config().rdma.groups.front().c_str(), p->recovery_port(), p->mtu(),
                p->ticks_per_datagram(), p->max_inline(), p->send_only_member() ? "send-only" : "full");
  }
  std::fflush(stdout);
  auto service = [&] {
    pub.service();
    if (pub_b) pub_b->service();
  };
  auto subscribers = [&] { return std::min(pub.subscriber_count(), pub_b ? pub_b->subscriber_count() : ~0u); };

  const auto t_wait = SteadyClock::now();
  while (subscribers() < o.wait_subscribers) {
    if (since(t_wait) * 1000 > o.wait_ms) {
      std::printf("ud_peer publisher: FAIL: %u of %u subscribers connected after %d ms\n",
                  subscribers(), o.wait_subscribers, o.wait_ms);
      return 1;
    }
    service();
    std::this_thread::sleep_for(Ms(1));
  }
  if (o.wait_subscribers > 0) {
    std::printf("ud_peer publisher: %u subscribers connected\n", subscribers());
    std::fflush(stdout);
  }

  std::vector<Tick> chunk(o.batch);
  // A send queue that stays full (the device completes no send) fails the run within 5 s, saying
  // so, instead of spinning silently until the test's own timeout.
  SteadyClock::time_point stall_since{};
  auto stalled = [&](const char* line, std::uint64_t at) {
    service();
    if (stall_since == SteadyClock::time_point{}) stall_since = SteadyClock::now();
    if (since(stall_since) < 5.0) return true;
    const auto& u = pub.ud_counters();
    std::printf("ud_peer publisher: FAIL: %s's sends have not completed for 5 s at tick %" PRIu64
                " (datagrams %" PRIu64 ", send queue full %" PRIu64 ", send errors %" PRIu64 ")\n",
                line, at, u.datagrams, u.sq_full, u.send_errors);
    std::fflush(stdout);
    return false;
  };
  std::uint64_t next = 1;
  const double cpu0 = cpu_seconds();
  const auto t0 = SteadyClock::now();
  const double period = o.rate > 0 ? 1.0 / o.rate : 0;
  while (next <= o.count) {
    if (period > 0) {
      // Open loop: each tick goes at its intended time, however late the previous one went.
      const double due = static_cast<double>(next - 1) * period;
      while (since(t0) < due) service();
    }
    // Paced, a batch goes at its first tick's time (one tick unless --batch).
    const std::uint64_t n = std::min<std::uint64_t>(o.batch, o.count - next + 1);
    for (std::uint64_t j = 0; j < n; ++j) chunk[j] = ud_tick(next + j);
    const PublishResult r = pub.publish(std::span<const Tick>(chunk.data(), n));
    // Line B carries the same ticks: all of them, so that its sequence stays line A's.
    for (std::uint64_t done = 0; pub_b && done < r.published;) {
      const PublishResult rb = pub_b->publish(std::span<const Tick>(chunk.data() + done, r.published - done));
      done += rb.published;
      if (rb.status == PublishStatus::closed) {
        std::printf("ud_peer publisher: FAIL: line B closed at %" PRIu64 "\n", next + done);
        return 1;
      }
      if (rb.published == 0 && !stalled("line B", next + done)) return 1;
    }
    if (r.published == 0 && r.status != PublishStatus::closed && !stalled("line A", next)) return 1;
    if (r.published != 0) stall_since = SteadyClock::time_point{};
    next += r.published;
    if (r.status == PublishStatus::closed) {
      std::printf("ud_peer publisher: FAIL: publisher closed at %" PRIu64 "\n", next);
      return 1;
    }
  }
  (void)pub.flush();
  if (pub_b) (void)pub_b->flush();
  const double secs = since(t0);
  const double cpu = cpu_seconds() - cpu0;
  const auto& u = pub.ud_counters();
  std::printf("ud_peer publisher: published %" PRIu64 " ticks in %.3f s (%.0f ticks/s), "
              "cpu %.3f s (%.0f ns/tick), datagrams %" PRIu64 ", heartbeats %" PRIu64
              ", send errors %" PRIu64 ", send queue full %" PRIu64 "\n",
              o.count, secs, static_cast<double>(o.count) / secs, cpu,
              cpu * 1e9 / static_cast<double>(o.count), u.datagrams, u.heartbeats, u.send_errors,
              u.sq_full);
  std::fflush(stdout);

  // Serve recovery (the NIC does) and heartbeats until the subscribers hang up, or the linger
  // time ends; --hold keeps going until killed (bounded by the linger time all the same).
  // Subscribers we waited for count as had even if all of them hung up before the last send
  // completed: they may finish (recovering what they missed) before this loop starts.
  const auto t_end = SteadyClock::now();
  bool had = o.wait_subscribers > 0 || pub.subscriber_count() > 0;
  while (since(t_end) * 1000 < o.linger_ms) {
    service();
    const std::uint32_t n = pub.subscriber_count() + (pub_b ? pub_b->subscriber_count() : 0);
    if (!o.hold && had && n == 0) break;
    had = had || n > 0;
    std::this_thread::sleep_for(Ms(1));
  }
  std::printf("ud_peer publisher: done\n");
  std::fflush(stdout);
  watchdog(15);
  return 0;
}

struct SubOpts {
  std::vector<std::string> groups;
  std::uint64_t count = 1000;
  int timeout_ms = 120000;
  std::uint32_t late_join = 0;
  std::uint64_t drop_mod = 0;
  bool expect_gone = false;
  int publisher_timeout_ms = 1000;
  std::uint64_t expect_foreign = 0;
  bool allow_loss = false;
  std::uint32_t recv_buffers = 512;
  std::uint32_t reorder = 4096;
};

struct DropMod {
  std::uint64_t mod;
  static bool hook(void* ctx, const std::byte* p, std::size_t len) {
    const auto* self = static_cast<const DropMod*>(ctx);
    if (len < sizeof(rdma::ud::DatagramHeader)) return false;
    const auto h = rdma::ud::read_header(p);
    // Deterministic: the datagrams whose first tick's sequence is 1 mod M.
    return h.kind == rdma::ud::DatagramKind::data && h.first_seq % self->mod == 1;
  }
};

int subscribe(const SubOpts& o) {
  SubscriberConfig c = ud_subscriber_config(o.groups.front());
  c.rdma.groups = o.groups;
  c.rdma.late_join_recover = o.late_join;
  c.rdma.recv_buffers = o.recv_buffers;
  c.rdma.reorder_buffer = o.reorder;
  c.publisher_timeout = Ms(o.publisher_timeout_ms);
  UdSubscriber sub(c);
  DropMod drop{o.drop_mod};
  if (o.drop_mod > 0) sub.set_drop_hook(&DropMod::hook, &drop);
  std::printf("ud_peer subscriber: joined %zu group(s), mtu %u\n", sub.group_count(), sub.mtu());
  std::fflush(stdout);

  std::uint64_t last = 0;
  std::uint64_t delivered = 0;
  std::uint64_t disorder = 0;
  std::uint64_t bad = 0;
  std::uint64_t first = 0;
  auto handler = [&](const Tick& t) {
    if (first == 0) first = t.seq;
    if (t.seq <= last) ++disorder;
    if (!ud_tick_ok(t)) ++bad;
    last = t.seq;
    ++delivered;
  };
  detail::TickSink sink(handler);
  // Idle politely: nine busy processes share the rig's two vCPUs with the kernel's rxe work.
  Backoff idle(BackoffConfig{200, 10, 10000, 1000000});
  const auto t0 = SteadyClock::now();
  bool timed_out = false;
  SteadyClock::time_point t_first{};
  while (delivered + sub.counters().lost < o.count) {
    const std::size_t n = sub.poll(sink, 256);
    if (n > 0 && t_first == SteadyClock::time_point{}) t_first = SteadyClock::now();
    idle.idle(static_cast<int>(n));
    if (since(t0) * 1000 > o.timeout_ms) {
      timed_out = true;
      break;
    }
  }
  const double secs = t_first == SteadyClock::time_point{} ? 0 : since(t_first);
  const auto u = sub.ud_counters();
  std::printf("ud_peer subscriber: delivered %" PRIu64 " of %" PRIu64 " (first %" PRIu64
              ", last %" PRIu64 ") in %.3f s, lost %" PRIu64 " (%" PRIu64 " runs), out of order %" PRIu64
              ", bad content %" PRIu64 "; datagrams %" PRIu64 " (heartbeats %" PRIu64
              "), ticks received %" PRIu64 ", gaps %" PRIu64 ", recovered %" PRIu64 " in %" PRIu64
              " reads (%" PRIu64 " failed), duplicates %" PRIu64 ", reordered %" PRIu64
              ", overrun %" PRIu64 ", foreign %" PRIu64 ", malformed %" PRIu64
              ", receive errors %" PRIu64 ", dropped by hook %" PRIu64 "\n",
              delivered, o.count, first, last, secs, u.lost, u.loss_events, disorder, bad,
              u.datagrams, u.heartbeats, u.ticks, u.gaps, u.recovered, u.reads, u.read_errors,
              u.duplicates, u.reordered, u.overrun, u.foreign, u.malformed, u.recv_errors,
              u.hook_dropped);
  std::fflush(stdout);
  bool ok = !timed_out && disorder == 0 && bad == 0;
  ok = ok && (o.allow_loss ? delivered + u.lost == o.count : delivered == o.count && u.lost == 0);
  if (u.foreign < o.expect_foreign) {
    std::printf("ud_peer subscriber: FAIL: %" PRIu64 " foreign datagrams, expected at least %" PRIu64 "\n",
                u.foreign, o.expect_foreign);
    ok = false;
  }
  if (timed_out) std::printf("ud_peer subscriber: FAIL: timed out after %d ms\n", o.timeout_ms);

  if (o.expect_gone) {
    const auto tg = SteadyClock::now();
    while (sub.state() != SubscriberState::publisher_gone && since(tg) * 1000 < o.timeout_ms) {
      (void)sub.poll(sink, 256);
      std::this_thread::sleep_for(Ms(1));
    }
    if (sub.state() == SubscriberState::publisher_gone) {
      std::printf("ud_peer subscriber: publisher gone (%.0f ms after the end of the stream): %s\n",
                  since(tg) * 1000, sub.reason().c_str());
    } else {
      std::printf("ud_peer subscriber: FAIL: state %s, not publisher gone\n",
                  to_string(sub.state()));
      ok = false;
    }
  }
  std::printf("ud_peer subscriber: %s\n", ok ? "OK" : "FAIL");
  std::fflush(stdout);
  watchdog(15);
  return ok ? 0 : 1;
}

struct FailoverOpts {
  std::string group;
  std::string group_b;
  std::uint64_t count = 1000;
  int timeout_ms = 120000;
  int recovery_delay_us = 20000;
  int hole_timeout_ms = 500;
};

// One stream over two UD lines: every tick once, in order, with its content; nothing lost on both
// lines (each line recovers what neither brought).
int failover(const FailoverOpts& o) {
  FailoverConfig fc;
  const std::string groups[2] = {o.group, o.group_b};
  for (int i = 0; i < 2; ++i) {
    fc.line[i] = ud_subscriber_config(groups[i]);
    fc.line[i].channel = i == 0 ? "line-a" : "line-b";
    fc.line[i].rdma.reorder_buffer = 1 << 16;  // holds what arrives while a hole waits its delay
    fc.line[i].rdma.recv_buffers = 1024;
    fc.line[i].publisher_timeout = Ms(10000);
  }
  fc.window = 1 << 16;
  fc.recovery_delay = std::chrono::microseconds(o.recovery_delay_us);
  fc.hole_timeout = std::chrono::microseconds(std::int64_t{o.hole_timeout_ms} * 1000);
  FailoverSubscriber fs(fc);
  std::printf("ud_peer failover: joined 2 lines (%s, %s), recovery delay %d us (line B %d us)\n",
              o.group.c_str(), o.group_b.c_str(), o.recovery_delay_us, 2 * o.recovery_delay_us);
  std::fflush(stdout);

  std::uint64_t last = 0;
  std::uint64_t delivered = 0;
  std::uint64_t disorder = 0;
  std::uint64_t bad = 0;
  auto handler = [&](const Tick& t) {
    if (t.seq != last + 1) ++disorder;
    if (!ud_tick_ok(t)) ++bad;
    last = t.seq;
    ++delivered;
  };
  Backoff idle(BackoffConfig{200, 10, 10000, 1000000});
  const auto t0 = SteadyClock::now();
  bool timed_out = false;
  while (delivered < o.count) {
    const FailoverCounters c = fs.counters();
    if (c.gaps + c.skipped != 0) break;
    idle.idle(static_cast<int>(fs.poll(handler)));
    if (since(t0) * 1000 > o.timeout_ms) {
      timed_out = true;
      break;
    }
  }
  const FailoverCounters c = fs.counters();
  std::printf("ud_peer failover: delivered %" PRIu64 " of %" PRIu64 " in %.3f s, out of order %" PRIu64
              ", bad content %" PRIu64 ", lost on both lines %" PRIu64 ", given up %" PRIu64 "\n",
              delivered, o.count, since(t0), disorder, bad, c.gaps, c.skipped);
  for (int i = 0; i < 2; ++i) {
    const FailoverLineCounters& l = c.line[i];
    std::printf("ud_peer failover: line %c first %" PRIu64 " duplicates %" PRIu64 " downs %" PRIu64
                " recovered %" PRIu64 "\n",
                i == 0 ? 'A' : 'B', l.first, l.duplicates, l.downs, l.recovered);
  }
  const bool ok = !timed_out && delivered == o.count && disorder == 0 && bad == 0 && c.gaps == 0 && c.skipped == 0;
  if (timed_out) std::printf("ud_peer failover: FAIL: timed out after %d ms\n", o.timeout_ms);
  std::printf("ud_peer failover: %s\n", ok ? "OK" : "FAIL");
  std::fflush(stdout);
  watchdog(15);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"UD publisher or subscriber for the rig tests"};
  app.require_subcommand(1);
  PubOpts po;
  auto* pub = app.add_subcommand("publish", "publish ticks to a group");
  pub->add_option("--group", po.group);
  pub->add_option("--group-b", po.group_b, "publish every batch on this group too (port + 1)");
  pub->add_option("--port", po.port);
  pub->add_option("--count", po.count);
  pub->add_option("--batch", po.batch, "ticks per datagram");
  pub->add_option("--rate", po.rate, "ticks per second (0: unpaced)");
  pub->add_option("--history", po.history);
  pub->add_option("--heartbeat-ms", po.heartbeat_ms);
  pub->add_option("--wait-subscribers", po.wait_subscribers);
  pub->add_option("--wait-ms", po.wait_ms);
  pub->add_option("--linger-ms", po.linger_ms);
  pub->add_flag("--hold", po.hold, "keep serving until killed (or the linger time)");
  SubOpts so;
  auto* sub = app.add_subcommand("subscribe", "receive and check ticks");
  sub->add_option("--group", so.groups)->required();
  sub->add_option("--count", so.count);
  sub->add_option("--timeout-ms", so.timeout_ms);
  sub->add_option("--late-join", so.late_join);
  sub->add_option("--drop-mod", so.drop_mod, "drop data datagrams whose first seq is 1 mod M");
  sub->add_flag("--expect-gone", so.expect_gone);
  sub->add_option("--publisher-timeout-ms", so.publisher_timeout_ms);
  sub->add_option("--expect-foreign", so.expect_foreign);
  sub->add_flag("--allow-loss", so.allow_loss);
  sub->add_option("--recv-buffers", so.recv_buffers);
  sub->add_option("--reorder", so.reorder);
  FailoverOpts fo;
  auto* fail = app.add_subcommand("failover", "receive one stream over two lines and check it");
  fail->add_option("--group", fo.group)->required();
  fail->add_option("--group-b", fo.group_b)->required();
  fail->add_option("--count", fo.count);
  fail->add_option("--timeout-ms", fo.timeout_ms);
  fail->add_option("--recovery-delay-us", fo.recovery_delay_us);
  fail->add_option("--hole-timeout-ms", fo.hole_timeout_ms);
  CLI11_PARSE(app, argc, argv);
  install_diagnostics();
  try {
    (void)Clock::instance();
    if (fail->parsed()) return failover(fo);
    return pub->parsed() ? publish(po) : subscribe(so);
  } catch (const std::exception& e) {
    std::printf("ud_peer: FAIL: %s\n", e.what());
    return 1;
  }
}
