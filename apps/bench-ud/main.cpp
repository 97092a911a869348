// tickrail-bench-ud: the UD multicast transport measured through the public API.
//
//   tickrail-bench-ud lat    --address A [--device D] [--iters N] [--warmup W]
//       ping-pong over two groups (ping -> pong on one, pong -> ping on the other), one process
//       each: RTT/2 percentiles (what perftest's ib_send_lat reports as t_typical), and the
//       pong side's one-way latency from the tick's send timestamp (same host, same TSC).
//   tickrail-bench-ud floor  --address A [--iters N]
//       the same ping-pong in raw verbs (rdma_cm joins, UD QPs, inline sends): the floor.
//       With --remote, the pong side is `tickrail-bench-ud floor-pong` on another host.
//   tickrail-bench-ud fanout --address A [--device D] [--subscribers K] [--count N]
//                            [--batch T] [--rate R]
//       one publisher, K subscriber processes: ticks/s offered and delivered, and the time the
//       publisher spends in publish() per tick (its CPU cost), paced at R ticks/s or unpaced.
//   tickrail-bench-ud subscribe --address A [--subscribers K] [--count N]
//       K subscriber processes only, for `fanout --remote` on another host (the publisher's
//       cost without the fan-out that Soft-RoCE does in the kernel of the host it runs on).
// Figures are printed as a table and, with --json, as one JSON object per line. Processes are
// forked before any RDMA resource exists. Every wait is bounded.
#include <signal.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include "cli.hpp"
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "tickrail/clock.hpp"
#include "tickrail/tools/histogram.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using SteadyClock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

