// A second process for the shared-memory tests: a subscriber or a publisher that runs until
// killed (bounded by a deadline), printing "ready" once attached.
//   shm_peer sub CHANNEL POLICY      attaches and consumes slowly
//   shm_peer pub CHANNEL             publishes a tick every millisecond
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: shm_peer sub CHANNEL POLICY | pub CHANNEL\n");
    return 2;
  }
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  try {
    if (std::strcmp(argv[1], "sub") == 0 && argc >= 4) {
      SubscriberConfig c;
      c.channel = argv[2];
      c.policy = parse_policy(argv[3]);
      c.attach_timeout = 10s;
      Subscriber s(c);
      std::printf("ready\n");
      std::fflush(stdout);
      while (std::chrono::steady_clock::now() < deadline) {
        (void)s.poll([](const Tick&) {}, 1);
        std::this_thread::sleep_for(1ms);
      }
      return 0;
    }
    if (std::strcmp(argv[1], "pub") == 0) {
      PublisherConfig c;
      c.channel = argv[2];
      c.conductor_period = 1ms;
      Publisher p(c);
      std::printf("ready\n");
      std::fflush(stdout);
      Tick t{};
      while (std::chrono::steady_clock::now() < deadline) {
        (void)p.publish(t);
        std::this_thread::sleep_for(1ms);
      }
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shm_peer: %s\n", e.what());
    return 1;
  }
  return 2;
}
