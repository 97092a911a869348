// The real excerpts in ../shared/data/itch (or $TICKRAIL_ITCH_DATA): never copied into the
// project, so these tests pass vacuously, with a warning, where the folder is absent. Expected
// figures were established independently of this code (a separate Python walk of the files).
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "feed_test_util.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/order_book.hpp"
#include "tickrail/tools/feed/pcap_reader.hpp"

using namespace tickrail;
using namespace tickrail::feed;

namespace {

std::map<char, std::uint64_t> by_type(const ItchCounts& c) {
  std::map<char, std::uint64_t> m;
  for (std::size_t t = 0; t < 256; ++t) {
    if (c.by_type[t] != 0) m[static_cast<char>(t)] = c.by_type[t];
  }
  return m;
}

bool data_present() {
  if (!test::itch_data_dir().empty()) return true;
  WARN("real ITCH excerpts absent (../shared/data/itch, TICKRAIL_ITCH_DATA): skipped");
  return false;
}

}  // namespace

TEST_CASE("realAaplExcerptParsesToTheEndAndBuildsAClosedBook") {
  if (!data_present()) return;
  ItchFileReader r((test::itch_data_dir() / "aapl-20200130-first10k.itch").string());
  OrderBook book;
  std::vector<Tick> buf(512);
  std::uint64_t ticks = 0;
  while (const std::size_t n = r.read(buf)) {
    ticks += n;
    for (std::size_t i = 0; i < n; ++i) {
      Tick q{};
      (void)book.apply(buf[i], q);
    }
  }
  REQUIRE(ticks == 10'000);
  REQUIRE(r.errors().total() == 0);
  REQUIRE(by_type(r.counts()) == std::map<char, std::uint64_t>{
      {'A', 4758}, {'D', 4083}, {'E', 849}, {'F', 2}, {'H', 1}, {'L', 52}, {'P', 240},
      {'R', 1}, {'U', 7}, {'X', 6}, {'Y', 1}});
  REQUIRE(r.symbols().symbol(13) == "AAPL");
  REQUIRE(book.counts().unknown_refs == 0);
  REQUIRE(book.counts().overfills == 0);
  REQUIRE(book.live_orders() == 215);
  const TopOfBook top = book.top(13);
  REQUIRE(top.bid.price == 3'201'400);
  REQUIRE(top.bid.qty == 25);
  REQUIRE(top.ask.price == 3'203'000);
  REQUIRE(top.ask.qty == 100);
}

TEST_CASE("realSessionStartExcerptParsesToTheEnd") {
  if (!data_present()) return;
  ItchFileReader r((test::itch_data_dir() / "session-start-1000.itch").string());
  std::vector<Tick> buf(512);
  std::uint64_t ticks = 0;
  while (const std::size_t n = r.read(buf)) ticks += n;
  REQUIRE(ticks == 1000);
  REQUIRE(r.errors().total() == 0);
  REQUIRE(by_type(r.counts()) ==
          std::map<char, std::uint64_t>{{'H', 3}, {'R', 993}, {'S', 1}, {'Y', 3}});
  REQUIRE(r.symbols().size() == 993);
}

TEST_CASE("realCaptureDecodesAllPacketsThroughMoldUdp64") {
  if (!data_present()) return;
  PcapMoldReader r((test::itch_data_dir() / "xnas-20230822-moldudp64-100pkts.pcap").string());
  OrderBook book;
  std::vector<Tick> buf(64);
  std::vector<std::uint64_t> seqs;
  while (const std::size_t n = r.read(buf)) {
    for (std::size_t i = 0; i < n; ++i) {
      seqs.push_back(buf[i].seq);
      Tick q{};
      (void)book.apply(buf[i], q);
    }
  }
  REQUIRE(r.errors().total() == 0);
  REQUIRE(r.capture_counts().packets == 100);
  REQUIRE(r.capture_counts().mold_packets == 100);
  REQUIRE(seqs.size() == 269);
  REQUIRE(seqs.front() == 14'757'701);
  REQUIRE(seqs.back() == 14'757'969);
  REQUIRE(r.sequence().gap_count() == 0);
  REQUIRE(r.sequence().sessions().size() == 1);
  REQUIRE(mold::session_string(r.sequence().sessions()[0].first) == "000010059B");
  REQUIRE(by_type(r.counts()) == std::map<char, std::uint64_t>{
      {'A', 125}, {'D', 30}, {'E', 3}, {'F', 6}, {'I', 5}, {'S', 1}, {'U', 99}});
  // It starts mid-session: references to orders added before it are counted, not fatal.
  REQUIRE(book.counts().unknown_refs == 132);
  REQUIRE(book.live_orders() == 131);
}