namespace {

struct Common {
  std::string device;
  std::string address;
  std::string group_a = "239.9.9.1";
  std::string group_b = "239.9.9.2";
  std::uint16_t port = 7600;
  bool json = false;
  int timeout_s = 120;
  // busy_spin is the production choice on an isolated core; yield lets the kernel's softirq
  // work (rxe runs the multicast loopback there) onto a shared CPU promptly.
  IdleKind idle = IdleKind::busy_spin;
};

PublisherConfig pub_config(const Common& c, const std::string& group, std::uint16_t port,
                           std::uint32_t batch) {
  PublisherConfig p;
  p.transport = TransportKind::ud;
  p.rdma.device = c.device;
  p.rdma.address = c.address;
  p.rdma.port = port;
  p.rdma.groups = {group};
  p.rdma.max_ticks_per_datagram = batch;
  p.rdma.heartbeat_interval = Ms(20);
  return p;
}

SubscriberConfig sub_config(const Common& c, const std::string& group) {
  SubscriberConfig s;
  s.transport = TransportKind::ud;
  s.rdma.device = c.device;
  s.rdma.groups = {group};
  s.rdma.recv_buffers = 4096;
  s.rdma.reorder_buffer = 1 << 16;
  return s;
}

double seconds_since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

void print_hist(const char* what, const Histogram& h, bool json) {
  const auto us = [&](double p) { return static_cast<double>(h.value_at_percentile(p)) / 1000.0; };
  if (json) {
    std::printf("{\"what\":\"%s\",\"count\":%" PRIu64 ",\"p50_us\":%.3f,\"p90_us\":%.3f,"
                "\"p99_us\":%.3f,\"p99_9_us\":%.3f,\"p99_99_us\":%.3f,\"max_us\":%.3f,"
                "\"mean_us\":%.3f}\n",
                what, h.count(), us(50), us(90), us(99), us(99.9), us(99.99),
                static_cast<double>(h.max()) / 1000.0, h.mean() / 1000.0);
  } else {
    std::printf("%-34s n=%-8" PRIu64 " p50 %8.2f  p90 %8.2f  p99 %8.2f  p99.9 %8.2f  "
                "p99.99 %8.2f  max %8.2f us\n",
                what, h.count(), us(50), us(90), us(99), us(99.9), us(99.99),
                static_cast<double>(h.max()) / 1000.0);
  }
  std::fflush(stdout);
}

// --- lat ---

int pong(const Common& c, std::uint64_t total, int ready_fd) {
  Subscriber sub(sub_config(c, c.group_a));
  Publisher pub(pub_config(c, c.group_b, static_cast<std::uint16_t>(c.port + 1), 1));
  const char one = 1;
  (void)!write(ready_fd, &one, 1);
  const Clock& clock = Clock::instance();
  Histogram one_way(1, 10'000'000'000ULL, 3);
  std::uint64_t seen = 0;
  const auto t0 = SteadyClock::now();
  IdleStrategy idle(c.idle);
  auto echo = [&](const Tick& t) {
    const std::uint64_t now = Clock::now();
    if (now > t.send_ts) one_way.record(static_cast<std::uint64_t>(clock.to_ns(now - t.send_ts)));
    Tick back = t;
    (void)pub.publish(back);
    ++seen;
  };
  // As in the floor's loops: housekeeping and the wall clock (a system call where the kernel
  // clocksource is not the TSC) only once in many empty polls, so a ping is seen promptly.
  for (std::uint64_t spins = 1; seen < total; ++spins) {
    const std::size_t n = sub.poll(echo, 16);
    if (n == 0 && spins % 64 == 0) pub.service();
    if (n == 0 && spins % 4096 == 0 && seconds_since(t0) >= c.timeout_s) break;
    idle.idle(static_cast<int>(n));
  }
  print_hist("tickrail UD one-way (pong side, TSC)", one_way, c.json);
  return seen == total ? 0 : 1;
}

int lat(Common c, std::uint64_t iters, std::uint64_t warmup) {
  int fds[2];
  if (pipe(fds) != 0) return 2;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    std::_Exit(pong(c, iters + warmup, fds[1]));
  }
  close(fds[1]);
  Publisher pub(pub_config(c, c.group_a, c.port, 1));
  Subscriber sub(sub_config(c, c.group_b));
  char b = 0;
  if (read(fds[0], &b, 1) != 1) {
    std::fprintf(stderr, "tickrail-bench-ud: the pong process failed to start\n");
    return 1;
  }
  const Clock& clock = Clock::instance();
  // Both sides know each other's session (heartbeats) before the first ping.
  const auto tw = SteadyClock::now();
  while ((pub.subscriber_count() < 1 || sub.state() != SubscriberState::active) &&
         seconds_since(tw) < c.timeout_s) {
    pub.service();
    (void)sub.poll([](const Tick&) {});
    std::this_thread::sleep_for(Ms(1));
  }
  Histogram rtt_half(1, 10'000'000'000ULL, 3);
  bool got = false;
  auto on_echo = [&](const Tick&) { got = true; };
  IdleStrategy idle(c.idle);
  const auto t0 = SteadyClock::now();
  for (std::uint64_t i = 0; i < iters + warmup; ++i) {
    Tick t{};
    t.instrument = 1;
    got = false;
    const std::uint64_t start = Clock::now();
    (void)pub.publish(t);
    for (std::uint64_t spins = 1; !got; ++spins) {
      const std::size_t n = sub.poll(on_echo, 1);
      if (n == 0 && spins % 4096 == 0 && seconds_since(t0) > c.timeout_s) break;
      if (n == 0) idle.idle(0);
    }
    if (!got) {
      std::fprintf(stderr, "tickrail-bench-ud: no echo for ping %" PRIu64 "\n", i);
      break;
    }
    const std::uint64_t rtt = Clock::now() - start;
    if (i >= warmup) rtt_half.record(static_cast<std::uint64_t>(clock.to_ns(rtt) / 2.0));
  }
  print_hist("tickrail UD RTT/2 (ping-pong)", rtt_half, c.json);
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("%sclock: %s\n", c.json ? "# " : "", clock.describe().c_str());
  return rtt_half.count() == iters && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}


// --- floor: the same ping-pong in raw verbs, no tickrail ---
//
// What UD multicast itself costs on this device: rdma_cm joins, one UD QP per group, 128-byte
// inline sends (a header and one tick), busy-polled CQs. perftest's ib_send_lat -c UD -g would
// be the reference, but it joins through the InfiniBand SA, which RoCE (and rxe) does not have.

struct RawGroup {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<char> buf;
  ibv_ah* ah = nullptr;
  std::uint32_t qpn = 0;
  std::uint32_t qkey = 0;
  sockaddr_storage group{};
  static constexpr int kRecv = 64;
  static constexpr std::size_t kSlot = 2048;

  ~RawGroup() {
    if (ah != nullptr) ibv_destroy_ah(ah);
    if (id != nullptr && qpn != 0) rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&group));
    if (id != nullptr && id->qp != nullptr) rdma_destroy_qp(id);
    if (cq != nullptr) ibv_destroy_cq(cq);
    if (mr != nullptr) ibv_dereg_mr(mr);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (id != nullptr) rdma_destroy_id(id);
    if (ch != nullptr) rdma_destroy_event_channel(ch);
  }

