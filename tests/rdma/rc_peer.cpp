// A publisher or a subscriber of the RC transport in a process of its own, through the public
// API only: the multi-process tests (rc_process_test.cpp) and the two-guest test run it, and so
// can a person. Every wait is bounded (--timeout-ms, default 240 s).
//
//   rc_peer pub --addr A [--port P] [--channel C] [--capacity N] [--subs K] [--ticks T]
//               [--batch B] [--token X] [--linger-ms M] [--close-at-once]
//       listens (port 0: ephemeral), waits for K subscribers, publishes T ticks (0: until
//       killed) in batches of B, serves until every subscriber has left, then M ms more;
//       with --close-at-once, closes as soon as the last publish() returns.
//       Prints "listening PORT", "serving K", "published T ...", "links L ..." whenever its
//       subscriber list changes, and "done ...".
//   rc_peer sub --addr A --port P [--channel C] [--policy P] [--polling memory|cq] [--split]
//               [--capacity N] [--ticks T] [--token X] [--disconnect-after-ms M]
//       connects, prints "ready first=F", and consumes until it has seen tick T (0: until the
//       publisher is gone or evicts it), checking order and payload of every tick. Prints
//       "done received=R lost=L laps=X next=N state=S bad_order=B bad_payload=P reason=...";
//       exits 0 when every tick was in order and intact and received + lost adds up.
#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "rc_test_util.hpp"
#include "tickrail/error.hpp"
#include "tickrail/idle.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using namespace std::chrono;
using rc_test::payload;
using rc_test::payload_ok;

namespace {

struct Args {
  std::map<std::string, std::string> kv;
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  std::uint64_t num(const std::string& k, std::uint64_t def) const {
    auto it = kv.find(k);
    return it == kv.end() ? def : std::stoull(it->second);
  }
  bool flag(const std::string& k) const { return kv.count(k) != 0; }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0) continue;
    k = k.substr(2);
    if (k == "split" || k == "close-at-once") {
      a.kv[k] = "1";
    } else if (i + 1 < argc) {
      a.kv[k] = argv[++i];
    }
  }
  return a;
}

std::string errc_name(const Error& e) {
  if (e.code().category() != tickrail_category()) return "errno " + std::to_string(e.code().value());
  switch (static_cast<Errc>(e.code().value())) {
    case Errc::not_found: return "not_found";
    case Errc::rejected: return "rejected";
    case Errc::locked_memory: return "locked_memory";
    case Errc::version_mismatch: return "version_mismatch";
    case Errc::geometry_mismatch: return "geometry_mismatch";
    case Errc::timed_out: return "timed_out";
    case Errc::peer_gone: return "peer_gone";
    default: return "errc " + std::to_string(e.code().value());
  }
}

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

RdmaConfig rdma_of(const Args& a) {
  RdmaConfig r;
  r.address = a.get("addr");
  r.port = static_cast<std::uint16_t>(a.num("port", 0));
  r.device = a.get("device");
  r.token = a.get("token");
  r.polling = parse_rc_polling(a.get("polling", "memory"));
  r.split_commit = a.flag("split");
  r.heartbeat_interval = milliseconds(a.num("heartbeat-ms", 100));
  r.connect_timeout = milliseconds(a.num("connect-timeout-ms", 20000));
  return r;
}

