// The benchmark programs' pieces and the programs: tickrail-bench's market-state options and
// their checks, the tick mix, the on/off and snapshot reports, the snapshot measurement, the
// floors' receivers after a lap (rounds.hpp), and tickrail-bench and ring_pingpong on small
// runs. No timing is asserted.
#include <catch2/catch.hpp>

#include <sched.h>

#include <map>
#include <regex>
#include <nlohmann/json.hpp>

#include "../../../apps/bench/rounds.hpp"
#include "../../../apps/bench/state_bench.hpp"
#include "program.hpp"
#include "tickrail/error.hpp"

using namespace tickrail;
using namespace tickrail::bench;
using namespace tickrail::test;

namespace {

// Parses `args` (after the program's name) into options as tickrail-bench does.
StateOptions parse(std::vector<std::string> args) {
  StateOptions o;
  CLI::App app;
  add_state_options(app, o);
  args.insert(args.begin(), "tickrail-bench");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return o;
}

std::string checked(const std::vector<std::string>& args) { return check_state_options(parse(args)); }

// The first and last cpu this process may use (one cpu: the same).
std::pair<int, int> two_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  int first = -1, last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) {
      if (first < 0) first = c;
      last = c;
    }
  }
  return {first, last};
}

}  // namespace

TEST_CASE("bench state options: defaults, ranges and combinations", "[bench]") {
  const StateOptions d = parse({});
  CHECK(d.state == "off");
  CHECK(d.capacity == 65536);
  CHECK(d.snapshot == 0);
  CHECK(check_state_options(d).empty());

  CHECK_THROWS_AS(parse({"--snapshot", "0"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--snapshot", "99999999999"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--snapshot", "1048577"}), CLI::ParseError);  // kMaxStateCapacity + 1
  CHECK_THROWS_AS(parse({"--snapshot", "-1"}), CLI::ParseError);
  CHECK(parse({"--snapshot", "1048576"}).snapshot == kMaxStateCapacity);
  CHECK_THROWS_AS(parse({"--state-capacity", "0"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--state", "maybe"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--snapshot-rate", "1e9"}), CLI::ParseError);

  CHECK(checked({"--snapshot", "1000"}).empty());
  CHECK(checked({"--snapshot", "65536", "--state-capacity", "65536"}).empty());
  CHECK_THAT(checked({"--snapshot", "1000", "--state-capacity", "999"}), Catch::Contains("more instruments"));
  CHECK_THAT(checked({"--snapshot", "1000", "--state", "both"}), Catch::Contains("--state"));
  CHECK_THAT(checked({"--snapshot-rate", "1000"}), Catch::Contains("needs --snapshot"));
  CHECK(checked({"--state", "both", "--state-classes", "quote,status"}).empty());
  CHECK_THAT(checked({"--state-classes", "quote,bogus"}), Catch::Contains("unknown class 'bogus'"));
  CHECK_THAT(checked({"--state-classes", "quote,quote"}), Catch::Contains("named twice"));
  CHECK_THAT(checked({"--state-classes", ""}), Catch::Contains("no class"));
}

TEST_CASE("bench state options: the tables they make", "[bench]") {
  const StateConfig r = rounds_table(parse({"--state-capacity", "4096", "--state-classes", "trade"}), true);
  CHECK(r.enabled);
  CHECK(r.capacity == 4096);
  CHECK((!r.quote && r.trade && !r.status));
  CHECK_FALSE(rounds_table(parse({}), false).enabled);
  // --snapshot N: a table of N instruments unless --state-capacity says otherwise.
  CHECK(snapshot_table(parse({"--snapshot", "1000"})).capacity == 1000);
  const StateConfig s = snapshot_table(parse({"--snapshot", "1000", "--state-capacity", "65536"}));
  CHECK(s.capacity == 65536);
  CHECK((s.enabled && s.quote && s.trade && s.status));
  CHECK_NOTHROW(s.validate());
}

