// Hot failover over RC (issue 15): one FailoverSubscriber reading two rc_peer publisher
// processes that publish the same stream; one of them killed with kill -9 mid-stream. Every
// sequence number is delivered once, in order, intact, none lost; the dead line is reported down.
// The line killed is the one that brought more ticks first so far: the rest must come from the
// other.
//
// Size: 100,000 ticks on each line, CQ polling (what rxe gives without split commits); about
// 10 s in the rig. TICKRAIL_RC_TICKS overrides it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "rc_test_util.hpp"
#include "rig_env.hpp"
#include "tickrail/failover.hpp"

using namespace std::chrono_literals;
using tickrail::rc_test::Child;
using namespace tickrail;

namespace {

std::string peer_exe() {
  const char* p = std::getenv("TICKRAIL_RC_PEER");
  REQUIRE(p != nullptr);
  return p;
}

std::string addr() { return rdma::test::address(rdma::test::device()); }

struct Line {
  std::unique_ptr<Child> proc;
  std::uint16_t port = 0;
};

Line start_publisher(std::uint64_t ticks) {
  Line l{std::make_unique<Child>(peer_exe(), std::vector<std::string>{"pub", "--addr", addr(), "--port", "0", "--subs",
                                                                      "1", "--ticks", std::to_string(ticks),
                                                                      "--batch", "8"}),
         0};
  const auto m = l.proc->expect(R"(listening (\d+))", 30s);
  INFO(l.proc->output());
  REQUIRE(m);
  l.port = static_cast<std::uint16_t>(std::stoul((*m)[1]));
  return l;
}

SubscriberConfig line_config(std::uint16_t port) {
  SubscriberConfig c;
  c.transport = TransportKind::rc;
  c.channel = "rc-test";  // rc_peer's default: the two lines differ by port
  c.rdma.address = addr();
  c.rdma.port = port;
  c.rdma.polling = RcPolling::cq;
  c.rdma.connect_timeout = 20s;
  c.attach_timeout = 30s;
  c.publisher_timeout = 5s;  // a guest starved by its host stalls for seconds
  return c;
}

// What the app sees: sequence numbers in order from 1, each once, payloads intact.
struct App {
  std::uint64_t expect = 1;
  std::uint64_t got = 0;
  std::uint64_t bad = 0;
  void operator()(const Tick& t) {
    if (t.seq != expect || !rc_test::payload_ok(t)) ++bad;
    expect = t.seq + 1;
    ++got;
  }
};

template <class Done>
bool poll_until(FailoverSubscriber& fs, App& app, Done done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (fs.poll(app) == 0) cpu_relax();
  }
  return true;
}

}  // namespace

TEST_CASE("a publisher process killed with kill -9 costs its failover subscriber nothing", "[failover]") {
  const char* t = std::getenv("TICKRAIL_RC_TICKS");
  const std::uint64_t n = t != nullptr && *t != '\0' ? std::stoull(t) : 100'000;
  Line a = start_publisher(n);
  Line b = start_publisher(n);
  FailoverConfig config;
  config.line[0] = line_config(a.port);
  config.line[1] = line_config(b.port);
  FailoverSubscriber fs(config);
  REQUIRE(fs.line_up(0));
  REQUIRE(fs.line_up(1));
  App app;
  INFO("line A:\n" << a.proc->output() << "\nline B:\n" << b.proc->output());
  REQUIRE(poll_until(fs, app, [&] { return app.got >= n / 4; }, 240s));
  // The line that brought more so far dies: the rest of the stream must come from the other.
  const FailoverCounters before = fs.counters();
  const int dead = before.line[0].first >= before.line[1].first ? 0 : 1;
  const int alive = 1 - dead;
  Line& victim = dead == 0 ? a : b;
  victim.proc->signal(SIGKILL);
  REQUIRE(victim.proc->wait(10s) == 128 + SIGKILL);
  REQUIRE(poll_until(fs, app, [&] { return app.got >= n; }, 240s));
  // It is found dead (the connection's end, or at worst its heartbeat's silence).
  REQUIRE(poll_until(fs, app, [&] { return !fs.line_up(dead); }, 30s));
  const FailoverCounters c = fs.counters();
  CHECK(app.bad == 0);
  CHECK(app.got == n);
  CHECK(c.delivered == n);
  CHECK(c.gaps == 0);
  CHECK(c.skipped == 0);
  CHECK(c.line[dead].downs == 1);
  CHECK(c.line[alive].downs == 0);
  CHECK(c.line[0].first + c.line[1].first == n);
  CHECK(c.line[alive].first > before.line[alive].first);  // the rest came from the survivor
  CHECK((dead == 0 ? b : a).proc->expect(R"(published)", 60s));
}
