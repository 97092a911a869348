// FailoverSubscriber over two shared-memory lines: a line that closes and comes back, a line
// whose publisher process is killed with kill -9 mid-stream. Every sequence number delivered
// once, in order, none lost.
#include <catch2/catch.hpp>

#include <span>
#include <vector>

#include "peer.hpp"
#include "shm_test_util.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/failover.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

FailoverConfig lines(const std::string& a, const std::string& b) {
  FailoverConfig c;
  for (int i = 0; i < 2; ++i) {
    c.line[i].channel = i == 0 ? a : b;
    c.line[i].attach_timeout = 10s;
    c.line[i].publisher_timeout = 200ms;
  }
  c.reattach_every = 10ms;
  return c;
}

PublisherConfig publisher(const std::string& ch) {
  PublisherConfig c;
  c.channel = ch;
  c.conductor_period = 1ms;
  return c;
}

// What the app sees: sequence numbers in order, each once, payloads intact.
struct App {
  std::uint64_t expect = 1;
  std::uint64_t got = 0;
  bool ok = true;
  void operator()(const Tick& t) {
    ok = ok && t.seq == expect && payload_ok(t) && t.order_ref == t.seq - 1;
    expect = t.seq + 1;
    ++got;
  }
};

// Publishes payload(from..to-1) on `pub`, polling `fs` whenever the ring is full.
void publish(Publisher& pub, std::uint64_t from, std::uint64_t to, FailoverSubscriber& fs, App& app) {
  std::vector<Tick> batch;
  for (std::uint64_t i = from; i < to; i += 32) {
    batch.clear();
    for (std::uint64_t j = i; j < std::min(to, i + 32); ++j) batch.push_back(payload(j));
    std::size_t done = 0;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (done < batch.size() && std::chrono::steady_clock::now() < deadline) {
      done += pub.publish(std::span<const Tick>(batch).subspan(done)).published;
      (void)fs.poll(app);
    }
    REQUIRE(done == batch.size());
  }
}

}  // namespace

// Its poll writes it on every call: on lines of its own wherever the application puts it, as
// Publisher and Subscriber are (shm_channel_test).
TEST_CASE("a FailoverSubscriber lies on lines of its own", "[failover]") {
  STATIC_REQUIRE(alignof(FailoverSubscriber) % (2 * kCacheLine) == 0);
  STATIC_REQUIRE(sizeof(FailoverSubscriber) % (2 * kCacheLine) == 0);
}

