// tickrail-jitter's Recorder and report (apps/jitter/jitter.hpp), with hand-made ticks and a
// clock of 1 ns per tick so that every figure is known exactly.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <thread>

#include "../../../apps/jitter/jitter.hpp"
#include "../../source_root.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"

using namespace tickrail;

namespace {
Tick tick(std::uint64_t seq, std::uint64_t send_ts) {
  Tick t{};
  t.seq = seq;
  t.send_ts = send_ts;
  return t;
}
}  // namespace

TEST_CASE("recorderMeasuresLatencyAndInterArrivalInNs", "[jitter]") {
  jitter::Recorder r(2.0);  // 2 ns per clock cycle
  r.on_tick(tick(1, 1000), 1100);  // 100 cycles = 200 ns
  r.on_tick(tick(2, 1100), 1150);  // 100 ns, 50 cycles after the previous receipt
  r.on_tick(tick(3, 1200), 1500);  // 600 ns
  CHECK(r.received() == 3);
  CHECK(r.latency().min() == 100);
  CHECK(r.latency().max() == 600);
  CHECK(r.latency().mean() == Approx(300.0));
  CHECK(r.interarrival().count() == 2);
  CHECK(r.interarrival().min() == 100);
  CHECK(r.interarrival().max() == 700);
  CHECK(r.lost() == 0);
  CHECK(r.gaps() == 0);
  CHECK(r.first_seq() == 1);
  CHECK(r.last_seq() == 3);
}

TEST_CASE("recorderCountsSequenceGapsAsLostAndLateJoinApart", "[jitter]") {
  jitter::Recorder r(1.0);
  r.on_tick(tick(5, 0), 10);   // joined at 5: 1..4 were before us, not lost
  r.on_tick(tick(6, 0), 10);
  r.on_tick(tick(9, 0), 10);   // 7, 8 lost
  r.on_tick(tick(10, 0), 10);
  r.on_tick(tick(20, 0), 10);  // 11..19 lost
  r.on_tick(tick(15, 0), 10);  // older than expected: out of order, not a gap
  CHECK(r.first_seq() == 5);
  CHECK(r.last_seq() == 20);
  CHECK(r.gaps() == 2);
  CHECK(r.lost() == 11);
  CHECK(r.out_of_order() == 1);
  const jitter::Window w = r.take_window(1.0);
  CHECK(w.count == 6);
  CHECK(w.lost == 11);
  CHECK(r.take_window(1.0).count == 0);  // the window starts again
  CHECK(r.latency().count() == 6);       // the totals do not
}

TEST_CASE("recorderNeverDropsASampleStampedAfterReceipt", "[jitter]") {
  jitter::Recorder r(1.0);
  r.on_tick(tick(1, 500), 400);  // a clock that differs between the two processes
  CHECK(r.received() == 1);
  CHECK(r.negative() == 1);
  CHECK(r.latency().max() == 0);
}

TEST_CASE("recorderRecordsPollGapsAndSkipsDeliberatePauses", "[jitter]") {
  jitter::Recorder r(1.0);
  r.on_poll(100);
  r.on_poll(130);
  r.on_poll(5130);  // the OS took the core for 5 us
  r.skip_poll_gap();
  r.on_poll(900000);  // after printing: not counted
  r.on_poll(900040);
  CHECK(r.poll_gap().count() == 3);
  CHECK(r.poll_gap().max() == 5000);
  CHECK(r.poll_gap().min() == 30);
}

TEST_CASE("jitterWindowReportsPercentilesOfTheLastSecondOnly", "[jitter]") {
  jitter::Recorder r(1.0);
  for (std::uint64_t i = 1; i <= 100; ++i) r.on_tick(tick(i, 0), i * 10);  // 10..1000 ns
  const jitter::Window w = r.take_window(0.5);
  CHECK(w.count == 100);
  CHECK(w.max_ns == 1000);
  CHECK(w.p50_ns == 500);
  CHECK(w.p99_ns == 990);
  r.on_tick(tick(101, 0), 7);
  const jitter::Window w2 = r.take_window(1.0);
  CHECK(w2.count == 1);
  CHECK(w2.max_ns == 7);
}

TEST_CASE("jitterReportSaysOneWayAndJsonHasEveryKey", "[jitter]") {
  jitter::Recorder r(1.0);
  r.on_tick(tick(1, 0), 100);
  r.on_tick(tick(3, 0), 300);
  r.on_poll(1);
  r.on_poll(2);
  jitter::RunInfo info;
  info.ended = "publisher_gone";
  info.transport = "shm";
  info.channel = "c";
  info.clock = "TSC";
  info.elapsed_s = 1.0;
  info.counters.received = 2;
  info.counters.lost = 1;
  info.position = 4;
  const std::string text = jitter::format_report(r, info);
  CHECK_THAT(text, Catch::Contains("ONE-WAY"));
  CHECK_THAT(text, Catch::Contains("latency"));
  CHECK_THAT(text, Catch::Contains("inter-arrival"));
  CHECK_THAT(text, Catch::Contains("poll gap"));
  CHECK_THAT(text, Catch::Contains("publisher gone, channel drained"));
  const nlohmann::json j = jitter::report_json(r, info);
  for (const char* k : {"count", "lost", "min_ns", "p50_ns", "mean_ns", "stdev_ns", "p90_ns",
                        "p99_ns", "p999_ns", "p9999_ns", "max_ns", "figure", "interarrival",
                        "poll_gap", "ended", "first_seq", "gaps"}) {
    INFO(k);
    CHECK(j.contains(k));
  }
  CHECK(j["figure"] == "one-way");
  CHECK(j["count"] == 2);
  CHECK(j["lost"] == 1);
  CHECK(j["max_ns"] == 300.0);
  CHECK(j["min_ns"] == 100.0);
}