int run_pub(const Args& a) {
  PublisherConfig c;
  c.transport = TransportKind::rc;
  c.channel = a.get("channel", "rc-test");
  c.ring_capacity = static_cast<std::uint32_t>(a.num("capacity", 16384));
  c.max_subscribers = 8;
  c.rdma = rdma_of(a);
  const std::uint64_t subs = a.num("subs", 1);
  const std::uint64_t ticks = a.num("ticks", 0);
  const std::uint64_t batch = std::max<std::uint64_t>(1, a.num("batch", 32));
  const auto deadline = steady_clock::now() + milliseconds(a.num("timeout-ms", 240000));
  Publisher pub(c);
  say("listening " + std::to_string(pub.config().rdma.port));

  std::size_t links_seen = ~std::size_t{0};
  std::uint64_t reclaimed_seen = ~std::uint64_t{0};
  auto report_links = [&] {
    const auto list = pub.subscribers();
    const auto& k = pub.counters();
    if (list.size() != links_seen || k.reclaimed != reclaimed_seen) {
      links_seen = list.size();
      reclaimed_seen = k.reclaimed;
      say("links " + std::to_string(list.size()) + " active " +
          std::to_string(pub.subscriber_count()) + " reclaimed " + std::to_string(k.reclaimed) +
          " evictions " + std::to_string(k.evictions));
    }
  };

  if (const std::uint32_t have = pub.wait_subscribers(
          static_cast<std::uint32_t>(subs), duration_cast<milliseconds>(deadline - steady_clock::now()));
      have < subs) {
    say("FAIL only " + std::to_string(have) + " of " + std::to_string(subs) + " subscribers came");
    return 1;
  }
  say("serving " + std::to_string(pub.subscriber_count()) + " first " +
      std::to_string(pub.next_sequence()));
  report_links();

  std::vector<Tick> buf(batch);
  std::uint64_t sent = 0;
  // Back-pressured: spin briefly, then yield, then sleep (the rig's two vCPUs also run the
  // subscribers and the kernel's rxe work).
  IdleStrategy idle(IdleKind::backoff, BackoffConfig{10, 5, 1'000, 100'000});
  auto last_report = steady_clock::now();
  while (ticks == 0 || sent < ticks) {
    const std::uint64_t n = ticks == 0 ? batch : std::min(batch, ticks - sent);
    const std::uint64_t seq = pub.next_sequence();
    for (std::uint64_t i = 0; i < n; ++i) buf[i] = payload(seq + i);
    const PublishResult r = pub.publish(std::span<const Tick>(buf.data(), n));
    sent += r.published;
    idle.idle(r.published < n ? 0 : 1);
    if (ticks == 0) std::this_thread::sleep_for(microseconds(200));
    if (steady_clock::now() - last_report > milliseconds(200)) {
      report_links();
      last_report = steady_clock::now();
    }
    if (steady_clock::now() > deadline) {
      say("FAIL timeout after publishing " + std::to_string(sent) + " of " +
          std::to_string(ticks) + " ticks");
      return 1;
    }
  }
  say("published " + std::to_string(sent) + " back_pressured " +
      std::to_string(pub.counters().back_pressured));
  if (a.flag("close-at-once")) {
    pub.close();  // what publish() accepted and has not yet written is close()'s to write
    say("done published " + std::to_string(pub.counters().published) + " closed at once");
    return 0;
  }

  // Serve (heartbeats, backlogs) until every subscriber has finished and left, or the time
  // runs out: a subscriber returns its credit every quarter ring, so its position here may
  // stay behind its last tick.
  const auto drain_deadline = std::min(deadline, steady_clock::now() + seconds(120));
  while (!pub.subscribers().empty() && steady_clock::now() < drain_deadline) {
    pub.service();
    report_links();
    std::this_thread::sleep_for(milliseconds(1));
  }
  const auto linger_end = steady_clock::now() + milliseconds(a.num("linger-ms", 0));
  while (steady_clock::now() < linger_end) {
    pub.service();
    report_links();
    std::this_thread::sleep_for(milliseconds(1));
  }
  const auto& k = pub.counters();
  say("done published " + std::to_string(k.published) + " evictions " +
      std::to_string(k.evictions) + " reclaimed " + std::to_string(k.reclaimed) + " active " +
      std::to_string(pub.subscriber_count()));
  pub.close();
  return 0;
}