  static bool resolve(const std::string& host, sockaddr_storage& out) {
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, nullptr, &res) != 0 || res == nullptr) return false;
    std::memcpy(&out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return true;
  }

  bool wait(rdma_cm_event_type want) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) return false;
    const bool ok = ev->event == want && ev->status == 0;
    if (ok && want == RDMA_CM_EVENT_MULTICAST_JOIN) {
      ah = ibv_create_ah(pd, &ev->param.ud.ah_attr);
      qpn = ev->param.ud.qp_num;
      qkey = ev->param.ud.qkey;
    }
    if (!ok) std::fprintf(stderr, "floor: %s (status %d)\n", rdma_event_str(ev->event), ev->status);
    rdma_ack_cm_event(ev);
    return ok && (want != RDMA_CM_EVENT_MULTICAST_JOIN || ah != nullptr);
  }

  bool open(const std::string& local, const std::string& group_addr, bool receive) {
    sockaddr_storage src{};
    if (!resolve(local, src) || !resolve(group_addr, group)) return false;
    ch = rdma_create_event_channel();
    if (ch == nullptr || rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP) != 0) return false;
    if (rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src),
                          reinterpret_cast<sockaddr*>(&group), 2000) != 0 ||
        !wait(RDMA_CM_EVENT_ADDR_RESOLVED)) {
      return false;
    }
    pd = ibv_alloc_pd(id->verbs);
    cq = pd != nullptr ? ibv_create_cq(id->verbs, 4 * kRecv, nullptr, nullptr, 0) : nullptr;
    if (cq == nullptr) return false;
    buf.assign(kRecv * kSlot, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_UD;
    a.send_cq = a.recv_cq = cq;
    a.cap.max_send_wr = 2 * kRecv;
    a.cap.max_recv_wr = kRecv;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = 128;
    if (mr == nullptr || rdma_create_qp(id, pd, &a) != 0) return false;
    if (receive) {
      for (int i = 0; i < kRecv; ++i) repost(i);
    }
    if (rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&group), nullptr) != 0) return false;
    return wait(RDMA_CM_EVENT_MULTICAST_JOIN);
  }

  void repost(int i) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data() + std::size_t(i) * kSlot),
                static_cast<std::uint32_t>(kSlot), mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    (void)ibv_post_recv(id->qp, &wr, &bad);
  }

  // One 128-byte datagram, inline; every 32nd signalled so that the send queue drains.
  bool send(std::uint64_t n, const char* payload) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(payload), 128, 0};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE | ((n % 32) == 31 ? static_cast<unsigned>(IBV_SEND_SIGNALED) : 0u);
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(id->qp, &wr, &bad) != 0) return false;
    ibv_wc wc[4];
    (void)ibv_poll_cq(cq, 4, wc);  // reap send completions (this CQ is the sender's own)
    return true;
  }

  // Busy-polls for one received datagram; false on timeout.
  bool receive(SteadyClock::time_point deadline) {
    ibv_wc wc;
    for (std::uint64_t spins = 0;; ++spins) {
      const int n = ibv_poll_cq(cq, 1, &wc);
      if (n > 0 && wc.opcode == IBV_WC_RECV) {
        repost(static_cast<int>(wc.wr_id));
        return wc.status == IBV_WC_SUCCESS;
      }
      if ((spins & 0xffff) == 0 && SteadyClock::now() > deadline) return false;
    }
  }
};

int floor_pong(const Common& c, std::uint64_t total, int ready_fd) {
  RawGroup rx;
  RawGroup tx;
  if (!rx.open(c.address, c.group_a, true) || !tx.open(c.address, c.group_b, false)) return 1;
  const char one = 1;
  (void)!write(ready_fd, &one, 1);
  alignas(64) char payload[128] = {};
  const auto deadline = SteadyClock::now() + std::chrono::seconds(c.timeout_s);
  for (std::uint64_t i = 0; i < total; ++i) {
    if (!rx.receive(deadline) || !tx.send(i, payload)) return 1;
  }
  return 0;
}