TEST_CASE("jitterOptionsFromTomlAndPingPongModeParses", "[jitter]") {
  ConfigFile f("[jitter]\nmode = \"pingpong\"\ncpu = 1\nduration_ms = 2000\ncount = 5\njson = \"j.json\"\n", "j.toml");
  jitter::Options o;
  jitter::read_options(f.section("jitter"), o);
  CHECK(o.mode == jitter::Mode::pingpong);
  CHECK(o.cpu == 1);
  CHECK(o.duration == std::chrono::milliseconds(2000));
  CHECK(o.count == 5);
  CHECK(o.json == "j.json");
  f.check_all_read();
  ConfigFile bad("[jitter]\ncpu = -3\n", "b.toml");
  CHECK_THROWS_WITH(jitter::read_options(bad.section("jitter"), o),
                    Catch::Contains("b.toml:2:1: jitter.cpu: must be a cpu number"));
}

TEST_CASE("everyShippedConfigLoadsAsTheJitterReadsIt", "[jitter]") {
  const std::filesystem::path dir = source_tree::root() / "configs";
  REQUIRE(std::filesystem::is_directory(dir));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".toml") continue;
    INFO(e.path());
    ConfigFile f(e.path().string());
    SubscriberConfig sc;
    jitter::Options o;
    jitter::read_file(f, sc, o);
    ++files;
  }
  CHECK(files >= 5);
  ConfigFile j((dir / "jitter.toml").string());
  SubscriberConfig sc;
  read_subscriber_config(j, sc);
  CHECK(sc.attach_timeout == std::chrono::milliseconds(10000));
}

TEST_CASE("jitterCountsTicksLappedBeforeItsFirstReceiptAsLost", "[jitter]") {
  // A drop subscriber lapped before it ever polls: the ticks it lost come before its first
  // receipt, so no sequence gap shows them; they are lost all the same, not "before it joined".
  PublisherConfig pc;
  pc.channel = "jitter-test-lapped-" + std::to_string(getpid());
  pc.ring_capacity = 16;
  pc.max_subscribers = 2;
  Publisher pub(pc);
  SubscriberConfig sc;
  sc.channel = pc.channel;
  sc.policy = SlowConsumerPolicy::drop;
  Subscriber sub(sc);
  REQUIRE(pub.wait_subscribers(1, std::chrono::seconds(10)) == 1);
  REQUIRE(sub.wait_active(std::chrono::seconds(10)));
  constexpr std::uint64_t kPublished = 100;
  for (std::uint64_t i = 0; i < kPublished; ++i) REQUIRE(pub.publish(Tick{}).ok());
  jitter::Recorder r(1.0);
  while (sub.poll([&](const Tick& t) { r.on_tick(t, t.send_ts); }) != 0) {
  }
  jitter::RunInfo info;
  info.ended = "publisher_gone";
  info.transport = "shm";
  info.counters = sub.counters();
  info.position = sub.next_sequence();
  REQUIRE(r.received() == 16);
  REQUIRE(r.gaps() == 0);  // nothing missing between the receipts
  const jitter::Loss l = jitter::loss(r, info);
  CHECK(l.total == kPublished - 16);
  CHECK(l.before_first == kPublished - 16);
  CHECK(l.start_seq == 1);
  CHECK(r.received() + l.total == kPublished);
  const nlohmann::json j = jitter::report_json(r, info);
  CHECK(j["count"].get<std::uint64_t>() + j["lost"].get<std::uint64_t>() == kPublished);
  CHECK(j["lost_before_first"] == kPublished - 16);
  CHECK(j["laps"] == (kPublished - 16 + 15) / 16);
  const std::string text = jitter::format_report(r, info);
  CHECK_THAT(text, Catch::Contains("84 ticks lost (0 in 0 gaps between receipts, 84 before the first)"));
  CHECK_THAT(text, !Catch::Contains("joined after"));
}

TEST_CASE("aUdLineAsOwnRecoveryDelayIsNotLineBs", "[jitter]") {
  // [rdma] recovery_delay_us is line A's: line B, its copy changed by --line-b-group, waits twice
  // as long, so that a tick lost on both lines is read once.
  tickrail::jitter::Options o;
  o.line_b.group = "239.1.1.2";
  tickrail::SubscriberConfig sc;
  sc.channel = "md";
  sc.transport = tickrail::TransportKind::ud;
  sc.rdma.groups = {"239.1.1.1"};
  sc.rdma.recovery_delay = std::chrono::microseconds(300);
  const tickrail::FailoverConfig fc = tickrail::jitter::failover_config(o, sc);
  CHECK(fc.line_recovery_delay(0) == std::chrono::microseconds(300));
  CHECK(fc.line_recovery_delay(1) == std::chrono::microseconds(600));
  tickrail::FailoverConfig ok = fc;
  ok.hole_timeout = std::chrono::microseconds(1200);
  CHECK_NOTHROW(ok.validate());
  CHECK_THROWS_WITH(fc.validate(), Catch::Contains("twice its recovery delay (600 us)"));
}
