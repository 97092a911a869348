// ChannelRecorder: a polling thread hands ticks to tr-rec; every tick kept reaches the file once,
// in order; a full queue refuses ticks and counts them; a partial block is flushed; close() ends
// the file cleanly. Concurrent: in scripts/test's TSan list.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>
#include <vector>

#include "../feed/feed_test_util.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/record/recorder.hpp"

using namespace tickrail;
using namespace tickrail::record;
using tickrail::feed::test::TempFile;

namespace {

RecordingMeta meta() {
  RecordingMeta m;
  m.channel = "rec.test";
  m.cycles_per_ns = Clock::instance().cycles_per_ns();
  m.start_cycles = Clock::now();
  return m;
}

Tick tick(std::uint64_t seq) {
  Tick t{};
  t.seq = seq;
  t.exch_ts = seq * 10;
  t.order_ref = seq * 3;
  t.kind = TickKind::Add;
  return t;
}

std::vector<Tick> read_all(const std::string& path) {
  RecordingSource src(path);
  std::vector<Tick> out;
  Tick buf[512];
  for (;;) {
    const std::size_t n = src.read(buf);
    out.insert(out.end(), buf, buf + n);
    if (n == 0 && src.at_end()) break;
  }
  return out;
}

std::uint64_t stress_ticks() {
  const char* e = std::getenv("TICKRAIL_STRESS_TICKS");
  return e != nullptr ? std::strtoull(e, nullptr, 10) : 2'000'000;
}

}  // namespace

TEST_CASE("recorderKeepsEveryTickInOrderWhenThePollerWaitsForRoom") {
  const bool zstd = GENERATE(false, true);
  TempFile f(".rec");
  RecorderConfig c;
  c.path = f.path();
  c.writer.zstd = zstd;
  c.writer.force = true;
  c.block_ticks = 512;
  c.queue_blocks = 4;
  const std::uint64_t n = stress_ticks() / (zstd ? 4 : 1);
  {
    ChannelRecorder rec(c, meta());
    for (std::uint64_t seq = 1; seq <= n;) {
      // As tickrail-record with policy block: only as many as there is room for.
      for (std::uint32_t room = rec.room(); room != 0 && seq <= n; --room) REQUIRE(rec.on_tick(tick(seq++)));
      std::this_thread::yield();
    }
    rec.close(EndReason::stopped);
    const RecorderStats s = rec.stats();
    CHECK(s.received == n);
    CHECK(s.recorded == n);
    CHECK(s.dropped == 0);
    CHECK(s.missing == 0);
  }
  const std::vector<Tick> got = read_all(f.path());
  REQUIRE(got.size() == n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const Tick want = tick(i + 1);
    if (std::memcmp(&got[i], &want, sizeof(Tick)) != 0) FAIL("tick " << i + 1 << " differs");
  }
}

TEST_CASE("recorderCountsTicksItCannotKeepAndTheGapsTheyLeave") {
  TempFile f(".rec");
  RecorderConfig c;
  c.path = f.path();
  c.writer.force = true;
  c.block_ticks = 4;
  c.queue_blocks = 2;
  std::uint64_t kept = 0, refused = 0;
  {
    ChannelRecorder rec(c, meta());
    // Without waiting for room, a burst overruns two blocks of four: the rest are refused, and
    // counted, never silently lost.
    for (std::uint64_t seq = 1; seq <= 1000; ++seq) (rec.on_tick(tick(seq)) ? kept : refused)++;
    CHECK_FALSE(rec.on_tick(tick(5)));  // not increasing: refused and counted apart
    rec.close(EndReason::stopped);
    const RecorderStats s = rec.stats();
    CHECK(refused != 0);
    CHECK(s.dropped == refused);
    CHECK(s.out_of_order == 1);
    CHECK(s.recorded == kept);
  }
  const Recording r(f.path());
  CHECK(r.clean());
  CHECK(r.trailer().dropped == refused);
  CHECK(r.ticks() == kept);
}

TEST_CASE("recorderFlushesAPartialBlockAfterItsTime") {
  TempFile f(".rec");
  RecorderConfig c;
  c.path = f.path();
  c.writer.force = true;
  c.flush_after = std::chrono::milliseconds(1);
  ChannelRecorder rec(c, meta());
  REQUIRE(rec.on_tick(tick(1)));
  REQUIRE(rec.on_tick(tick(2)));
  rec.flush_due(Clock::now());  // not yet due: stays in memory (the block is 8192 ticks)
  // Bounded wait for the writer (no timing assertion: only that it happens eventually).
  for (int i = 0; i < 5000 && rec.stats().recorded == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rec.flush_due(Clock::now());
  }
  CHECK(rec.stats().recorded == 2);
  const Recording unclosed(f.path());  // readable while recording: two ticks, no trailer yet
  CHECK(unclosed.ticks() == 2);
  CHECK_FALSE(unclosed.clean());
  rec.close(EndReason::publisher_gone);
  const Recording r(f.path());
  CHECK(r.clean());
  CHECK(static_cast<EndReason>(r.trailer().end_reason) == EndReason::publisher_gone);
}

TEST_CASE("recorderRejectsBadConfigByKey") {
  RecorderConfig c;
  c.path = "x.rec";
  c.block_ticks = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("block_ticks"));
  c.block_ticks = 16;
  c.queue_blocks = 1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("queue_blocks"));
}