// The pong side alone, for `floor --remote` on another host: echoes every datagram until
// none has come for 3 s (the clock is read once in 64 echoes, off the measured path), or
// --timeout seconds have passed.
int floor_pong_only(const Common& c) {
  RawGroup rx;
  RawGroup tx;
  if (!rx.open(c.address, c.group_a, true) || !tx.open(c.address, c.group_b, false)) return 1;
  std::printf("floor-pong: joined %s, answering on %s\n", c.group_a.c_str(), c.group_b.c_str());
  std::fflush(stdout);
  alignas(64) char payload[128] = {};
  const auto deadline = SteadyClock::now() + std::chrono::seconds(c.timeout_s);
  std::uint64_t n = 0;
  auto until = deadline;
  while (rx.receive(until) && tx.send(n, payload)) {
    if (++n % 64 == 1) until = std::min(deadline, SteadyClock::now() + std::chrono::seconds(3));
  }
  std::printf("floor-pong: %" PRIu64 " echoed\n", n);
  return 0;
}

int floor_lat(const Common& c, std::uint64_t iters, std::uint64_t warmup, bool remote) {
  // The local pong side, unless it runs elsewhere (already joined when we are started).
  pid_t child = -1;
  int ready_fd = -1;
  if (!remote) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    child = fork();
    if (child == 0) {
      close(fds[0]);
      std::_Exit(floor_pong(c, iters + warmup, fds[1]));
    }
    close(fds[1]);
    ready_fd = fds[0];
  }
  RawGroup tx;
  RawGroup rx;
  if (!tx.open(c.address, c.group_a, false) || !rx.open(c.address, c.group_b, true)) {
    std::fprintf(stderr, "floor: cannot join %s/%s from %s\n", c.group_a.c_str(),
                 c.group_b.c_str(), c.address.c_str());
    if (child > 0) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
    }
    return 1;
  }
  char b = 0;
  if (ready_fd >= 0 && read(ready_fd, &b, 1) != 1) return 1;
  std::this_thread::sleep_for(Ms(200));  // let the pong side's joins settle
  const Clock& clock = Clock::instance();
  Histogram rtt_half(1, 10'000'000'000ULL, 3);
  alignas(64) char payload[128] = {};
  if (remote) {
    // Across hosts the first datagrams may go before the fabric knows the joins: ping every
    // 20 ms until one is answered, then let stragglers arrive and drop them.
    bool answered = false;
    for (std::uint64_t i = 0; i < 1500 && !answered; ++i) {
      answered = tx.send(i, payload) && rx.receive(SteadyClock::now() + Ms(20));
    }
    if (!answered) {
      std::fprintf(stderr, "floor: no answer from the remote pong within 30 s\n");
      return 1;
    }
    while (rx.receive(SteadyClock::now() + Ms(200))) {
    }
  }
  const auto deadline = SteadyClock::now() + std::chrono::seconds(c.timeout_s);
  for (std::uint64_t i = 0; i < iters + warmup; ++i) {
    const std::uint64_t start = Clock::now();
    if (!tx.send(i, payload) || !rx.receive(deadline)) {
      std::fprintf(stderr, "floor: ping %" PRIu64 " got no answer\n", i);
      break;
    }
    if (i >= warmup) rtt_half.record(static_cast<std::uint64_t>(clock.to_ns(Clock::now() - start) / 2.0));
  }
  print_hist("raw verbs UD multicast RTT/2 (floor)", rtt_half, c.json);
  if (child > 0) waitpid(child, nullptr, 0);
  return rtt_half.count() == iters ? 0 : 1;
}

// --- fanout ---

struct SubResult {
  std::uint64_t delivered = 0;
  std::uint64_t lost = 0;
  double seconds = 0;  // first to last tick
  int ok = 0;
};

