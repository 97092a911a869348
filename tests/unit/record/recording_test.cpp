// The recording format: write and read back (with and without zstd), seek by sequence number and
// by exchange time, every truncation of a small file, a corrupt block, another version.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "../feed/feed_test_util.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/open_source.hpp"
#include "tickrail/tools/record/recording.hpp"

using namespace tickrail;
using namespace tickrail::record;
using tickrail::feed::test::TempFile;

namespace {

// Ticks 1..n (seq), with sequence gaps after every 97th and exchange times 1000 ns apart.
std::vector<Tick> make_ticks(std::size_t n, std::uint64_t first_seq = 1) {
  std::vector<Tick> v(n);
  std::uint64_t seq = first_seq;
  for (std::size_t i = 0; i < n; ++i) {
    Tick& t = v[i];
    t = Tick{};
    t.seq = seq;
    seq += (i % 97 == 96) ? 3 : 1;
    t.exch_ts = 34'200'000'000'000 + i * 1000;
    t.send_ts = 5'000'000 + i * 7;
    t.kind = TickKind::Add;
    t.side = i % 2 ? Side::Buy : Side::Sell;
    t.price = static_cast<std::int64_t>(1'000'000 + (i % 50) * 100);
    t.qty = static_cast<std::uint32_t>(100 + i % 9);
    t.instrument = static_cast<std::uint32_t>(i % 8 + 1);
    t.order_ref = i + 1;
  }
  return v;
}

RecordingMeta meta_for(bool zstd) {
  RecordingMeta m;
  m.channel = "md.test";
  m.transport = TransportKind::shm;
  m.cycles_per_ns = 2.5;
  m.start_ns = 1'700'000'000'000'000'000;
  m.start_cycles = 42;
  m.zstd = zstd;
  return m;
}

void write_file(const std::string& path, const std::vector<Tick>& ticks, std::size_t block, bool zstd,
                bool close = true) {
  RecordingWriter w(path, meta_for(zstd), WriterOptions{.zstd = zstd, .zstd_level = 1, .force = true});
  for (std::size_t i = 0; i < ticks.size(); i += block) {
    const std::size_t n = std::min(block, ticks.size() - i);
    w.append(std::span<const Tick>(ticks.data() + i, n), 1'700'000'000'000'000'000 + i);
  }
  if (close) w.close(EndReason::publisher_gone, 0);
}

std::vector<Tick> read_all(const std::string& path, const Range& range = {}, bool skip_bad = false) {
  RecordingSource src(path, range, skip_bad);
  std::vector<Tick> out;
  Tick buf[100];
  for (;;) {
    const std::size_t n = src.read(buf);
    out.insert(out.end(), buf, buf + n);
    if (n == 0 && src.at_end()) break;
  }
  return out;
}

bool same(const std::vector<Tick>& a, const std::vector<Tick>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(Tick)) == 0);
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void put_bytes(const std::string& path, const char* data, std::size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data, static_cast<std::streamsize>(n));
}

}  // namespace