TEST_CASE("a line that closes goes down without a gap, and is used again once its publisher is back", "[failover]") {
  const auto a = unique_channel("fo-a");
  const auto b = unique_channel("fo-b");
  Publisher pa(publisher(a));
  auto pb = std::make_unique<Publisher>(publisher(b));
  FailoverSubscriber fs(lines(a, b));
  REQUIRE(wait_for_subscribers(pa, 1));
  REQUIRE(wait_for_subscribers(*pb, 1));
  App app;
  // Both lines, B sometimes first.
  for (std::uint64_t i = 0; i < 40'000; i += 1000) {
    if ((i / 1000) % 3 == 0) {
      publish(*pb, i, i + 1000, fs, app);
      publish(pa, i, i + 1000, fs, app);
    } else {
      publish(pa, i, i + 1000, fs, app);
      publish(*pb, i, i + 1000, fs, app);
    }
  }
  REQUIRE(eventually([&] { (void)fs.poll(app); return app.got == 40'000; }));
  auto c = fs.counters();
  CHECK(c.line[0].first > 0);
  CHECK(c.line[1].first > 0);
  CHECK(c.line[0].first + c.line[1].first == 40'000);
  CHECK(c.line[0].duplicates + c.line[1].duplicates == 40'000);

  pb.reset();  // line B's publisher closes the channel
  REQUIRE(eventually([&] { (void)fs.poll(app); return !fs.line_up(1); }));
  publish(pa, 40'000, 60'000, fs, app);
  REQUIRE(eventually([&] { (void)fs.poll(app); return app.got == 60'000; }));

  // B comes back from the start of the stream, as a restarted replay would, and catches up.
  pb = std::make_unique<Publisher>(publisher(b));
  REQUIRE(eventually([&] { (void)fs.poll(app); pb->service(); return fs.line_up(1) && pb->subscriber_count() == 1; }));
  publish(*pb, 0, 60'000, fs, app);
  for (std::uint64_t i = 60'000; i < 80'000; i += 1000) {
    publish(*pb, i, i + 1000, fs, app);
    publish(pa, i, i + 1000, fs, app);
  }
  REQUIRE(eventually([&] { (void)fs.poll(app); return app.got == 80'000; }));
  CHECK(app.ok);
  c = fs.counters();
  CHECK(c.delivered == 80'000);
  CHECK(c.gaps == 0);
  CHECK(c.skipped == 0);
  CHECK(c.line[1].downs == 1);
  CHECK(c.line[1].up);
  CHECK(c.line[1].down_ns > 0);
  CHECK(c.line[1].first >= 20'000);  // B led from 60,000 on
  CHECK(c.line[0].downs == 0);
}

TEST_CASE("two publisher processes, one killed with kill -9 mid-stream: nothing lost, nothing twice, in order", "[failover]") {
  const auto a = unique_channel("fo-ka");
  const auto b = unique_channel("fo-kb");
  constexpr std::uint64_t n = 100'000;
  Peer pa({"stream", a, std::to_string(n)});
  Peer pb({"stream", b, std::to_string(n)});
  FailoverSubscriber fs(lines(a, b));
  App app;
  REQUIRE(eventually([&] { (void)fs.poll(app); return app.got >= n / 4; }, 30s));
  pb.kill9();
  REQUIRE(eventually([&] { (void)fs.poll(app); return app.got == n; }, 30s));
  REQUIRE(eventually([&] { (void)fs.poll(app); return !fs.line_up(1); }, 10s));
  CHECK(app.ok);
  const auto c = fs.counters();
  CHECK(c.delivered == n);
  CHECK(c.gaps == 0);
  CHECK(c.skipped == 0);
  CHECK(c.line[1].downs == 1);
  CHECK(c.line[0].downs == 0);
}

// A publisher that says it has ended (here: silent, its heartbeat a second apart against a
// 20 ms publisher_timeout) but goes on writing: its line never comes up empty, yet goes down
// once it has brought more than its ring held when the end was seen.
TEST_CASE("a line whose publisher writes after its end goes down all the same", "[failover]") {
  const auto a = unique_channel("fo-wa");
  const auto b = unique_channel("fo-wb");
  PublisherConfig silent = publisher(a);
  silent.conductor_period = 1000ms;
  silent.ring_capacity = 1024;
  Publisher pa(silent);
  Publisher pb(publisher(b));
  FailoverConfig c = lines(a, b);
  c.line[0].publisher_timeout = 20ms;
  FailoverSubscriber fs(c);
  REQUIRE(wait_for_subscribers(pa, 1));
  REQUIRE(wait_for_subscribers(pb, 1));
  App app;
  std::uint64_t i = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (fs.counters().line[0].downs == 0 && std::chrono::steady_clock::now() < deadline) {
    publish(pa, i, i + 32, fs, app);  // line B stays empty: the failover looks at the lines
    i += 32;
  }
  const auto k = fs.counters();
  CHECK(k.line[0].downs == 1);
  CHECK(k.line[1].downs == 0);
  CHECK(app.ok);
  CHECK(k.gaps == 0);
}

// The other side of the rule above: a line whose publisher closed with a ring the other line
// lacks is read out, slowly and never found empty, before it goes down.
TEST_CASE("a line whose publisher closed is read out before it goes down, however slowly", "[failover]") {
  const auto a = unique_channel("fo-ra");
  const auto b = unique_channel("fo-rb");
  PublisherConfig full = publisher(a);
  full.ring_capacity = 1024;
  auto pa = std::make_unique<Publisher>(full);
  Publisher pb(publisher(b));
  FailoverSubscriber fs(lines(a, b));
  REQUIRE(wait_for_subscribers(*pa, 1));
  REQUIRE(wait_for_subscribers(pb, 1));
  std::vector<Tick> ticks;
  for (std::uint64_t i = 0; i < 1000; ++i) ticks.push_back(payload(i));
  REQUIRE(pa->publish(std::span<const Tick>(ticks)).published == 1000);
  pa.reset();  // closed, its ring full of what line B never had
  App app;
  // A tick a poll, 20 us apart: line B is empty at every poll and the failover looks at line A
  // every 64 polls while it still has ticks.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (fs.line_up(0) && std::chrono::steady_clock::now() < deadline) {
    (void)fs.poll(app, 1);
    std::this_thread::sleep_for(20us);
  }
  const auto k = fs.counters();
  CHECK(app.got == 1000);
  CHECK(app.ok);
  CHECK(k.gaps == 0);
  CHECK(k.line[0].downs == 1);
}

// poll() reads two rings' lines inline (FailoverHot): this is its hole watch and its counters.
TEST_CASE("a hole neither line fills is given up after hole_timeout, and what waited beyond it follows", "[failover]") {
  const auto a = unique_channel("fo-ha");
  const auto b = unique_channel("fo-hb");
  Publisher pa(publisher(a));
  PublisherConfig small = publisher(b);
  small.ring_capacity = 16;
  Publisher pb(small);
  FailoverConfig c = lines(a, b);
  c.line[1].policy = SlowConsumerPolicy::drop;
  c.hole_timeout = 2ms;
  FailoverSubscriber fs(c);
  REQUIRE(wait_for_subscribers(pa, 1));
  REQUIRE(wait_for_subscribers(pb, 1));
  // Line B runs 1000 ticks unread: its ring keeps only the last of them. Line A brings 1..100
  // and then nothing: 101 up to B's oldest is a hole neither line will fill.
  std::vector<Tick> ticks;
  for (std::uint64_t i = 0; i < 1000; ++i) ticks.push_back(payload(i));
  REQUIRE(pb.publish(std::span<const Tick>(ticks)).published == 1000);
  REQUIRE(pa.publish(std::span<const Tick>(ticks).first(100)).published == 100);
  std::uint64_t last = 0;
  std::uint64_t got = 0;
  bool ok = true;
  auto app = [&](const Tick& t) {
    ok = ok && t.seq > last && payload_ok(t) && t.order_ref == t.seq - 1;
    last = t.seq;
    ++got;
  };
  REQUIRE(eventually([&] { (void)fs.poll(app); return last == 1000; }, 10s));
  CHECK(ok);
  const FailoverCounters n = fs.counters();
  CHECK(n.delivered == got);
  CHECK(n.line[0].first == 100);
  CHECK(n.line[1].first == got - 100);
  CHECK(n.line[1].first > 0);
  CHECK(n.line[1].first < 1000 - 100);
  CHECK(n.skipped == 1000 - got);  // the hole given up, not lost on both lines
  CHECK(n.gaps == 0);
  CHECK(fs.line_up(0));
  CHECK(fs.line_up(1));
}

TEST_CASE("with measure_lead, each tick both lines brought is timed once, for the line that brought it first",
          "[failover]") {
  const auto a = unique_channel("fo-la");
  const auto b = unique_channel("fo-lb");
  Publisher pa(publisher(a));
  Publisher pb(publisher(b));
  FailoverConfig config = lines(a, b);
  config.measure_lead = true;
  FailoverSubscriber fs(config);
  REQUIRE(wait_for_subscribers(pa, 1));
  REQUIRE(wait_for_subscribers(pb, 1));
  App app;
  std::uint64_t led[2] = {0, 0};
  std::uint64_t bad = 0;
  auto lead = [&](int line, std::uint64_t cycles) {
    ++led[line & 1];
    if (cycles > Clock::instance().ns_to_cycles(60e9)) ++bad;  // a minute: not a difference of two stamps
  };
  // 1,000 ticks on `first`, all delivered, then the same 1,000 on the other line, all discarded.
  auto round = [&](Publisher& first, Publisher& second, std::uint64_t from, int second_line) {
    std::vector<Tick> batch;
    for (std::uint64_t i = from; i < from + 1000; ++i) batch.push_back(payload(i));
    REQUIRE(first.publish(batch).published == batch.size());
    REQUIRE(eventually([&] { (void)fs.poll(app, lead); return app.got == from + 1000; }, 10s));
    const std::uint64_t dup = fs.counters().line[second_line].duplicates;
    REQUIRE(second.publish(batch).published == batch.size());
    REQUIRE(eventually([&] { (void)fs.poll(app, lead); return fs.counters().line[second_line].duplicates == dup + 1000; },
                       10s));
  };
  round(pb, pa, 0, 0);
  CHECK(led[1] == 1000);
  CHECK(led[0] == 0);
  round(pa, pb, 1000, 1);
  CHECK(led[0] == 1000);
  CHECK(led[1] == 1000);
  CHECK(bad == 0);
  CHECK(app.ok);
  // Without measure_lead nothing is timed: a second subscriber over the same lines, fed both
  // lines' copies of 1,000 more ticks, delivers them and times none.
  FailoverSubscriber plain(lines(a, b));
  REQUIRE(wait_for_subscribers(pa, 2));
  REQUIRE(wait_for_subscribers(pb, 2));
  App later;
  later.expect = 2001;
  std::vector<Tick> more;
  for (std::uint64_t i = 2000; i < 3000; ++i) more.push_back(payload(i));
  REQUIRE(pa.publish(more).published == more.size());
  REQUIRE(pb.publish(more).published == more.size());
  REQUIRE(eventually([&] { (void)plain.poll(later, lead); return plain.counters().line[1].duplicates == 1000; }, 10s));
  CHECK(later.got == 1000);
  CHECK(later.ok);
  CHECK(led[0] + led[1] == 2000);
}

TEST_CASE("with measure_lead, a second copy that comes a window or more after the first is not timed",
          "[failover]") {
  const auto a = unique_channel("fo-wa");
  const auto b = unique_channel("fo-wb");
  Publisher pa(publisher(a));
  Publisher pb(publisher(b));
  FailoverConfig config = lines(a, b);
  config.measure_lead = true;
  config.window = 16;
  FailoverSubscriber fs(config);
  REQUIRE(wait_for_subscribers(pa, 1));
  REQUIRE(wait_for_subscribers(pb, 1));
  App app;
  std::uint64_t led[2] = {0, 0};
  auto lead = [&](int line, std::uint64_t) { ++led[line & 1]; };
  std::vector<Tick> batch;
  for (std::uint64_t i = 0; i < 100; ++i) batch.push_back(payload(i));
  REQUIRE(pb.publish(batch).published == batch.size());
  REQUIRE(eventually([&] { (void)fs.poll(app, lead); return app.got == 100; }, 10s));
  REQUIRE(pa.publish(batch).published == batch.size());
  REQUIRE(eventually([&] { (void)fs.poll(app, lead); return fs.counters().line[0].duplicates == 100; }, 10s));
  // Only the last 16 stamps were still in the window when line A's copies came.
  CHECK(led[1] == 16);
  CHECK(led[0] == 0);
  CHECK(app.ok);
}

TEST_CASE("failover configs that cannot arbitrate are refused, naming why", "[failover]") {
  FailoverConfig c = lines("fo-x", "fo-y");
  c.line[1].start = StartMode::snapshot;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("start snapshot and policy conflate"));
  c = lines("fo-x", "fo-y");
  c.line[0].policy = SlowConsumerPolicy::conflate;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("start snapshot and policy conflate"));
  c = lines("fo-x", "fo-x");
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("line B is line A"));
  c.line[1].rdma.device = "rxe1";  // shm uses no device: still one line
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("line B is line A"));
  c.line[1].shm_dir = "/tmp";  // the same name in another directory is another channel
  CHECK_NOTHROW(c.validate());
  c.line[1].transport = TransportKind::rc;  // RC: the publisher's address and port tell lines apart
  c.line[0].transport = TransportKind::rc;
  c.line[0].rdma.address = c.line[1].rdma.address = "10.0.0.1";
  c.line[1].rdma.device = "";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("line B is line A"));
  c.line[1].rdma.port = 7472;
  CHECK_NOTHROW(c.validate());
  c.window = 1000;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("failover window: 1000"));
  c.window = 4096;
  c.line[1].ring_capacity = 3;
  CHECK_THROWS_WITH(c.validate(), Catch::StartsWith("failover line B"));
  c.line[1].ring_capacity = 0;
  // UD: one group per line, and a hole waits for line B's read before it is given up.
  c.line[0].transport = c.line[1].transport = TransportKind::ud;
  c.line[0].rdma.groups = {"239.1.1.1"};
  c.line[1].rdma.groups = {"239.1.1.2", "239.1.1.3"};
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("a UD line joins one group (2 given)"));
  c.line[1].rdma.groups = {"239.1.1.2"};
  CHECK_NOTHROW(c.validate());
  CHECK(c.line_recovery_delay(0) == 200us);
  CHECK(c.line_recovery_delay(1) == 400us);
  c.hole_timeout = 400us;  // line B: the delay, then the read, must fit
  CHECK_THROWS_WITH(c.validate(), Catch::StartsWith("failover line B") &&
                                      Catch::Contains("hole_timeout (400 us) must be at least twice its recovery delay (400 us)"));
  c.line[1].rdma.recovery_delay = 300us;  // its own, kept
  CHECK(c.line_recovery_delay(1) == 300us);
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("twice its recovery delay (300 us)"));
  c.hole_timeout = 600us;
  CHECK_NOTHROW(c.validate());
  c.line[0].rdma.recovery_delay = 300us;  // equal delays: both lines would read what both lost
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("must be longer than line A's (300 us)"));
  c.line[1].rdma.recovery_delay = 0us;    // line B's default: twice line A's
  CHECK(c.line_recovery_delay(1) == 600us);
  c.hole_timeout = 1200us;
  CHECK_NOTHROW(c.validate());
  c.recovery_delay = 600ms;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("failover recovery_delay: 600000 us"));
}