TEST_CASE("the tick mix visits every instrument once a lap, in the documented kinds", "[bench]") {
  for (const std::uint32_t n : {1u, 2u, 3u, 1000u, 65536u, 3u * 5u * 7u * 11u * 13u}) {
    TickMix mix(n);
    std::vector<int> seen(n, 0);
    std::map<TickKind, int> kinds;
    for (std::uint32_t i = 0; i < n; ++i) {
      const Tick& t = mix.next();
      REQUIRE(t.instrument < n);
      ++seen[t.instrument];
    }
    INFO("instruments " << n << ", stride " << mix.stride());
    CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(n));
    if (n >= 1000) CHECK(mix.stride() > n / 2);  // consecutive ticks far apart in the table
    TickMix again(n);
    for (int i = 0; i < 16 * 8; ++i) ++kinds[again.next().kind];
    CHECK(kinds[TickKind::Quote] == 10 * 8);
    CHECK(kinds[TickKind::Trade] == 2 * 8);
    CHECK(kinds[TickKind::Execute] == 2 * 8);
    CHECK(kinds[TickKind::Status] == 1 * 8);
    CHECK(kinds[TickKind::Add] == 1 * 8);
  }
}

TEST_CASE("bench table on/off report: per-round ratios, their median, the 5% target", "[bench]") {
  const std::vector<OnOffRound> rounds = {{104, 100, 9.6e6, 10e6}, {50, 50, 10e6, 10e6}, {220, 200, 8e6, 10e6}};
  const nlohmann::json j = on_off_json(rounds);
  REQUIRE(j["rounds"].size() == 3);
  CHECK(j["rounds"][0]["p50_ratio"].get<double>() == Approx(1.04));
  CHECK(j["rounds"][2]["throughput_ratio"].get<double>() == Approx(0.8));
  CHECK(j["p50_ratio_median"].get<double>() == Approx(1.04));       // of 1.04, 1.0, 1.1
  CHECK(j["throughput_ratio_median"].get<double>() == Approx(0.96));  // of 0.96, 1.0, 0.8
  CHECK(j["within_5_percent"]["p50"] == true);
  CHECK(j["within_5_percent"]["throughput"] == true);
  CHECK_THAT(on_off_round_text(rounds[0]), Catch::Contains("ratio 1.040") && Catch::Contains("ratio 0.960"));

  CHECK_THAT(on_off_summary_text(rounds), Catch::Contains("p50 1.040 (rounds 1.000..1.100)"));
  // An even count: the mean of the middle two, not the upper one.
  const std::vector<OnOffRound> two = {{100, 100, 8e6, 10e6}, {120, 100, 12e6, 10e6}};
  CHECK(on_off_json(two)["p50_ratio_median"].get<double>() == Approx(1.1));
  CHECK(on_off_json(two)["throughput_ratio_median"].get<double>() == Approx(1.0));
  CHECK(median({}) == 0);

  const std::vector<OnOffRound> costly = {{106, 100, 9.4e6, 10e6}};
  const nlohmann::json c = on_off_json(costly);
  CHECK(c["within_5_percent"]["p50"] == false);
  CHECK(c["within_5_percent"]["throughput"] == false);
  CHECK_THAT(on_off_summary_text(costly), Catch::Contains("p50 NOT met, throughput NOT met"));
  CHECK_THAT(on_off_summary_text(rounds), Catch::Contains("p50 met, throughput met"));
}

TEST_CASE("bench snapshot report: p50 and max over the repetitions, entries, setup apart", "[bench]") {
  SnapshotRun run;
  run.instruments = 1000;
  run.table.capacity = 1000;
  run.reps = {{40, 300, 3000, 13, 0}, {50, 100, 3000, 12, 0}, {60, 200, 3000, 12, 0}};
  const nlohmann::json j = snapshot_json(run);
  CHECK(j["snapshot_us"]["p50"].get<double>() == 200);
  CHECK(j["snapshot_us"]["max"].get<double>() == 300);
  CHECK(j["entries"]["p50"].get<double>() == 3000);
  CHECK(j["setup_us"]["p50"].get<double>() == 50);
  CHECK(j["classes"] == "quote,trade,status");
  CHECK(j["per_repetition"].size() == 3);
  const std::string t = snapshot_text(run);
  CHECK_THAT(t, Catch::Contains("p50 200.0 us") && Catch::Contains("max 300.0 us") &&
                    Catch::Contains("entries delivered: p50 3000") && Catch::Contains("idle"));
  CHECK_THAT(t, !Catch::Contains("given up"));
  run.reps[1].abandoned = 1;
  run.rate = 1e6;
  CHECK_THAT(snapshot_text(run), Catch::Contains("1 snapshots given up") && Catch::Contains("publishing 1000000 ticks/s"));
  CHECK_NOTHROW(snapshot_text(SnapshotRun{}));
}

