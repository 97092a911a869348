// tickrail-replay's pieces (apps/replay/replay.hpp) on a generated ITCH 5.0 file holding every
// message type, a truncated copy of it, and a book whose final top is known by construction.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>

#include "../../../apps/replay/replay.hpp"
#include "../../source_root.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/itch_writer.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using feed::ItchWriter;

namespace {

constexpr std::uint64_t kTs = 34'200'000'000'000ull;

// Every ITCH 5.0 type; order flow on two instruments whose final books are:
//   1 AAPL: bid 120 @ 100.0200 (ref 6), ask 70 @ 100.0300 (ref 5); also ref 3 sell 200 @ 100.05
//   2 MSFT: no bid, ask 20 @ 50.1000 (ref 11)
struct Generated {
  std::vector<std::uint8_t> bytes;
  std::map<char, std::uint64_t> by_type;
  std::vector<std::size_t> frame_offsets;  // byte offset of each message's 2-byte length
};

Generated generate() {
  ItchWriter w;
  Generated g;
  std::uint64_t ts = kTs;
  auto mark = [&] { g.frame_offsets.push_back(w.bytes().size()); };
  auto rec = [&](char t) { ++g.by_type[t]; };
  mark(); w.system_event(ts++, 'O'); rec('S');
  mark(); w.stock_directory(1, ts++, "AAPL"); rec('R');
  mark(); w.stock_directory(2, ts++, "MSFT"); rec('R');
  mark(); w.begin('H', 1, ts++).str("AAPL", 8).ch('T').ch(' ').str("    ", 4).end(); rec('H');
  mark(); w.begin('Y', 1, ts++).str("AAPL", 8).ch('0').end(); rec('Y');
  mark(); w.begin('L', 1, ts++).str("NSDQ", 4).str("AAPL", 8).ch('Y').ch('N').ch('A').end(); rec('L');
  mark(); w.begin('V', 0, ts++).u64(3'000'000'000'000ull).u64(2'800'000'000'000ull).u64(2'600'000'000'000ull).end(); rec('V');
  mark(); w.begin('W', 0, ts++).ch('1').end(); rec('W');
  mark(); w.begin('K', 2, ts++).str("MSFT", 8).u32(34'200).ch('A').price4(250'000).end(); rec('K');
  mark(); w.begin('J', 1, ts++).str("AAPL", 8).price4(1'000'000).price4(1'100'000).price4(900'000).u32(0).end(); rec('J');
  mark(); w.begin('h', 1, ts++).str("AAPL", 8).ch('Q').ch('T').end(); rec('h');
  // AAPL order flow.
  mark(); w.add_order(1, ts++, 1, Side::Buy, 100, "AAPL", 1'000'000); rec('A');
  mark(); w.add_order(1, ts++, 2, Side::Buy, 200, "AAPL", 1'000'100); rec('A');
  mark(); w.add_order(1, ts++, 3, Side::Sell, 300, "AAPL", 1'000'500); rec('A');
  mark(); w.add_order(1, ts++, 4, Side::Sell, 50, "AAPL", 1'000'300); rec('A');
  mark(); w.add_order_mpid(1, ts++, 5, Side::Sell, 70, "AAPL", 1'000'300, "GSCO"); rec('F');
  mark(); w.order_executed(1, ts++, 2, 50, 9001); rec('E');
  mark(); w.order_executed_price(1, ts++, 4, 50, 9002, 'Y', 1'000'300); rec('C');
  mark(); w.order_cancel(1, ts++, 3, 100); rec('X');
  mark(); w.order_delete(1, ts++, 1); rec('D');
  mark(); w.order_replace(1, ts++, 2, 6, 120, 1'000'200); rec('U');
  mark(); w.trade(1, ts++, Side::Buy, 10, "AAPL", 1'000'250, 9003); rec('P');
  mark(); w.cross_trade(1, ts++, 1000, "AAPL", 1'000'250, 9004, 'O'); rec('Q');
  mark(); w.begin('B', 1, ts++).u64(9003).end(); rec('B');
  // MSFT order flow.
  mark(); w.add_order(2, ts++, 10, Side::Buy, 10, "MSFT", 500'000); rec('A');
  mark(); w.add_order(2, ts++, 11, Side::Sell, 20, "MSFT", 501'000); rec('A');
  mark(); w.order_delete(2, ts++, 10); rec('D');
  mark(); w.begin('I', 1, ts++).u64(1000).u64(200).ch('S').str("AAPL", 8).price4(1'000'000).price4(1'000'100).price4(1'000'200).ch('O').ch('L').end(); rec('I');
  mark(); w.begin('N', 1, ts++).str("AAPL", 8).ch('A').end(); rec('N');
  mark(); w.begin('O', 2, ts++).str("MSFT", 8).ch('Y').price4(100'000).price4(900'000).price4(500'000).u64(kTs).price4(450'000).price4(550'000).end(); rec('O');
  mark(); w.system_event(ts++, 'C'); rec('S');
  g.bytes = w.bytes();
  return g;
}

struct TempPath {
  std::string path;
  explicit TempPath(const std::string& suffix)
      : path((std::filesystem::temp_directory_path() /
              ("tickrail-replay-test-" + std::to_string(getpid()) + "-" + std::to_string(n++) + suffix))
                 .string()) {}
  ~TempPath() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  void write(const std::uint8_t* p, std::size_t len) const {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(len));
  }
  static inline int n = 0;
};

std::string channel_name(const char* what) {
  return std::string("replay-test-") + what + "-" + std::to_string(getpid());
}

replay::Options max_options(const std::string& input) {
  replay::Options o;
  o.input = input;
  o.pacing = replay::Pacing::max;
  o.wait_subscribers = 0;
  o.batch = 7;  // odd, to cross batch boundaries inside the file
  return o;
}

// One publisher and one subscriber in this thread; collects what the subscriber receives.
struct Channel {
  PublisherConfig pc;
  std::unique_ptr<Publisher> pub;
  std::unique_ptr<Subscriber> sub;
  explicit Channel(const char* what) {
    pc.channel = channel_name(what);
    pub = std::make_unique<Publisher>(pc);
    SubscriberConfig sc;
    sc.channel = pc.channel;
    sub = std::make_unique<Subscriber>(sc);
    REQUIRE(pub->wait_subscribers(1, std::chrono::seconds(10)) == 1);
  }
  std::vector<Tick> drain() {
    std::vector<Tick> got;
    while (sub->poll([&](const Tick& t) { got.push_back(t); }) != 0) {
    }
    return got;
  }
};

// ITCH add orders: `before` a millisecond apart, then an hour of silence (the pre-market gap of
// a real day), then `after` more.
std::vector<std::uint8_t> feed_with_an_hour_gap(int before, int after) {
  ItchWriter w;
  std::uint64_t ts = kTs;
  w.stock_directory(1, ts, "AAPL");
  std::uint64_t ref = 1;
  for (int i = 0; i < before; ++i) w.add_order(1, ts += 1'000'000, ref++, Side::Buy, 100, "AAPL", 1'000'000);
  ts += 3'600'000'000'000ull;
  for (int i = 0; i < after; ++i) w.add_order(1, ts += 1'000'000, ref++, Side::Buy, 100, "AAPL", 1'000'000);
  return w.bytes();
}

double thread_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

TEST_CASE("feedScheduleCompressesEveryGapLongerThanMaxGap", "[replay][pacing]") {
  constexpr std::uint64_t ms = 1'000'000, hour = 3'600'000'000'000ull;
  replay::FeedSchedule kept;  // no max gap: the feed's own time
  CHECK(kept.elapsed(kTs) == 0);
  CHECK(kept.elapsed(kTs + ms) == ms);
  CHECK(kept.elapsed(kTs + ms + hour) == ms + hour);

  replay::FeedSchedule s(10 * ms);
  CHECK(s.elapsed(kTs) == 0);
  CHECK(s.elapsed(kTs + ms) == ms);                   // short gaps are kept
  CHECK(s.elapsed(kTs + ms + hour) == 11 * ms);       // the hour becomes 10 ms
  CHECK(s.elapsed(kTs + 2 * ms + hour) == 12 * ms);   // and the feed goes on from there
  CHECK(s.elapsed(kTs) == 12 * ms);                   // a clock that steps back: no time
  CHECK(s.elapsed(kTs + 3 * ms + hour) == 13 * ms);   // measured from the latest time seen
  CHECK(s.elapsed(kTs + 3 * ms + 2 * hour) == 23 * ms);
}

TEST_CASE("pacingSleepsThroughLongWaitsInStepsAndSpinsOnlyTheLastMicroseconds", "[replay][pacing]") {
  // An hour's wait is slept in steps of at most 100 ms (a stop request is seen between two).
  CHECK(replay::sleep_before(3'600'000'000'000ull) == replay::kMaxSleepNs);
  CHECK(replay::kMaxSleepNs <= 100'000'000);
  // A millisecond: sleep all but the last kSpinNs, then spin.
  CHECK(replay::sleep_before(1'000'000) == 1'000'000 - replay::kSpinNs);
  CHECK(replay::sleep_before(replay::kSpinNs) == 0);
  CHECK(replay::sleep_before(1) == 0);
  CHECK(replay::kSpinNs <= 100'000);
  // Walking a whole hour's wait: every step sleeps, none spins until the end.
  std::uint64_t left = 3'600'000'000'000ull, steps = 0;
  while (replay::sleep_before(left) != 0) {
    left -= replay::sleep_before(left);
    ++steps;
  }
  CHECK(left == replay::kSpinNs);
  CHECK(steps == 36'000);
}

TEST_CASE("durationsAndFeedTimesReadAsPeopleWriteThem", "[replay][pacing]") {
  using namespace std::chrono;
  CHECK(replay::parse_duration("10ms") == milliseconds(10));
  CHECK(replay::parse_duration("1.5s") == milliseconds(1500));
  CHECK(replay::parse_duration("500us") == microseconds(500));
  CHECK(replay::parse_duration("2m") == minutes(2));
  CHECK(replay::parse_duration("1h") == hours(1));
  CHECK(replay::parse_duration("0") == nanoseconds(0));
  CHECK_THROWS_WITH(replay::parse_duration("10", "--max-gap"), Catch::Contains("--max-gap") && Catch::Contains("no unit"));
  CHECK_THROWS_WITH(replay::parse_duration("-1s", "--max-gap"), Catch::Contains("not a duration"));
  CHECK_THROWS_WITH(replay::parse_duration("1e400s", "--max-gap"), Catch::Contains("--max-gap"));
  CHECK_THROWS_WITH(replay::parse_duration("10 parsecs", "--max-gap"), Catch::Contains("no unit"));
  CHECK(replay::duration_text(7'980'000'000'000ull) == "2h13m");
  CHECK(replay::duration_text(245'000'000'000ull) == "4m05s");
  CHECK(replay::feed_time_text(34'200'000'000'000ull) == "09:30:00.000");
  ConfigFile f("[replay]\nmax_gap = \"250ms\"\n", "r.toml");
  replay::Options o;
  replay::read_options(f.section("replay"), o);
  CHECK(o.max_gap == milliseconds(250));
  ConfigFile bad("[replay]\nmax_gap = \"forever\"\n", "b.toml");
  CHECK_THROWS_WITH(replay::read_options(bad.section("replay"), o),
                    Catch::Contains("b.toml:2:1: replay.max_gap"));
}

TEST_CASE("maxGapReplaysAnHourOfSilenceAtOnceWithEveryTickPublished", "[replay][pacing]") {
  Channel ch("maxgap");
  const std::vector<std::uint8_t> bytes = feed_with_an_hour_gap(20, 30);
  feed::ItchFileReader src(bytes, "gap");
  replay::Options o;
  o.pacing = replay::Pacing::feed;
  o.max_gap = std::chrono::milliseconds(10);
  o.wait_subscribers = 0;
  replay::Replayer r(o, src, *ch.pub);
  std::atomic<bool> stop{false};
  auto done = std::async(std::launch::async, [&] { r.run(&stop); });
  // Bounded: without the compression this would wait an hour; the stop then ends it early.
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) stop = true;
  done.get();
  CHECK_FALSE(r.stats().stopped);
  CHECK(r.stats().ticks_read == 51);  // the directory message is a status tick
  CHECK(ch.drain().size() == 51);
}

TEST_CASE("replayWaitingThroughAFeedGapSleepsSaysWhyAndStopsWhenAsked", "[replay][pacing]") {
  Channel ch("gapwait");
  const std::vector<std::uint8_t> bytes = feed_with_an_hour_gap(5, 5);
  feed::ItchFileReader src(bytes, "gap");
  replay::Options o;
  o.pacing = replay::Pacing::feed;
  o.wait_subscribers = 0;
  replay::Replayer r(o, src, *ch.pub);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<replay::ProgressLine> lines;
  std::promise<void> waiting;
  auto progress = [&](const replay::ProgressLine& p) {
    const std::lock_guard lock(mu);
    if (p.wait_ns != 0 && std::none_of(lines.begin(), lines.end(), [](const auto& l) { return l.wait_ns != 0; })) {
      waiting.set_value();
    }
    lines.push_back(p);
  };
  double cpu_waiting = 0;
  std::atomic<bool> measuring{false};
  auto done = std::async(std::launch::async, [&] {
    r.run(&stop, [&](const replay::ProgressLine& p) {
      progress(p);
      if (p.wait_ns != 0 && !measuring.exchange(true)) cpu_waiting = -thread_cpu_s();
    });
    cpu_waiting += thread_cpu_s();
  });
  REQUIRE(waiting.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // a second of waiting, then the stop
  stop = true;
  // The stop is seen within a sleep step, never after the hour.
  REQUIRE(done.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  done.get();
  CHECK(r.stats().stopped);
  CHECK(r.stats().ticks_read == 7);  // directory, 5 orders, and the first after the gap (held)
  CHECK(ch.drain().size() == 6);
  // Sleeping, the thread used a small part of the second it waited (spinning uses all of it).
  CHECK(cpu_waiting < 0.3);
  const std::lock_guard lock(mu);
  const auto w = std::find_if(lines.begin(), lines.end(), [](const auto& l) { return l.wait_ns != 0; });
  REQUIRE(w != lines.end());
  CHECK(w->wait_ns > 3'590'000'000'000ull);
  CHECK(w->wait_feed_ts == kTs + 5'000'000 + 3'600'000'000'000ull + 1'000'000);
  const std::string text = replay::progress_text(*w);
  CHECK_THAT(text, Catch::Contains("waiting 59m") || Catch::Contains("waiting 1h00m"));
  CHECK_THAT(text, Catch::Contains("for feed time 10:30:00.006"));
  CHECK_THAT(text, Catch::Contains("gap in the feed"));
  CHECK_THAT(text, Catch::Contains("--max-gap"));
}

TEST_CASE("replayCountsEveryItchMessageTypeAndPublishesEachAsATick", "[replay]") {
  const Generated g = generate();
  TempPath file(".itch");
  file.write(g.bytes.data(), g.bytes.size());
  REQUIRE(g.by_type.size() == feed::itch::kAllTypes.size());  // the file has every type

  Channel ch("types");
  const replay::Options o = max_options(file.path);
  auto src = replay::open_input(o);
  replay::Replayer r(o, *src, *ch.pub);
  r.run();

  const std::uint64_t messages = g.frame_offsets.size();
  CHECK(r.stats().ticks_read == messages);
  CHECK(r.stats().offered == messages);
  CHECK(ch.pub->counters().published == messages);
  const replay::Report rep = replay::make_report(o, *src, r, *ch.pub, ch.pub->subscribers());
  CHECK(rep.json["messages"] == messages);
  for (const auto& [type, n] : g.by_type) {
    INFO("type " << type);
    CHECK(rep.json["messages_by_type"][std::string(1, type)] == n);
  }
  CHECK(rep.json["bad_input"]["total"] == 0);
  // Order messages become their kinds; the 14 other types (16 messages) are status ticks.
  CHECK(r.stats().by_kind[static_cast<int>(TickKind::Add)] == 7);
  CHECK(r.stats().by_kind[static_cast<int>(TickKind::Execute)] == 2);
  CHECK(r.stats().by_kind[static_cast<int>(TickKind::Trade)] == 2);
  CHECK(r.stats().by_kind[static_cast<int>(TickKind::Status)] == 16);

  const std::vector<Tick> got = ch.drain();
  REQUIRE(got.size() == messages);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i].seq == i + 1);
  CHECK(static_cast<char>(got[11].flags & 0xff) == 'A');
  CHECK(got[11].order_ref == 1);
  CHECK(got[11].price == 1'000'000);
}

TEST_CASE("truncatedItchFileFailsNamingTheByteOffsetAfterPublishingWhatCameBefore", "[replay]") {
  const Generated g = generate();
  // Cut inside message 20 (the order delete): its 2-byte length is at frame_offsets[20].
  const std::size_t k = 20;
  const std::size_t cut = g.frame_offsets[k] + 5;
  TempPath file(".itch");
  file.write(g.bytes.data(), cut);

  {
    Channel ch("trunc");
    const replay::Options o = max_options(file.path);
    auto src = replay::open_input(o);
    replay::Replayer r(o, *src, *ch.pub);
    try {
      r.run();
      FAIL("a truncated file must fail");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("byte offset " + std::to_string(g.frame_offsets[k])));
      CHECK_THAT(e.what(), Catch::Contains(file.path));
    }
    CHECK(r.stats().ticks_read == k);
    CHECK(ch.pub->counters().published == k);  // everything before the bad message went out
    CHECK(ch.drain().size() == k);
  }
  {
    Channel ch("trunc-skip");
    replay::Options o = max_options(file.path);
    o.skip_bad = true;
    auto src = replay::open_input(o);
    replay::Replayer r(o, *src, *ch.pub);
    r.run();
    CHECK(r.stats().ticks_read == k);
    CHECK(src->errors().truncated == 1);
    CHECK(src->errors().total() == 1);
    CHECK_THAT(src->first_error(), Catch::Contains("byte offset " + std::to_string(g.frame_offsets[k])));
    const replay::Report rep = replay::make_report(o, *src, r, *ch.pub, {});
    CHECK(rep.json["bad_input"]["truncated"] == 1);
    CHECK_THAT(rep.text, Catch::Contains("bad input skipped: 1"));
  }
}

TEST_CASE("bookModePublishesQuotesAndEndsWithTheKnownTopOfBook", "[replay]") {
  const Generated g = generate();
  TempPath file(".itch");
  file.write(g.bytes.data(), g.bytes.size());

  Channel ch("book");
  replay::Options o = max_options(file.path);
  o.book = true;
  o.book_orders = 1024;
  auto src = replay::open_input(o);
  replay::Replayer r(o, *src, *ch.pub);
  r.run();

  const feed::OrderBook* b = r.book();
  REQUIRE(b != nullptr);
  const feed::TopOfBook aapl = b->top(1);
  CHECK(aapl.bid.price == 1'000'200);
  CHECK(aapl.bid.qty == 120);
  CHECK(aapl.bid.orders == 1);
  CHECK(aapl.ask.price == 1'000'300);
  CHECK(aapl.ask.qty == 70);
  CHECK(aapl.ask.orders == 1);
  CHECK(b->live_orders(1) == 3);
  const feed::TopOfBook msft = b->top(2);
  CHECK_FALSE(msft.has_bid());
  CHECK(msft.ask.price == 501'000);
  CHECK(msft.ask.qty == 20);
  CHECK(b->live_orders(2) == 1);
  CHECK(b->counts().unknown_refs == 0);

  // Quotes replace the order messages; trades and status ticks pass through.
  const std::uint64_t passed = r.stats().by_kind[static_cast<int>(TickKind::Trade)] +
                               r.stats().by_kind[static_cast<int>(TickKind::Status)];
  CHECK(r.stats().offered == b->counts().quotes + passed);
  const std::vector<Tick> got = ch.drain();
  REQUIRE(got.size() == r.stats().offered);
  const Tick* last_aapl = nullptr;
  std::uint64_t quotes = 0;
  for (const Tick& t : got) {
    CHECK(t.kind != TickKind::Add);
    CHECK(t.kind != TickKind::Delete);
    if (t.kind == TickKind::Quote) {
      ++quotes;
      if (t.instrument == 1) last_aapl = &t;
    }
  }
  CHECK(quotes == b->counts().quotes);
  REQUIRE(last_aapl != nullptr);
  CHECK(last_aapl->price == 1'000'200);
  CHECK(last_aapl->qty == 120);
  CHECK(last_aapl->ask_price() == 1'000'300);
  CHECK(last_aapl->aux_qty == 70);

  const replay::Report rep = replay::make_report(o, *src, r, *ch.pub, {});
  CHECK_THAT(rep.text, Catch::Contains("AAPL"));
  CHECK_THAT(rep.text, Catch::Contains("120 @ 100.0200"));
  CHECK_THAT(rep.text, Catch::Contains("70 @ 100.0300"));
  CHECK(rep.json["book"]["live_orders"] == 4);
}

TEST_CASE("pacedReplayRecordsTheLagOfEveryTick", "[replay]") {
  Channel ch("paced");
  replay::Options o;
  o.synthetic.limit = 2000;
  o.pacing = replay::Pacing::rate;
  o.rate = 1e6;
  o.wait_subscribers = 0;
  auto src = replay::open_input(o);
  replay::Replayer r(o, *src, *ch.pub);
  r.run();
  CHECK(r.stats().ticks_read == 2000);
  CHECK(r.stats().lag_ns.count() == 2000);  // one schedule entry per tick, none dropped
  CHECK(ch.drain().size() == 2000);

  replay::Options f;
  f.synthetic.limit = 1000;
  f.pacing = replay::Pacing::feed;
  f.speed = 100.0;
  f.wait_subscribers = 0;
  auto src2 = replay::open_input(f);
  replay::Replayer r2(f, *src2, *ch.pub);
  r2.run();
  CHECK(r2.stats().lag_ns.count() == 1000);
  CHECK(ch.drain().size() == 1000);
}

TEST_CASE("replayStopsWhenAskedAndAtItsDuration", "[replay]") {
  Channel ch("stop");
  replay::Options o;
  o.synthetic.limit = 0;  // endless
  o.pacing = replay::Pacing::max;
  o.wait_subscribers = 0;
  {
    auto src = replay::open_input(o);
    replay::Replayer r(o, *src, *ch.pub);
    std::atomic<bool> stop{true};
    r.run(&stop);
    CHECK(r.stats().stopped);
    CHECK(r.stats().ticks_read == 0);
  }
  {
    // A subscriber that never polls holds the publisher back (block policy): the duration must
    // end the run anyway, with each stall counted as back-pressure.
    o.duration = std::chrono::milliseconds(50);
    auto src = replay::open_input(o);
    replay::Replayer r(o, *src, *ch.pub);
    r.run();
    CHECK(r.stats().stopped);
    CHECK(r.stats().ticks_read > 0);
  }
}

TEST_CASE("replayOptionsFromTomlWithLocatedErrors", "[replay]") {
  ConfigFile f(R"([replay]
input = "day.itch.gz"
format = "itch"
pacing = "rate"
rate = 250000
book = true
count = 1000
wait_subscribers = 2
)", "replay.toml");
  replay::Options o;
  replay::read_options(f.section("replay"), o);
  CHECK(o.input == "day.itch.gz");
  CHECK(o.format == feed::InputFormat::itch);
  CHECK(o.pacing == replay::Pacing::rate);
  CHECK(o.rate == 250000.0);
  CHECK(o.book);
  CHECK(o.synthetic.limit == 1000);
  CHECK(o.wait_subscribers == 2);
  f.check_all_read();

  ConfigFile bad("[replay]\nspeed = -1.0\n", "bad.toml");
  try {
    replay::read_options(bad.section("replay"), o);
    FAIL("negative speed accepted");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("bad.toml:2:1: replay.speed: must be a positive number"));
  }
  ConfigFile typo("[replay]\npacing = \"fast\"\n", "typo.toml");
  CHECK_THROWS_WITH(replay::read_options(typo.section("replay"), o),
                    Catch::Contains("typo.toml:2:1: replay.pacing: unknown pacing 'fast'"));
}

namespace {
std::filesystem::path configs_dir() { return source_tree::root() / "configs"; }
}  // namespace

TEST_CASE("everyShippedConfigLoadsAsTheReplayReadsIt", "[replay]") {
  const std::filesystem::path dir = configs_dir();
  REQUIRE(std::filesystem::is_directory(dir));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".toml") continue;
    INFO(e.path());
    ConfigFile f(e.path().string());
    PublisherConfig pc;
    replay::Options o;
    replay::read_file(f, pc, o);
    ++files;
  }
  CHECK(files >= 5);
  ConfigFile rc((dir / "rc.toml").string());
  PublisherConfig pc;
  read_publisher_config(rc, pc);
  CHECK(pc.transport == TransportKind::rc);
  CHECK_FALSE(pc.rdma.address.empty());
}

// The real excerpts beside the project (never copied into it), when present: each replays to its
// end through the replay's own path (the pcap through MoldUDP64), with the book built.
TEST_CASE("realItchExcerptsReplayCleanlyToTheirEnd", "[replay][real]") {
  const std::filesystem::path dir = source_tree::itch_data_dir();
  if (dir.empty()) {
    WARN("real ITCH excerpts absent (../shared/data/itch, TICKRAIL_ITCH_DATA): skipped");
    return;
  }
  struct Expect {
    const char* file;
    std::uint64_t messages;
  };
  for (const Expect& x : {Expect{"aapl-20200130-first10k.itch", 10000},
                          Expect{"session-start-1000.itch", 1000},
                          Expect{"xnas-20230822-moldudp64-100pkts.pcap", 0}}) {
    const std::filesystem::path p = dir / x.file;
    if (!std::filesystem::exists(p)) continue;
    INFO(p);
    Channel ch("real");
    replay::Options o = max_options(p.string());
    o.book = true;
    o.book_orders = 1 << 16;
    o.batch = 256;
    auto src = replay::open_input(o);
    replay::Replayer r(o, *src, *ch.pub);
    REQUIRE_NOTHROW(r.run());
    CHECK(src->errors().total() == 0);
    const replay::Report rep = replay::make_report(o, *src, r, *ch.pub, {});
    const std::uint64_t messages = rep.json["messages"];
    if (x.messages != 0) {
      CHECK(messages == x.messages);
    } else {
      CHECK(messages > 0);
      CHECK(rep.json["capture"]["packets"] == 100);
    }
    CHECK(r.stats().ticks_read == messages);
    CHECK(ch.drain().size() == r.stats().offered);
    if (std::string(x.file).starts_with("aapl")) {
      CHECK(r.book()->counts().unknown_refs == 0);  // self-contained excerpt
      CHECK(r.book()->top(13).has_bid());
    }
  }
}