SubResult subscriber_process(const Common& c, std::uint64_t count, int ready_fd) {
  SubResult r;
  Subscriber sub(sub_config(c, c.group_a));
  const char one = 1;
  (void)!write(ready_fd, &one, 1);
  SteadyClock::time_point first{};
  std::uint64_t last = 0;
  bool ordered = true;
  auto on_tick = [&](const Tick& t) {
    if (r.delivered == 0) first = SteadyClock::now();
    ordered = ordered && t.seq > last;
    last = t.seq;
    ++r.delivered;
  };
  const auto t0 = SteadyClock::now();
  while (r.delivered + sub.counters().lost < count && seconds_since(t0) < c.timeout_s) {
    (void)sub.poll(on_tick, 1024);
  }
  r.seconds = r.delivered > 0 ? seconds_since(first) : 0;
  r.lost = sub.counters().lost;
  r.ok = ordered && r.delivered + r.lost == count;
  return r;
}

// Forks K subscriber processes (before any RDMA resource exists here) and waits until each has
// joined; each writes its SubResult to its pipe in result_fds when done. 0, or an exit status.
int spawn_subscribers(const Common& c, std::uint32_t k, std::uint64_t count,
                      std::vector<pid_t>& kids, std::vector<int>& result_fds) {
  int ready[2];
  if (pipe(ready) != 0) return 2;
  for (std::uint32_t i = 0; i < k; ++i) {
    int res[2];
    if (pipe(res) != 0) return 2;
    const pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      close(res[0]);
      const SubResult r = subscriber_process(c, count, ready[1]);
      (void)!write(res[1], &r, sizeof r);
      std::_Exit(0);
    }
    close(res[1]);
    kids.push_back(pid);
    result_fds.push_back(res[0]);
  }
  close(ready[1]);
  for (std::uint32_t i = 0; i < k; ++i) {
    char b = 0;
    if (read(ready[0], &b, 1) != 1) return 1;
  }
  close(ready[0]);
  return 0;
}

// K subscriber processes and nothing else, for a publisher on another host (fanout --remote):
// prints one line per subscriber and succeeds when each delivered or counted every tick.
int subscribe_only(const Common& c, std::uint32_t subscribers, std::uint64_t count) {
  std::vector<pid_t> kids;
  std::vector<int> result_fds;
  if (const int rc = spawn_subscribers(c, subscribers, count, kids, result_fds); rc != 0) return rc;
  std::printf("subscribe: %u subscriber(s) joined %s\n", subscribers, c.group_a.c_str());
  std::fflush(stdout);
  bool ok = true;
  for (std::uint32_t i = 0; i < subscribers; ++i) {
    SubResult r{};
    if (read(result_fds[i], &r, sizeof r) != sizeof r) r = {};
    waitpid(kids[i], nullptr, 0);
    std::printf("subscriber %u: delivered %" PRIu64 ", lost %" PRIu64 ", %.0f ticks/s%s\n", i,
                r.delivered, r.lost, r.seconds > 0 ? static_cast<double>(r.delivered) / r.seconds : 0.0,
                r.ok ? "" : " (FAILED: not every tick delivered or counted, in order)");
    ok = ok && r.ok;
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// What publishing a fanout's ticks cost the publishing thread.
struct PublishCost {
  double seconds = 0;                   // wall, from the first publish to the last
  std::uint64_t in_publish = 0;         // clock cycles spent inside publish()
  std::uint64_t cpu_in_publish_ns = 0;  // paced: the thread's CPU time inside publish()
  double user_s = 0;                    // the thread's user and system time over the loop
  double sys_s = 0;
};

// Publishes `count` ticks, `batch` per call, or one at a time paced at `rate` (> 0).
PublishCost publish_all(Publisher& pub, std::uint64_t count, std::uint32_t batch, double rate) {
  PublishCost cost;
  std::vector<Tick> chunk(batch);
  std::uint64_t next = 1;
  // The publisher thread's CPU time inside publish(), which excludes time it was preempted by
  // the subscribers' spinning processes (wall time does not), and its user/system split.
  auto thread_cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
           static_cast<std::uint64_t>(ts.tv_nsec);
  };
  rusage ru0{};
  getrusage(RUSAGE_THREAD, &ru0);
  const auto t0 = SteadyClock::now();
  const double period = rate > 0 ? 1.0 / rate : 0;
  while (next <= count) {
    if (period > 0) {
      // Open loop, asleep until due: the CPU measured is publish()'s, not a pacing spin's.
      std::this_thread::sleep_until(
          t0 + std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(next - 1) * period * 1e9)));
    }
    const auto n = static_cast<std::size_t>(
        std::min<std::uint64_t>(period > 0 ? 1 : batch, count - next + 1));
    const std::uint64_t c0 = period > 0 ? thread_cpu_ns() : 0;
    const std::uint64_t a = Clock::now();
    const PublishResult r = pub.publish(std::span<const Tick>(chunk.data(), n));
    cost.in_publish += Clock::now() - a;
    if (period > 0) cost.cpu_in_publish_ns += thread_cpu_ns() - c0;
    next += r.published;
  }
  cost.seconds = seconds_since(t0);
  rusage ru1{};
  getrusage(RUSAGE_THREAD, &ru1);
  auto secs_of = [](const timeval& a, const timeval& b) {
    return static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_usec - a.tv_usec) / 1e6;
  };
  cost.user_s = secs_of(ru0.ru_utime, ru1.ru_utime);
  cost.sys_s = secs_of(ru0.ru_stime, ru1.ru_stime);
  return cost;
}