TEST_CASE("bench snapshot measurement delivers the whole table every repetition", "[bench]") {
  const auto [sender, receiver] = two_cpus();
  (void)sender;
  StateOptions o = parse({"--snapshot", "200", "--state-capacity", "1000"});
  SECTION("all classes, publisher idle") {
    const SnapshotRun run = measure_snapshots(o, 3, receiver, "");
    REQUIRE(run.reps.size() == 3);
    for (const SnapshotRep& r : run.reps) {
      CHECK(r.entries == 600);
      CHECK(r.abandoned == 0);
      CHECK(r.polls >= 3);  // 600 entries, 256 a poll at most
    }
    CHECK(run.table.capacity == 1000);
    CHECK(run.published == 0);
  }
  SECTION("one class, publisher publishing") {
    o = parse({"--snapshot", "200", "--state-classes", "quote", "--snapshot-rate", "100000"});
    const SnapshotRun run = measure_snapshots(o, 3, receiver, "");
    for (const SnapshotRep& r : run.reps) CHECK(r.entries == 200);  // the mix stays within 0..199
  }
}

TEST_CASE("tickrail-bench --snapshot: bad values exit 2, a small run reports its entries", "[bench]") {
  const std::string bench = build_program("apps/bench/tickrail-bench");
  const std::string log = "bench-test-" + std::to_string(getpid()) + ".log";
  const std::string json_path = "bench-test-" + std::to_string(getpid()) + ".json";
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--snapshot", "0"},
                                              {"--snapshot", "4294967296"},
                                              {"--snapshot", "10", "--state-capacity", "5"},
                                              {"--snapshot-rate", "10"}}) {
    std::vector<std::string> args{bench};
    args.insert(args.end(), bad.begin(), bad.end());
    const Finished f = run_program(args, log);
    INFO(bad[0] << " " << bad[1] << ": " << f.output);
    CHECK(f.status == 2);
  }
  const auto [sender, receiver] = two_cpus();
  const Finished ok = run_program({bench, "--snapshot", "50", "--rounds", "2", "--sender-cpu", std::to_string(sender),
                                   "--receiver-cpu", std::to_string(receiver), "--json", json_path},
                                  log);
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  CHECK_THAT(ok.output, Catch::Contains("snapshot of 50 instruments"));
  const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
  CHECK(j["snapshot"]["entries"]["p50"].get<double>() == 150);
  CHECK(j["snapshot"]["capacity"] == 50);
  CHECK(j["snapshot"]["repetitions"] == 2);
  std::filesystem::remove(json_path);
  std::filesystem::remove(log);
}

TEST_CASE("tickrail-bench --failover: one line against two, every tick delivered once", "[bench][failover]") {
  const std::string bench = build_program("apps/bench/tickrail-bench");
  const std::string log = "bench-fo-test-" + std::to_string(getpid()) + ".log";
  const std::string json_path = "bench-fo-test-" + std::to_string(getpid()) + ".json";
  const auto [sender, receiver] = two_cpus();
  const Finished ok = run_program({bench, "--failover", "--rounds", "2", "--samples", "1000", "--sender-cpu",
                                   std::to_string(sender), "--receiver-cpu", std::to_string(receiver), "--json",
                                   json_path},
                                  log);
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  CHECK_THAT(ok.output, Catch::Contains("two lines / one line, p50: median of per-round ratios"));
  const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
  const nlohmann::json& f = j["failover"];
  CHECK(f["rounds"].size() == 2);
  CHECK(f["first"][0].get<std::uint64_t>() + f["first"][1].get<std::uint64_t>() == 2000);
  CHECK(f["duplicates"][0].get<std::uint64_t>() + f["duplicates"][1].get<std::uint64_t>() == 2000);
  CHECK(f["gaps"] == 0);
  CHECK(f["skipped"] == 0);
  CHECK(f["two_lines"]["count"] == 2000);
  CHECK(f["one_line"]["count"] == 2000);
  std::filesystem::remove(json_path);
  std::filesystem::remove(log);
}

