// The RC acceptance scenarios, each process on its own (rc_peer), on the rig's device:
// 1 publisher and 4 subscribers under block in both polling modes; drop with stopped
// subscribers; disconnect; kill -9 of a subscriber; kill -9 of the publisher.
//
// Sizes: the block scenario streams 1,000,000 ticks to each of the four subscribers with CQ
// polling. Memory polling on a device that does not report in-order placement (rxe, the rig's)
// costs a WRITE per tick for the commit word: under the rig's software emulation that runs
// at some 1,600 ticks/s per subscriber, so it streams 100,000 there. TICKRAIL_RC_TICKS
// overrides both (e.g. 1000000 on a real NIC).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "rc_test_util.hpp"
#include "rig_env.hpp"

using namespace std::chrono_literals;
using tickrail::rc_test::Child;
using Catch::Contains;

namespace {

std::string peer_exe() {
  const char* p = std::getenv("TICKRAIL_RC_PEER");
  REQUIRE(p != nullptr);
  return p;
}

std::uint64_t ticks(std::uint64_t def) {
  const char* t = std::getenv("TICKRAIL_RC_TICKS");
  return t != nullptr && *t != '\0' ? std::stoull(t) : def;
}

std::string addr() { return tickrail::rdma::test::address(tickrail::rdma::test::device()); }

struct Publisher {
  std::unique_ptr<Child> proc;
  std::string port;
};

Publisher start_publisher(std::vector<std::string> extra) {
  std::vector<std::string> args{"pub", "--addr", addr()};
  args.insert(args.end(), extra.begin(), extra.end());
  Publisher p{std::make_unique<Child>(peer_exe(), args), ""};
  const auto m = p.proc->expect(R"(listening (\d+))", 30s);
  INFO(p.proc->output());
  REQUIRE(m);
  p.port = (*m)[1];
  return p;
}

std::unique_ptr<Child> start_subscriber(const Publisher& pub, std::vector<std::string> extra) {
  std::vector<std::string> args{"sub", "--addr", addr(), "--port", pub.port};
  args.insert(args.end(), extra.begin(), extra.end());
  auto c = std::make_unique<Child>(peer_exe(), args);
  const auto m = c->expect(R"(ready first=\d+|error: .*)", 60s);
  INFO(c->output());
  REQUIRE(m);
  REQUIRE(m->str().rfind("ready", 0) == 0);
  return c;
}

struct Done {
  std::uint64_t received = 0, lost = 0, laps = 0, next = 0;
  std::string state, line;
};

Done finish(Child& c, std::chrono::milliseconds timeout) {
  const auto m = c.expect(R"(done received=(\d+) lost=(\d+) laps=(\d+) next=(\d+) state=([a-z ]+) bad_order)",
                          timeout);
  INFO(c.output());
  REQUIRE(m);
  Done d{std::stoull((*m)[1]), std::stoull((*m)[2]), std::stoull((*m)[3]), std::stoull((*m)[4]),
         (*m)[5], c.line()};
  return d;
}

}  // namespace

TEST_CASE("fourSubscriberProcessesReceiveEveryTickOnceInOrderUnderBlock", "[block]") {
  const auto polling = GENERATE(as<std::string>{}, "cq", "memory");
  const std::uint64_t n = ticks(polling == "cq" ? 1'000'000 : 100'000);
  INFO("polling " << polling << ", " << n << " ticks");
  auto pub = start_publisher({"--subs", "4", "--ticks", std::to_string(n), "--batch", "64"});
  std::vector<std::unique_ptr<Child>> subs;
  for (int i = 0; i < 4; ++i) {
    subs.push_back(start_subscriber(pub, {"--polling", polling, "--split", "--ticks",
                                          std::to_string(n), "--capacity", "4096"}));
  }
  const auto started = std::chrono::steady_clock::now();
  for (auto& s : subs) {
    const Done d = finish(*s, 600s);
    INFO(d.line);
    CHECK(d.received == n);
    CHECK(d.lost == 0);
    CHECK(d.next == n + 1);
    CHECK(s->wait(10s) == 0);  // every tick in order, payload intact (checked by the process)
  }
  const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started);
  WARN(n << " ticks to 4 subscribers (" << polling << ") in " << secs.count() << " s");
  const auto m = pub.proc->expect(R"(done published (\d+) evictions (\d+) reclaimed (\d+))", 60s);
  INFO(pub.proc->output());
  REQUIRE(m);
  CHECK((*m)[1] == std::to_string(n));
  CHECK((*m)[2] == "0");
  CHECK(pub.proc->wait(30s) == 0);
}