// Heartbeats while the subscribers finish (their recovery is served by the NIC), then the
// result each writes to its pipe; none when remote (they report on their host).
std::vector<SubResult> await_subscribers(Publisher& pub, const Common& c, std::uint32_t subscribers,
                                         bool remote, const std::vector<pid_t>& kids,
                                         const std::vector<int>& result_fds) {
  const auto te = SteadyClock::now();
  if (remote) {
    // The subscribers report on their host; serve heartbeats and recovery until they leave.
    while (pub.subscriber_count() > 0 && seconds_since(te) < c.timeout_s) {
      pub.service();
      std::this_thread::sleep_for(Ms(1));
    }
  }
  std::vector<SubResult> results(remote ? 0 : subscribers);
  for (std::uint32_t i = 0; i < results.size(); ++i) {
    while (seconds_since(te) < c.timeout_s) {
      pub.service();
      fd_set set;
      FD_ZERO(&set);
      FD_SET(result_fds[i], &set);
      timeval tv{0, 1000};
      if (select(result_fds[i] + 1, &set, nullptr, nullptr, &tv) > 0) break;
    }
    if (read(result_fds[i], &results[i], sizeof(SubResult)) != sizeof(SubResult)) results[i] = {};
    waitpid(kids[i], nullptr, 0);
  }
  return results;
}