int run_sub(const Args& a) {
  SubscriberConfig c;
  c.transport = TransportKind::rc;
  c.channel = a.get("channel", "rc-test");
  c.policy = parse_policy(a.get("policy", "block"));
  c.ring_capacity = static_cast<std::uint32_t>(a.num("capacity", 0));
  c.disconnect_after = milliseconds(a.num("disconnect-after-ms", 1000));
  c.publisher_timeout = milliseconds(a.num("publisher-timeout-ms", 3000));
  c.rdma = rdma_of(a);
  const std::uint64_t last = a.num("ticks", 0);
  const auto deadline = steady_clock::now() + milliseconds(a.num("timeout-ms", 240000));

  Subscriber sub(c);
  const std::uint64_t first = sub.next_sequence();
  say("ready first=" + std::to_string(first));

  std::uint64_t expected = first;
  std::uint64_t seen = 0;
  std::uint64_t bad_order = 0;
  std::uint64_t bad_payload = 0;
  std::string first_problem;
  const bool gaps_allowed = c.policy == SlowConsumerPolicy::drop;
  auto handler = [&](const Tick& t) {
    ++seen;
    if (t.seq != expected && !(gaps_allowed && t.seq > expected)) {
      if (bad_order++ == 0) {
        first_problem = "tick " + std::to_string(t.seq) + " when " + std::to_string(expected) +
                        " was expected";
      }
    }
    if (!payload_ok(t) && bad_payload++ == 0 && first_problem.empty()) {
      first_problem = "tick " + std::to_string(t.seq) + " has a wrong payload";
    }
    expected = t.seq + 1;
  };

  bool timed_out = false;
  SubscriberState state = SubscriberState::active;
  IdleStrategy idle(IdleKind::backoff, BackoffConfig{50, 5, 1'000, 100'000});
  while (last == 0 || sub.next_sequence() <= last) {
    const std::size_t n = sub.poll(handler, 256);
    idle.idle(static_cast<int>(n));
    if (n != 0) continue;
    state = sub.state();
    if (state != SubscriberState::active) {
      while (sub.poll(handler, 256) != 0) {
      }
      break;
    }
    if (steady_clock::now() > deadline) {
      timed_out = true;
      break;
    }
  }
  state = sub.state();
  const SubscriberCounters k = sub.counters();
  const std::uint64_t next = sub.next_sequence();
  const bool adds_up = k.received == seen && k.received + k.lost == next - first;
  say("done received=" + std::to_string(k.received) + " lost=" + std::to_string(k.lost) +
      " laps=" + std::to_string(k.laps) + " next=" + std::to_string(next) + " state=" +
      to_string(state) + " bad_order=" + std::to_string(bad_order) + " bad_payload=" +
      std::to_string(bad_payload) + (timed_out ? " TIMEOUT" : "") +
      (adds_up ? "" : " COUNTS_DO_NOT_ADD_UP") + " problem=" + first_problem +
      " reason=" + sub.reason());
  return bad_order == 0 && bad_payload == 0 && adds_up && !timed_out ? 0 : 1;
}

// --memlock-bytes N: run as an unprivileged process would, with a locked-memory limit of N
// (CAP_IPC_LOCK, which root has in the rig, lifts the limit: it is dropped first).
bool limit_locked_memory(std::uint64_t bytes) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  data[0].effective &= ~(1u << CAP_IPC_LOCK);
  if (syscall(SYS_capset, &hdr, data) != 0) return false;
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return false;
  lim.rlim_cur = bytes;
  return setrlimit(RLIMIT_MEMLOCK, &lim) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rc_peer pub|sub --addr A [options] (see the source)\n");
    return 2;
  }
  const Args a = parse(argc, argv);
  if (a.flag("memlock-bytes") && !limit_locked_memory(a.num("memlock-bytes", 0))) {
    say("error: cannot drop CAP_IPC_LOCK and lower RLIMIT_MEMLOCK");
    return 3;
  }
  try {
    if (std::strcmp(argv[1], "pub") == 0) return run_pub(a);
    if (std::strcmp(argv[1], "sub") == 0) return run_sub(a);
  } catch (const Error& e) {
    say(std::string("error: ") + e.code().message() + " (" + errc_name(e) + "): " + e.what());
    return 2;
  } catch (const std::exception& e) {
    say(std::string("error: ") + e.what());
    return 2;
  }
  std::fprintf(stderr, "rc_peer: unknown role '%s'\n", argv[1]);
  return 2;
}