TEST_CASE("tickrail-bench rounds over layouts: each latency contender runs once per layout, the samples shared "
          "among them",
          "[bench]") {
  const std::string bench = build_program("apps/bench/tickrail-bench");
  const std::string log = "bench-layouts-test-" + std::to_string(getpid()) + ".log";
  const std::string json_path = "bench-layouts-test-" + std::to_string(getpid()) + ".json";
  for (const char* bad : {"0", "9", "-1", "x"}) {
    const Finished f = run_program({bench, "--layouts", bad}, log);
    INFO("--layouts " << bad << ": " << f.output);
    CHECK(f.status == 2);
    CHECK_THAT(f.output, Catch::Contains("--layouts"));
  }
  const auto [sender, receiver] = two_cpus();
  // 1000 samples over 3 layouts: 333 a run, so 2 rounds take 1998, not the 2000 of one run a round.
  const Finished ok = run_program({bench, "--rounds", "2", "--layouts", "3", "--samples", "1000", "--stats", "both",
                                   "--throughput-ticks", "20000", "--sender-cpu", std::to_string(sender),
                                   "--receiver-cpu", std::to_string(receiver), "--json", json_path},
                                  log);
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  CHECK_THAT(ok.output, Catch::Contains("latency over 3 layouts") && Catch::Contains("333 samples each"));
  const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
  CHECK(j["layouts"] == 3);
  CHECK(j["samples_per_run"] == 333);
  // The one-way floor too: runs of 333 ticks are shorter than its ring, so it times every stamp.
  for (const char* series : {"floor_rtt_half", "spsc_queue", "tickrail_shm", "tickrail_pingpong_rtt_half",
                             "tickrail_shm_no_stats", "floor_one_way"}) {
    INFO(series);
    CHECK(j["latency_ns"][series]["count"] == 1998);
  }
  // Each ratio's rounds: one per round.
  CHECK(j["p50_ratio_to_one_way_floor_median"]["tickrail_shm"].get<double>() > 0);
  CHECK(j["stats_on_off_pingpong_p50_ratio_median"].get<double>() > 0);
  // The no-prefetch channel's throughput, beside the headline one.
  CHECK(j["throughput_ticks_per_s_median"]["tickrail_shm_no_prefetch"].get<double>() > 0);
  // Every round's spread line names each contender, the counters-off ones included.
  CHECK_THAT(ok.output, Catch::Contains("p50 over the 3 layouts, ns: floor ") && Catch::Contains(", ping-pong off "));
  std::filesystem::remove(json_path);
  std::filesystem::remove(log);
}