TEST_CASE("stoppedDropSubscribersCountExactlyWhatTheyLostAndOthersLoseNothing") {
  const std::uint64_t n = 20000;
  auto pub = start_publisher({"--subs", "4", "--ticks", std::to_string(n), "--batch", "32",
                              "--linger-ms", "3000"});
  // Two that keep up (block: never lose) and two drop subscribers, one per polling mode, that
  // are stopped before the first tick and resumed only after the last one was published.
  auto keep_mem = start_subscriber(pub, {"--polling", "memory", "--split", "--ticks", std::to_string(n)});
  auto keep_cq = start_subscriber(pub, {"--polling", "cq", "--ticks", std::to_string(n)});
  auto drop_mem = start_subscriber(pub, {"--polling", "memory", "--split", "--policy", "drop",
                                         "--capacity", "1024", "--ticks", std::to_string(n)});
  auto drop_cq = start_subscriber(pub, {"--polling", "cq", "--policy", "drop", "--capacity",
                                        "1024", "--ticks", std::to_string(n)});
  drop_mem->signal(SIGSTOP);
  drop_cq->signal(SIGSTOP);
  // The publisher gets through all of it while they sleep: drop never makes it wait.
  const auto published = pub.proc->expect(R"(published (\d+))", 300s);
  INFO(pub.proc->output());
  REQUIRE(published);
  drop_mem->signal(SIGCONT);
  drop_cq->signal(SIGCONT);
  for (auto* s : {keep_mem.get(), keep_cq.get()}) {
    const Done d = finish(*s, 120s);
    INFO(d.line);
    CHECK(d.received == n);
    CHECK(d.lost == 0);
    CHECK(s->wait(10s) == 0);
  }
  for (auto* s : {drop_mem.get(), drop_cq.get()}) {
    const Done d = finish(*s, 120s);
    INFO(d.line);
    CHECK(d.lost > 0);
    CHECK(d.laps > 0);
    CHECK(d.received + d.lost == n);
    CHECK(d.received >= 1024);  // its ring's worth survived the stop
    CHECK(s->wait(10s) == 0);    // what it did receive: in order, intact
  }
}

TEST_CASE("disconnectPolicyEvictsTheStoppedSubscriberAndTellsIt") {
  const std::uint64_t n = 20000;
  auto pub = start_publisher({"--subs", "2", "--ticks", std::to_string(n), "--batch", "32",
                              "--linger-ms", "2000"});
  auto keeper = start_subscriber(pub, {"--polling", "cq", "--ticks", std::to_string(n)});
  auto stopped = start_subscriber(pub, {"--polling", "memory", "--split", "--policy",
                                        "disconnect", "--disconnect-after-ms", "300",
                                        "--capacity", "512", "--ticks", std::to_string(n)});
  stopped->signal(SIGSTOP);
  const auto published = pub.proc->expect(R"(published (\d+))", 300s);
  INFO(pub.proc->output());
  REQUIRE(published);
  stopped->signal(SIGCONT);
  const Done k = finish(*keeper, 120s);
  CHECK(k.received == n);
  CHECK(keeper->wait(10s) == 0);
  const Done d = finish(*stopped, 60s);
  INFO(d.line);
  CHECK(d.state == "evicted");
  CHECK_THAT(d.line, Contains("reason=evicted by the publisher"));
  // Everything it took before the stop (the stop races the first ticks) and then what its ring
  // held when it was evicted, drained: no loss, no gap, and at least the ring's worth.
  CHECK(d.received >= 512);
  CHECK(d.received < n);
  CHECK(d.lost == 0);
  CHECK(d.next == d.received + 1);
  CHECK(stopped->wait(10s) == 0);
  const auto m = pub.proc->expect(R"(done published \d+ evictions (\d+))", 60s);
  REQUIRE(m);
  CHECK((*m)[1] == "1");
}

