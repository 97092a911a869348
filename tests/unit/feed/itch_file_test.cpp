#include <catch2/catch.hpp>
#include <zlib.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "feed_test_util.hpp"
#include "itch_samples.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/itch_writer.hpp"

using namespace tickrail;
using namespace tickrail::feed;

namespace {

// Message i of type kAllTypes[k] is written k + 1 times: every type, each with its own count.
ItchWriter every_type_file() {
  ItchWriter w;
  for (int round = 0; round < 23; ++round) {
    ItchWriter once;
    test::write_every_type(once);
    // Keep types whose index is >= round: type k appears k + 1 times in total.
    std::size_t o = 0;
    for (std::size_t k = 0; k < 23; ++k) {
      const std::size_t n = itch::be16(once.bytes().data() + o);
      if (static_cast<int>(k) >= round) {
        auto b = w.begin_raw();
        for (std::size_t i = 0; i < n; ++i) b.u8(once.bytes()[o + 2 + i]);
        b.end();
      }
      o += 2 + n;
    }
  }
  return w;
}

std::vector<Tick> read_all(TickSource& src, std::size_t batch = 256) {
  std::vector<Tick> all;
  std::vector<Tick> buf(batch);
  for (;;) {
    const std::size_t n = src.read(buf);
    if (n == 0 && src.at_end()) return all;
    all.insert(all.end(), buf.begin(), buf.begin() + static_cast<long>(n));
  }
}

void write_gzip(const std::string& path, std::span<const std::uint8_t> bytes) {
  gzFile f = gzopen(path.c_str(), "wb6");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::string error_of(TickSource& src) {
  try {
    read_all(src);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("itchReaderCountsEveryTypeExactly") {
  const ItchWriter w = every_type_file();
  ItchFileReader r(w.span(), "every-type");
  const auto ticks = read_all(r, 7);
  REQUIRE(ticks.size() == 276);  // 1 + 2 + ... + 23
  for (std::size_t k = 0; k < 23; ++k) {
    INFO("type " << static_cast<char>(itch::kAllTypes[k]));
    REQUIRE(r.counts()[itch::kAllTypes[k]] == k + 1);
  }
  REQUIRE(r.counts().messages == 276);
  REQUIRE(r.errors().total() == 0);
  REQUIRE(r.first_error().empty());
  for (std::size_t i = 0; i < ticks.size(); ++i) REQUIRE(ticks[i].seq == i + 1);
  REQUIRE(r.progress().done == w.bytes().size());
  REQUIRE(r.progress().total == w.bytes().size());
  REQUIRE(r.read(std::span<Tick>()) == 0);
}

TEST_CASE("itchReaderReportsTruncationWithItsOffsetAfterTheGoodTicks") {
  const ItchWriter w = every_type_file();
  std::vector<std::uint8_t> cut(w.bytes().begin(), w.bytes().end() - 5);
  const std::size_t last_frame = w.bytes().size() - (2 + 48);  // the last message is an 'O'
  ItchFileReader r(cut, "cut");
  std::vector<Tick> buf(1000);
  REQUIRE(r.read(buf) == 275);  // everything before the cut message first
  try {
    (void)r.read(buf);
    FAIL("no error");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::truncated);
    const std::string what = e.what();
    REQUIRE(what.find("byte offset " + std::to_string(last_frame)) != std::string::npos);
    REQUIRE(what.find("length 48 but only 43 bytes remain") != std::string::npos);
  }
  REQUIRE_THROWS_AS(r.read(buf), Error);  // sticky
  REQUIRE(r.errors().truncated == 1);
}

TEST_CASE("itchReaderReportsALoneLengthByte") {
  ItchWriter w;
  w.system_event(1, 'O');
  std::vector<std::uint8_t> b = w.bytes();
  b.push_back(0);
  ItchFileReader r(b, "odd");
  const std::string what = error_of(r);
  REQUIRE(what.find("1 byte at byte offset 14 cannot hold a message length") != std::string::npos);
}

TEST_CASE("itchReaderNamesBadLengthAndUnknownTypeOffsets") {
  ItchWriter w;
  w.system_event(1, 'O');                               // offset 0, 14 bytes
  w.begin_raw().ch('A').u32(0).u16(0).end();            // offset 14: 'A' of length 7
  ItchFileReader r(w.span(), "bad-length");
  std::string what = error_of(r);
  REQUIRE(what.find("message type 0x41 ('A') (add order) at byte offset 14 has length 7, "
                    "expected 36") != std::string::npos);
  REQUIRE(r.counts().messages == 1);

  ItchWriter u;
  u.system_event(1, 'O');
  u.begin_raw().ch('z').u32(0).end();
  ItchFileReader ru(u.span(), "unknown");
  what = error_of(ru);
  REQUIRE(what.find("unknown message type 0x7a ('z') at byte offset 14") != std::string::npos);

  ItchWriter e;
  e.begin_raw().end();
  ItchFileReader re(e.span(), "empty");
  REQUIRE(error_of(re).find("empty message (length 0) at byte offset 0") != std::string::npos);
}

TEST_CASE("itchReaderSkipBadCountsErrorsByKindAndGoesOn") {
  ItchWriter w;
  w.system_event(1, 'O');
  w.begin_raw().ch('z').u32(0).end();
  w.add_order(1, 2, 10, Side::Buy, 100, "X", 10'000);
  w.begin_raw().ch('A').u8(0).end();
  w.begin_raw().end();
  w.begin_raw().ch('?').end();
  w.order_delete(1, 3, 10);
  std::vector<std::uint8_t> b = w.bytes();
  b.insert(b.end(), {0, 36, 'A', 0, 0});  // truncated add
  ItchFileReader r(b, "mixed", ItchReadOptions{.skip_bad = true});
  const auto ticks = read_all(r);
  REQUIRE(ticks.size() == 3);
  REQUIRE(ticks[1].kind == TickKind::Add);
  REQUIRE(ticks[2].kind == TickKind::Delete);
  REQUIRE(ticks[2].seq == 3);
  REQUIRE(r.errors().unknown_type == 2);
  REQUIRE(r.errors().bad_length == 2);
  REQUIRE(r.errors().truncated == 1);
  REQUIRE(r.errors().total() == 5);
  REQUIRE(r.first_error().find("unknown message type 0x7a ('z') at byte offset 14") == 0);
}

TEST_CASE("itchReaderReadsAFileAndAGzipOfItAlike") {
  ItchWriter w;
  // Enough data (> 1 MiB) to cross the gzip buffer's refills at unaligned frame boundaries.
  for (std::uint64_t i = 1; i <= 40'000; ++i) {
    w.add_order(static_cast<std::uint16_t>(1 + i % 5), i, i, i % 2 ? Side::Buy : Side::Sell,
                static_cast<std::uint32_t>(i), "SYM", static_cast<std::int64_t>(i * 100));
    if (i % 3 == 0) w.order_executed(static_cast<std::uint16_t>(1 + i % 5), i, i, 1, i);
  }
  test::TempFile plain(".itch");
  test::TempFile gz(".itch.gz");
  plain.write(w.span());
  write_gzip(gz.path(), w.span());

  ItchFileReader rp(plain.path());
  ItchFileReader rg(gz.path(), ItchReadOptions{.gzip_buffer = 1});  // clamped to the minimum
  REQUIRE_FALSE(rp.compressed());
  REQUIRE(rg.compressed());
  REQUIRE(rg.name().find("(gzip)") != std::string::npos);
  const auto a = read_all(rp, 1000);
  const auto b = read_all(rg, 333);
  REQUIRE(a.size() == w.messages());
  REQUIRE(b.size() == a.size());
  REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(Tick)) == 0);
  REQUIRE(rg.counts()[itch::MsgType::OrderExecuted] == 13'333);
  REQUIRE(rg.offset() == w.bytes().size());
  REQUIRE(rg.progress().done == rg.progress().total);
}

TEST_CASE("itchReaderReportsACutGzipStream") {
  ItchWriter w;
  for (std::uint64_t i = 1; i <= 5'000; ++i) w.order_delete(1, i, i);
  test::TempFile whole(".gz");
  write_gzip(whole.path(), w.span());
  std::ifstream f(whole.path(), std::ios::binary);
  std::vector<std::uint8_t> gz((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  gz.resize(gz.size() / 2);
  test::TempFile cut(".gz");
  cut.write(gz);
  // What zlib can inflate of the cut file: every complete message in it is good data.
  std::vector<std::uint8_t> inflated(w.bytes().size());
  gzFile in = gzopen(cut.path().c_str(), "rb");
  REQUIRE(in != nullptr);
  std::size_t have = 0;
  for (int got = 0; (got = gzread(in, inflated.data() + have, static_cast<unsigned>(inflated.size() - have))) > 0;) {
    have += static_cast<std::size_t>(got);
  }
  gzclose(in);
  constexpr std::size_t kFrame = 2 + 19;  // an order delete
  const std::size_t complete = have / kFrame;
  REQUIRE(complete > 0);
  REQUIRE(complete < 5'000);

  // Without skip_bad: every complete message first, then the cut, named with its offsets.
  ItchFileReader r(cut.path());
  std::vector<Tick> got;
  std::string what;
  try {
    got = read_all(r);
  } catch (const Error& e) {
    what = e.what();
  }
  std::vector<Tick> before;
  ItchFileReader again(cut.path());
  std::vector<Tick> buf(97);
  try {
    for (;;) {
      const std::size_t n = again.read(buf);
      if (n == 0 && again.at_end()) break;
      before.insert(before.end(), buf.begin(), buf.begin() + static_cast<long>(n));
    }
  } catch (const Error&) {
  }
  CHECK(before.size() == complete);
  CHECK(before.back().order_ref == complete);
  REQUIRE(what.find("gzip stream ends early after uncompressed byte offset " + std::to_string(have)) != std::string::npos);
  if (have % kFrame != 0) {
    CHECK(what.find("from byte offset " + std::to_string(complete * kFrame) + " are the start of a cut message") != std::string::npos);
  }
  REQUIRE(r.errors().truncated == 1);

  ItchFileReader rs(cut.path(), ItchReadOptions{.skip_bad = true});
  const auto ticks = read_all(rs);
  REQUIRE(ticks.size() == complete);
  REQUIRE(rs.errors().truncated == 1);
  REQUIRE(rs.at_end());
}

TEST_CASE("itchReaderReturnsToItsCallerRegularlyOnEndlessJunkWithSkipBad") {
  // 4 MiB of zeros: two million empty messages, each bad. A reading loop must get control
  // back every so often (to see its stop request), not only at the end of the input.
  const std::vector<std::uint8_t> zeros(4 << 20, 0);
  ItchFileReader r(zeros, "zeros", ItchReadOptions{.skip_bad = true});
  std::vector<Tick> buf(256);
  std::uint64_t calls = 0;
  std::uint64_t ticks = 0;
  while (!r.at_end()) {
    ticks += r.read(buf);
    ++calls;
    REQUIRE(calls < 1'000'000);
  }
  CHECK(ticks == 0);
  CHECK(r.errors().bad_length == zeros.size() / 2);
  CHECK(calls >= 16);  // at most 65536 skipped messages per call
}

TEST_CASE("itchReaderNamesAMissingFile") {
  try {
    ItchFileReader r("/nonexistent/day.itch");
    FAIL("opened");
  } catch (const Error& e) {
    REQUIRE(std::string(e.what()).find("/nonexistent/day.itch") != std::string::npos);
  }
}

TEST_CASE("itchReaderReadsAnEmptyFileAsNoTicks") {
  test::TempFile empty(".itch");
  empty.write(std::string());
  ItchFileReader r(empty.path());
  std::array<Tick, 4> buf{};
  REQUIRE(r.read(buf) == 0);
  REQUIRE(r.errors().total() == 0);
}