TEST_CASE("ring_pingpong takes the one-way path apart: every contender runs in every layout, each ratio reported",
          "[bench]") {
  const std::string tool = build_program("apps/bench/ring_pingpong");
  const std::string log = "ring-pingpong-test-" + std::to_string(getpid()) + ".log";
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--samples", "99"}, {"--rounds", "0"}, {"--stats", "maybe"}, {"--bogus"},
        {"--sender-cpu", "1", "--receiver-cpu", "1"}, {"--ring", "100"}, {"--ring", "4"}, {"--ring", "131072"}}) {
    std::vector<std::string> argv{tool};
    argv.insert(argv.end(), bad.begin(), bad.end());
    const Finished f = run_program(argv, log);
    INFO(bad.front() << ": " << f.output);
    CHECK(f.status == 2);
  }
  const auto [sender, receiver] = two_cpus();
  if (sender == receiver) {
    WARN("one cpu: ring_pingpong needs two; only its command line was tried");
    return;
  }
  // The smallest rings (8 slots, the channels' too), which the runs of 200 ticks wrap 25 times.
  const Finished ok = run_program({tool, "--rounds", "1", "--samples", "200", "--ring", "8", "--sender-cpu",
                                   std::to_string(sender), "--receiver-cpu", std::to_string(receiver)},
                                  log);
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  // A row of 8 runs (one per layout) for each contender, the ping-pong's ratios and the one-way steps'.
  for (const char* name : {"floor", "ring", "tickrail", "tickrail out", "tickrail back", "floor 1-way", "writer 1-way",
                           "reader 1-way", "ring 1-way", "tickrail 1-way"}) {
    INFO(name);
    const std::regex row("\\n    " + std::string(name) + "( +[0-9]+){8}  \\| median +[0-9.]+\\n");
    CHECK(std::regex_search(ok.output, row));
  }
  CHECK(std::regex_search(ok.output, std::regex("ping-pong RTT/2: ring/floor [0-9.]+, tickrail/floor [0-9.]+, "
                                                "tickrail/ring [0-9.]+; tickrail out only/ring [0-9.]+, back only/ring "
                                                "[0-9.]+\\n")));
  CHECK(std::regex_search(ok.output, std::regex("one way, to the one-way floor: writer [0-9.]+, reader [0-9.]+, ring "
                                                "[0-9.]+, tickrail [0-9.]+; tickrail/ring [0-9.]+\\n")));
  std::filesystem::remove(log);
}

// Written a ring's length and more ahead of its receiver, 200 ticks into 64 lines: each receiver
// counts all 200 as consumed, so a receiving loop that waits for them ends (ring_pingpong on a
// small --ring), and hands on what it documents: the floor's reader the newest stamp of each line
// it comes to, a RingReader the last ring's worth.
TEST_CASE("the floors' receivers count every tick a lap skipped", "[bench]") {
  constexpr std::uint64_t kSlots = 64, kTicks = 200;
  std::vector<Slot> ring(kSlots);
  std::vector<std::uint64_t> seen;  // what each delivered tick carried: the stamp, or seq
  std::uint64_t total = 0;
  const auto drain = [&](auto poll) {
    for (int polls = 0; total < kTicks && polls < 1000; ++polls) total += poll();
  };
  const Tick blank{};
  SECTION("the floor's sender and receiver") {
    for (std::uint64_t i = 1; i <= kTicks; ++i) floor_send<1>(ring.data(), kSlots, i);
    FloorReader<1> reader(ring.data(), kSlots);
    auto handler = [&](const Tick& t) { seen.push_back(t.send_ts); };
    drain([&] { return reader.poll(handler); });
    CHECK(seen.size() == 8);  // 193 (found in line 1) and 194..200
  }
  SECTION("write_slot, the floor's receiver") {
    for (std::uint64_t i = 1; i <= kTicks; ++i) write_slot(ring[i % kSlots], blank, i, 1000 + i, false);
    FloorReader<kSeqWord> reader(ring.data(), kSlots);
    auto handler = [&](const Tick& t) { seen.push_back(t.send_ts); };
    drain([&] { return reader.poll(handler); });
    REQUIRE(seen.size() == 8);
    CHECK(seen.front() == 1193);
    CHECK(seen.back() == 1200);
  }
  SECTION("write_slot, a RingReader through consumed()") {
    for (std::uint64_t i = 1; i <= kTicks; ++i) write_slot(ring[i % kSlots], blank, i, 0, false);
    std::atomic<std::uint64_t> credit{0};
    RingReader reader(ring.data(), kSlots, 1, &credit);
    auto handler = [&](const Tick& t) { seen.push_back(t.seq); };
    drain([&] { return consumed(reader, handler); });
    REQUIRE(seen.size() == kSlots);
    CHECK(seen.front() == kTicks - kSlots + 1);
    CHECK(seen.back() == kTicks);
    CHECK(reader.lost() == kTicks - kSlots);
  }
  CHECK(total == kTicks);
}