int fanout(const Common& c, std::uint32_t subscribers, std::uint64_t count, std::uint32_t batch,
           double rate, bool remote) {
  std::vector<pid_t> kids;
  std::vector<int> result_fds;
  if (!remote) {
    if (const int rc = spawn_subscribers(c, subscribers, count, kids, result_fds); rc != 0) return rc;
  }
  Publisher pub(pub_config(c, c.group_a, c.port, batch));
  (void)pub.wait_subscribers(subscribers, std::chrono::seconds(c.timeout_s));
  const Clock& clock = Clock::instance();
  const PublishCost cost = publish_all(pub, count, batch, rate);
  const std::vector<SubResult> results = await_subscribers(pub, c, subscribers, remote, kids, result_fds);

  const double publish_ns_per_tick = clock.to_ns(cost.in_publish) / static_cast<double>(count);
  const double per_tick = 1e9 / static_cast<double>(count);
  // Paced: thread CPU inside publish(); unpaced the loop is all publish(), so the thread's
  // whole CPU time over the loop.
  const double cpu_ns = rate > 0 ? static_cast<double>(cost.cpu_in_publish_ns) / static_cast<double>(count)
                                 : (cost.user_s + cost.sys_s) * per_tick;
  const double user = cost.user_s;
  const double sys = cost.sys_s;
  double slowest = 0;
  std::uint64_t lost = 0;
  bool ok = true;
  for (const auto& r : results) {
    slowest = std::max(slowest, r.seconds);
    lost += r.lost;
    ok = ok && r.ok;
  }
  const double offered = static_cast<double>(count) / cost.seconds;
  const double delivered = slowest > 0 ? static_cast<double>(count) / slowest : 0;
  if (c.json) {
    std::printf("{\"what\":\"fanout\",\"subscribers\":%u,\"ticks\":%" PRIu64 ",\"batch\":%u,"
                "\"rate\":%.0f,\"offered_ticks_per_s\":%.0f,\"delivered_ticks_per_s\":%.0f,"
                "\"publish_wall_ns_per_tick\":%.1f,\"publish_cpu_ns_per_tick\":%.1f,"
                "\"thread_user_ns_per_tick\":%.1f,\"thread_sys_ns_per_tick\":%.1f,\"lost\":%" PRIu64
                ",\"ok\":%s}\n",
                subscribers, count, batch, rate, offered, delivered, publish_ns_per_tick, cpu_ns,
                user * per_tick, sys * per_tick, lost, ok ? "true" : "false");
  } else {
    std::printf("fanout %u%s subscriber(s), %" PRIu64 " ticks, %u/datagram, %s: offered %.0f ticks/s, "
                "slowest subscriber delivered %.0f ticks/s, publish() wall %.1f ns/tick, publisher "
                "thread CPU in publish() %.1f ns/tick (loop: user %.1f, system %.1f ns/tick), lost %" PRIu64 "%s\n",
                subscribers, remote ? " remote" : "", count, batch, rate > 0 ? "paced" : "unpaced",
                offered, delivered, publish_ns_per_tick, cpu_ns, user * per_tick, sys * per_tick, lost, ok ? "" : " (FAILED)");
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  cli::Cli command("tickrail-bench-ud", "tickrail-bench-ud: UD multicast latency, throughput and publisher cost");
  CLI::App& app = command.app();
  app.require_subcommand(1);
  Common c;
  app.add_option("--device", c.device, "RDMA device (default: the one the address is on)");
  app.add_option("--address", c.address, "this host's address on the RDMA device")->required();
  app.add_option("--port", c.port, "first rdma_cm port for recovery")->check(CLI::Range(1, 65534));
  app.add_option("--timeout", c.timeout_s, "seconds any phase may take")->check(CLI::Range(1, 86400));
  app.add_flag("--json", c.json, "JSON lines instead of a table");
  std::string idle_name = "busy_spin";
  app.add_option("--idle", idle_name, "idle strategy of the polling loops: busy_spin, yield");
  std::uint64_t iters = 10000;
  std::uint64_t warmup = 1000;
  auto* l = app.add_subcommand("lat", "ping-pong latency");
  l->add_option("--iters", iters)->check(CLI::Range(1, 1'000'000'000));
  l->add_option("--warmup", warmup)->check(CLI::Range(0, 1'000'000'000));
  auto* fl = app.add_subcommand("floor", "the same ping-pong in raw verbs, without tickrail");
  fl->add_option("--iters", iters)->check(CLI::Range(1, 1'000'000'000));
  fl->add_option("--warmup", warmup)->check(CLI::Range(0, 1'000'000'000));
  bool floor_remote = false;
  fl->add_flag("--remote", floor_remote, "the pong side runs elsewhere (floor-pong)");
  auto* fp = app.add_subcommand("floor-pong", "the floor's pong side alone, for floor --remote");
  std::uint32_t subscribers = 1;
  std::uint64_t count = 1'000'000;
  std::uint32_t batch = 15;
  double rate = 0;
  bool remote = false;
  auto* f = app.add_subcommand("fanout", "throughput and publisher cost with K subscribers");
  f->add_flag("--remote", remote,
              "the K subscribers run elsewhere (tickrail-bench-ud subscribe): wait for them");
  auto* so = app.add_subcommand("subscribe", "K subscriber processes only, for fanout --remote");
  so->add_option("--subscribers", subscribers)->check(CLI::Range(1, 64));
  so->add_option("--count", count)->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000'000}));
  f->add_option("--subscribers", subscribers)->check(CLI::Range(1, 64));
  f->add_option("--count", count)->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000'000}));
  f->add_option("--batch", batch, "ticks per datagram")->check(CLI::Range(1, 64));
  f->add_option("--rate", rate, "ticks per second, 0: unpaced")->check(CLI::Range(0.0, 1e10));
  if (const auto status = command.parse(argc, argv)) return *status;
  try {
    c.idle = parse_idle_kind(idle_name);
    if (l->parsed()) return lat(c, iters, warmup);
    if (fl->parsed()) return floor_lat(c, iters, warmup, floor_remote);
    if (fp->parsed()) return floor_pong_only(c);
    if (so->parsed()) return subscribe_only(c, subscribers, count);
    return fanout(c, subscribers, count, batch, rate, remote);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tickrail-bench-ud: %s\n", e.what());
    return 1;
  }
}