TEST_CASE("recordingRoundTripsEveryTickWithAndWithoutZstd") {
  const bool zstd = GENERATE(false, true);
  const std::vector<Tick> ticks = make_ticks(10'000);
  TempFile f(".rec");
  write_file(f.path(), ticks, 1000, zstd);
  const Recording r(f.path());
  CHECK(r.clean());
  CHECK(r.meta().channel == "md.test");
  CHECK(r.meta().cycles_per_ns == 2.5);
  CHECK(r.meta().start_cycles == 42);
  CHECK(r.blocks().size() == 10);
  CHECK(r.ticks() == 10'000);
  CHECK(r.trailer().ticks == 10'000);
  CHECK(static_cast<EndReason>(r.trailer().end_reason) == EndReason::publisher_gone);
  // 10'000 ticks with a gap of 2 after every 97th: 103 gaps of 2 sequence numbers.
  std::uint64_t missing = 0;
  for (const Gap& g : r.gaps()) missing += g.missing;
  CHECK(missing == 2 * (10'000 / 97));
  CHECK(r.trailer().missing == missing);
  CHECK(same(read_all(f.path()), ticks));
  if (zstd) {
    CHECK(r.file_size() < ticks.size() * sizeof(Tick) / 2);  // these ticks compress well
  }
  CHECK(feed::detect_format(f.path()) == feed::InputFormat::recording);
}

TEST_CASE("recordingSeeksBySequenceAndTimeWithoutReadingOtherBlocks") {
  const bool zstd = GENERATE(false, true);
  const std::vector<Tick> ticks = make_ticks(5000);
  TempFile f(".rec");
  write_file(f.path(), ticks, 256, zstd);
  const Recording r(f.path());
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{256}, std::size_t{4999}}) {
    const std::size_t b = r.seek_seq(ticks[i].seq);
    REQUIRE(b < r.blocks().size());
    CHECK(r.blocks()[b].header.first_seq <= ticks[i].seq);
    CHECK(r.blocks()[b].header.last_seq >= ticks[i].seq);
    CHECK(r.seek_time(ticks[i].exch_ts) == i / 256);
  }
  CHECK(r.seek_seq(ticks.back().seq + 1) == r.blocks().size());
  // A sequence number inside a gap starts at the tick after it.
  Range range;
  range.from_seq = ticks[96].seq + 1;  // missing
  range.to_seq = ticks[300].seq;
  const std::vector<Tick> got = read_all(f.path(), range);
  CHECK(same(got, std::vector<Tick>(ticks.begin() + 97, ticks.begin() + 301)));
  Range times;
  times.from_time = ticks[1000].exch_ts;
  times.to_time = ticks[1010].exch_ts;
  CHECK(same(read_all(f.path(), times), std::vector<Tick>(ticks.begin() + 1000, ticks.begin() + 1011)));
}

TEST_CASE("recordingCutAtEveryByteGivesAValidPrefixAndSaysWhere") {
  const bool zstd = GENERATE(false, true);
  const std::vector<Tick> ticks = make_ticks(40);
  TempFile full(".rec");
  write_file(full.path(), ticks, 8, zstd);
  const std::vector<char> bytes = bytes_of(full.path());
  const Recording whole(full.path());
  REQUIRE(whole.blocks().size() == 5);
  TempFile cut(".rec");
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    INFO("cut at " << len << " of " << bytes.size());
    put_bytes(cut.path(), bytes.data(), len);
    const std::size_t header = sizeof(FileHeader) + 7;  // "md.test"
    if (len < header) {
      CHECK_THROWS_AS(Recording(cut.path()), Error);
      continue;
    }
    const Recording r(cut.path());
    CHECK_FALSE(r.clean());
    CHECK_FALSE(r.stop_reason().empty());
    // The valid prefix: every block that ends within the cut, and only those.
    std::size_t complete = 0;
    for (const BlockEntry& b : whole.blocks()) {
      if (b.offset + sizeof(BlockHeader) + b.header.stored_size <= len) ++complete;
    }
    CHECK(r.blocks().size() == complete);
    CHECK(r.valid_end() <= len);
    // Reading gives the prefix, then an error naming the file and where it stops.
    RecordingSource src(cut.path());
    std::vector<Tick> got;
    Tick buf[16];
    std::string error;
    try {
      for (;;) {
        const std::size_t n = src.read(buf);
        got.insert(got.end(), buf, buf + n);
        if (n == 0 && src.at_end()) break;
      }
    } catch (const Error& e) {
      error = e.what();
    }
    CHECK(same(got, std::vector<Tick>(ticks.begin(), ticks.begin() + static_cast<std::ptrdiff_t>(complete * 8))));
    CHECK(error.find(cut.path()) != std::string::npos);
    CHECK(error.find("byte") != std::string::npos);
  }
}

TEST_CASE("recordingCorruptBlockIsNamedAndSkippedOnlyWithSkipBad") {
  const bool zstd = GENERATE(false, true);
  const std::vector<Tick> ticks = make_ticks(64);
  TempFile f(".rec");
  write_file(f.path(), ticks, 16, zstd);
  std::vector<Tick> expected;
  {
    const Recording r(f.path());
    std::vector<char> bytes = bytes_of(f.path());
    const BlockEntry& b = r.blocks()[1];
    bytes[b.offset + sizeof(BlockHeader) + b.header.stored_size / 2] ^= 0x5a;  // a payload byte
    put_bytes(f.path(), bytes.data(), bytes.size());
  }
  std::string error;
  std::vector<Tick> got;
  RecordingSource strict(f.path());
  Tick buf[64];
  try {
    for (;;) {
      const std::size_t n = strict.read(buf);
      got.insert(got.end(), buf, buf + n);
      if (n == 0 && strict.at_end()) break;
    }
  } catch (const Error& e) {
    error = e.what();
  }
  CHECK(same(got, std::vector<Tick>(ticks.begin(), ticks.begin() + 16)));  // block 0, then the error
  CHECK(error.find("block 1") != std::string::npos);
  CHECK(error.find("checksum mismatch") != std::string::npos);
  // skip_bad: blocks 0, 2 and 3; the bad one counted.
  RecordingSource lenient(f.path(), {}, true);
  got.clear();
  for (;;) {
    const std::size_t n = lenient.read(buf);
    got.insert(got.end(), buf, buf + n);
    if (n == 0 && lenient.at_end()) break;
  }
  expected.assign(ticks.begin(), ticks.begin() + 16);
  expected.insert(expected.end(), ticks.begin() + 32, ticks.end());
  CHECK(same(got, expected));
  CHECK(lenient.bad_blocks() == 1);
  CHECK(lenient.first_error().find("checksum mismatch") != std::string::npos);
}

TEST_CASE("recordingOfAnotherVersionOrNotARecordingIsRefused") {
  const std::vector<Tick> ticks = make_ticks(10);
  TempFile f(".rec");
  write_file(f.path(), ticks, 10, false);
  std::vector<char> bytes = bytes_of(f.path());
  // Version 1 (crc32 payloads) is the format before this one.
  bytes[offsetof(FileHeader, version)] = 1;
  put_bytes(f.path(), bytes.data(), bytes.size());
  try {
    const Recording r(f.path());
    FAIL("a version 1 file was read");
  } catch (const Error& e) {
    CHECK(e.code() == make_error_code(Errc::version_mismatch));
    CHECK(std::string(e.what()).find("version 1, this build reads version 2") != std::string::npos);
  }
  put_bytes(f.path(), "not a recording at all", 22);
  CHECK_THROWS_AS(Recording(f.path()), Error);
}

TEST_CASE("recordingWriterRefusesAnExistingFileWithoutForceAndOutOfOrderTicks") {
  TempFile f(".rec");
  f.write(std::string("keep me"));
  CHECK_THROWS_AS(RecordingWriter(f.path(), meta_for(false), WriterOptions{}), Error);
  CHECK(bytes_of(f.path()).size() == 7);  // untouched
  RecordingWriter w(f.path(), meta_for(false), WriterOptions{.force = true});
  std::vector<Tick> ticks = make_ticks(4);
  std::swap(ticks[1], ticks[2]);
  CHECK_THROWS_AS(w.append(ticks, 0), Error);
}

TEST_CASE("recordingWriterOnAFullDiskFailsClearlyAndLeavesAValidPrefix") {
  // A disk that fills mid-recording, as a file size limit: writes past it fail (EFBIG, with
  // SIGXFSZ ignored), as they would with ENOSPC. What is on disk must stay readable.
  const std::vector<Tick> ticks = make_ticks(4000);
  TempFile f(".rec");
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 100'000;  // about six blocks of 16 KiB
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string error;
  std::size_t written = 0;
  {
    RecordingWriter w(f.path(), meta_for(false), WriterOptions{.force = true});
    try {
      for (std::size_t i = 0; i < ticks.size(); i += 256) {
        w.append(std::span<const Tick>(ticks.data() + i, 256), 0);
        written += 256;
      }
      w.close(EndReason::stopped, 0);
    } catch (const Error& e) {
      error = e.what();
    }
    CHECK_THROWS_AS(w.append(std::span<const Tick>(ticks.data(), 1), 0), Error);  // no more after a failure
  }
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  std::signal(SIGXFSZ, old_handler);
  CHECK(error.find(f.path()) != std::string::npos);
  CHECK(error.find("at byte") != std::string::npos);
  REQUIRE(written > 0);
  REQUIRE(written < ticks.size());
  const Recording r(f.path());
  CHECK_FALSE(r.clean());
  CHECK(r.ticks() == written);
  RecordingSource src(f.path());
  std::vector<Tick> prefix;
  Tick buf[256];
  CHECK_THROWS_AS(([&] {
    for (;;) {
      const std::size_t n = src.read(buf);
      prefix.insert(prefix.end(), buf, buf + n);
      if (n == 0 && src.at_end()) break;
    }
  })(), Error);
  CHECK(same(prefix, std::vector<Tick>(ticks.begin(), ticks.begin() + static_cast<std::ptrdiff_t>(written))));
}