TEST_CASE("killedSubscriberIsFreedWhileTheOthersCarryOn") {
  const std::uint64_t n = 20000;
  auto pub = start_publisher({"--subs", "4", "--ticks", std::to_string(n), "--batch", "32"});
  std::vector<std::unique_ptr<Child>> subs;
  for (int i = 0; i < 4; ++i) {
    subs.push_back(start_subscriber(pub, {"--polling", i % 2 == 0 ? "memory" : "cq", "--split",
                                          "--capacity", "1024", "--ticks", std::to_string(n)}));
  }
  REQUIRE(pub.proc->expect(R"(serving 4)", 60s));
  subs[3]->signal(SIGKILL);
  REQUIRE(subs[3]->wait(10s) == 128 + SIGKILL);
  // The publisher notices (DISCONNECTED from the kernel, or a failed WRITE) and frees it.
  const auto freed = pub.proc->expect(R"(links 3 active 3 reclaimed 1)", 60s);
  INFO(pub.proc->output());
  CHECK(freed);
  for (int i = 0; i < 3; ++i) {
    const Done d = finish(*subs[static_cast<std::size_t>(i)], 300s);
    INFO(d.line);
    CHECK(d.received == n);
    CHECK(d.lost == 0);
    CHECK(subs[static_cast<std::size_t>(i)]->wait(10s) == 0);
  }
  REQUIRE(pub.proc->expect(R"(done published)", 60s));
}

TEST_CASE("killedPublisherIsReportedByEverySubscriberWithinBoundedTime") {
  auto pub = start_publisher({"--subs", "4", "--ticks", "0", "--batch", "8"});
  std::vector<std::unique_ptr<Child>> subs;
  for (int i = 0; i < 4; ++i) {
    subs.push_back(start_subscriber(pub, {"--polling", i % 2 == 0 ? "memory" : "cq", "--split",
                                          "--publisher-timeout-ms", "5000"}));
  }
  REQUIRE(pub.proc->expect(R"(serving 4)", 60s));
  std::this_thread::sleep_for(1s);  // ticks flowing
  pub.proc->signal(SIGKILL);
  REQUIRE(pub.proc->wait(10s) == 128 + SIGKILL);
  for (auto& s : subs) {
    // Bound: the kernel's DISCONNECTED, or at worst the 5 s heartbeat silence, plus slack.
    const Done d = finish(*s, 30s);
    INFO(d.line);
    CHECK(d.state == "publisher gone");
    CHECK(d.received > 0);
    CHECK_THAT(d.line, Contains("reason=the publisher of channel"));
    CHECK(s->wait(10s) == 0);
  }
}

TEST_CASE("hungPublisherIsReportedSilentByItsHeartbeat") {
  // Stopped, not killed: the connection stays up, only the heartbeat tells.
  auto pub = start_publisher({"--subs", "2", "--ticks", "0", "--batch", "8"});
  std::vector<std::unique_ptr<Child>> subs;
  for (const char* polling : {"memory", "cq"}) {
    subs.push_back(start_subscriber(pub, {"--polling", polling, "--split",
                                          "--publisher-timeout-ms", "2000"}));
  }
  REQUIRE(pub.proc->expect(R"(serving 2)", 60s));
  std::this_thread::sleep_for(500ms);  // ticks flowing
  pub.proc->signal(SIGSTOP);
  for (auto& s : subs) {
    const Done d = finish(*s, 30s);
    INFO(d.line);
    CHECK(d.state == "publisher gone");
    CHECK(d.received > 0);
    CHECK_THAT(d.line, Contains("has been silent for more than 2000 ms"));
    CHECK(s->wait(10s) == 0);
  }
  pub.proc->signal(SIGKILL);
  (void)pub.proc->wait(10s);
}

TEST_CASE("aHostThatWasStoppedDoesNotMakeItsPublisherLookDead") {
  // As when a VM is paused or starved: publisher and subscriber both stop for longer than
  // publisher_timeout. The subscriber comes back first and must give the publisher its
  // heartbeats' time before calling it silent.
  const std::uint64_t n = 200000;
  auto pub = start_publisher({"--subs", "1", "--ticks", std::to_string(n), "--batch", "64",
                              "--heartbeat-ms", "300"});
  auto sub = start_subscriber(pub, {"--polling", "cq", "--ticks", std::to_string(n),
                                    "--publisher-timeout-ms", "2000"});
  REQUIRE(pub.proc->expect(R"(serving 1)", 60s));
  std::this_thread::sleep_for(200ms);
  pub.proc->signal(SIGSTOP);
  sub->signal(SIGSTOP);
  std::this_thread::sleep_for(3s);
  sub->signal(SIGCONT);
  std::this_thread::sleep_for(300ms);
  pub.proc->signal(SIGCONT);
  const Done d = finish(*sub, 300s);
  INFO(d.line);
  CHECK(d.received == n);
  CHECK(d.lost == 0);
  CHECK(sub->wait(10s) == 0);
  REQUIRE(pub.proc->expect(R"(done published)", 60s));
}
