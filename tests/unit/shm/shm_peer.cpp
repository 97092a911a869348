// A second process for the shared-memory tests: a subscriber or a publisher that runs until
// killed (bounded by a deadline), printing "ready" once attached, or "error: ..." when it cannot.
//   shm_peer sub CHANNEL POLICY      attaches and consumes slowly
//   shm_peer pub CHANNEL             publishes a tick every millisecond
//   shm_peer count CHANNEL N         attaches, receives N ticks, prints "got K in order|gap"
//   shm_peer stream CHANNEL N        once subscribed, publishes payload(0..N-1) (sequences 1..N),
//                                    16 ticks each 100 us: one line of a failover test
//   shm_peer pub-locked CHANNEL DIR  a publisher with lock_memory under RLIMIT_MEMLOCK 0
//   shm_peer pub-big CHANNEL DIR     a publisher whose rings exceed RLIMIT_FSIZE (1 MiB)
// With TICKRAIL_PEER_UID set (and root), it first becomes that user: another uid, made by the test.
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <span>
#include <thread>

#include "shm_test_util.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using namespace std::chrono_literals;

namespace {

void say(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

void become_user() {
  const char* uid = std::getenv("TICKRAIL_PEER_UID");
  if (uid == nullptr) return;
  const auto id = static_cast<uid_t>(std::strtoul(uid, nullptr, 10));
  if (::setgroups(0, nullptr) != 0 || ::setgid(id) != 0 || ::setuid(id) != 0) {
    say(std::string("error: cannot become uid ") + uid);
    std::exit(3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: shm_peer sub CHANNEL POLICY | pub CHANNEL | count CHANNEL N [POLICY]\n");
    return 2;
  }
  become_user();
  const std::string mode = argv[1];
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  try {
    if (mode == "sub" && argc >= 4) {
      SubscriberConfig c;
      c.channel = argv[2];
      c.policy = parse_policy(argv[3]);
      c.attach_timeout = 10s;
      Subscriber s(c);
      say("ready");
      while (std::chrono::steady_clock::now() < deadline) {
        (void)s.poll([](const Tick&) {}, 1);
        std::this_thread::sleep_for(1ms);
      }
      return 0;
    }
    if (mode == "count" && argc >= 4) {
      SubscriberConfig c;
      c.channel = argv[2];
      if (argc >= 5) c.policy = parse_policy(argv[4]);
      c.attach_timeout = 10s;
      const std::uint64_t want = std::strtoull(argv[3], nullptr, 10);
      Subscriber s(c);
      if (!s.wait_active(10s)) {
        say("error: never activated");
        return 1;
      }
      say("ready");
      std::uint64_t got = 0;
      std::uint64_t expect = 0;
      bool in_order = true;
      while (got < want && std::chrono::steady_clock::now() < deadline) {
        got += s.poll([&](const Tick& t) {
          in_order = in_order && (expect == 0 || t.seq == expect);
          expect = t.seq + 1;
        });
      }
      say("got " + std::to_string(got) + (in_order ? " in order" : " gap"));
      return 0;
    }
    if (mode == "stream" && argc >= 4) {
      PublisherConfig c;
      c.channel = argv[2];
      c.conductor_period = 1ms;
      const std::uint64_t n = std::strtoull(argv[3], nullptr, 10);
      Publisher p(c);
      say("ready");
      if (p.wait_subscribers(1, 10s) != 1) return 1;
      Tick batch[16];
      for (std::uint64_t i = 0; i < n && std::chrono::steady_clock::now() < deadline;) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(16, n - i));
        for (std::size_t j = 0; j < k; ++j) batch[j] = test::payload(i + j);
        for (std::size_t done = 0; done < k && std::chrono::steady_clock::now() < deadline;) {
          done += p.publish(std::span<const Tick>(batch + done, k - done)).published;
        }
        i += k;
        std::this_thread::sleep_for(100us);
      }
      // Stays (its line stays up) until killed, or its deadline.
      while (std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
      return 0;
    }
    if (mode == "pub" || mode == "pub-locked" || mode == "pub-big") {
      PublisherConfig c;
      c.channel = argv[2];
      c.conductor_period = 1ms;
      if (argc >= 4) c.shm_dir = argv[3];
      if (mode == "pub-locked") {
        const rlimit none{0, 0};
        ::setrlimit(RLIMIT_MEMLOCK, &none);
        c.lock_memory = true;
      }
      if (mode == "pub-big") {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit small{1 << 20, 1 << 20};
        ::setrlimit(RLIMIT_FSIZE, &small);
        c.ring_capacity = 1 << 16;  // 4 MiB a ring
      }
      Publisher p(c);
      say("ready");
      if (mode != "pub") return 0;  // those two are expected to fail at start: no need to stay
      Tick t{};
      while (std::chrono::steady_clock::now() < deadline) {
        (void)p.publish(t);
        std::this_thread::sleep_for(1ms);
      }
      return 0;
    }
  } catch (const std::exception& e) {
    say(std::string("error: ") + e.what());
    return 1;
  }
  return 2;
}
