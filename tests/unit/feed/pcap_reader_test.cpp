#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "feed_test_util.hpp"
#include "net_frames.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/pcap_reader.hpp"

using namespace tickrail;
using namespace tickrail::feed;
using test::Bytes;
using test::FrameSpec;

namespace {

constexpr std::string_view kSession = "000010059B";

// 1: seq 1-3 | 2: ARP | 3: seq 4-5, two VLAN tags | 4: TCP | 5: seq 10 (6-9 lost)
// 6: seq 4-5 again | 7: heartbeat, next 11 | 8: IPv4 fragment | 9: seq 11-12 untagged
// 10: end of session
std::vector<Bytes> session_frames() {
  std::vector<Bytes> f;
  ItchWriter a;
  a.stock_directory(5, 1, "MSFT");
  a.add_order(5, 2, 100, Side::Buy, 10, "MSFT", 3'000'000);
  a.add_order(5, 3, 101, Side::Sell, 20, "MSFT", 3'001'000);
  f.push_back(test::frame(test::mold_packet(kSession, 1, a)));
  f.push_back(test::frame(Bytes(28, 0), FrameSpec{.ethertype = 0x0806}));
  ItchWriter b;
  b.order_executed(5, 4, 100, 5, 9000);
  b.order_delete(5, 5, 101);
  f.push_back(test::frame(test::mold_packet(kSession, 4, b), FrameSpec{.vlans = 2}));
  f.push_back(test::frame(Bytes(40, 0), FrameSpec{.protocol = 6}));
  ItchWriter c;
  c.order_cancel(5, 10, 100, 1);
  f.push_back(test::frame(test::mold_packet(kSession, 10, c)));
  f.push_back(test::frame(test::mold_packet(kSession, 4, b)));
  f.push_back(test::frame(test::mold_packet(kSession, 11, ItchWriter())));
  f.push_back(test::frame(test::mold_packet(kSession, 11, c), FrameSpec{.frag = 0x2000}));
  ItchWriter d;
  d.order_delete(5, 11, 100);
  d.system_event(12, 'C');
  f.push_back(test::frame(test::mold_packet(kSession, 11, d), FrameSpec{.vlans = 0}));
  f.push_back(test::frame(test::mold_packet(kSession, 13, ItchWriter(), 0xffff)));
  return f;
}

std::vector<Tick> read_all(TickSource& src) {
  std::vector<Tick> all;
  std::vector<Tick> buf(2);  // small batches: packets span calls
  while (const std::size_t n = src.read(buf)) all.insert(all.end(), buf.begin(), buf.begin() + static_cast<long>(n));
  return all;
}

void check_session(PcapMoldReader& r, std::uint64_t packets = 10) {
  const auto ticks = read_all(r);
  std::vector<std::uint64_t> seqs;
  for (const auto& t : ticks) seqs.push_back(t.seq);
  REQUIRE(seqs == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 10, 11, 12});
  REQUIRE(ticks[1].kind == TickKind::Add);
  REQUIRE(ticks[1].instrument == 5);
  REQUIRE(ticks[3].kind == TickKind::Execute);
  REQUIRE(ticks[5].kind == TickKind::Cancel);
  REQUIRE(r.symbols().symbol(5) == "MSFT");
  const PcapCounts& c = r.capture_counts();
  REQUIRE(c.packets == packets);
  REQUIRE(c.not_udp == 2);
  REQUIRE(c.fragments == 1);
  REQUIRE(c.mold_packets == 7);
  REQUIRE(c.mold_messages == 8);
  REQUIRE(r.counts().messages == 8);
  REQUIRE(r.counts()[itch::MsgType::OrderDelete] == 2);
  const auto& s = r.sequence();
  REQUIRE(s.gap_count() == 1);
  REQUIRE(s.missing() == 4);
  REQUIRE(s.gaps()[0].expected == 6);
  REQUIRE(s.gaps()[0].received == 10);
  REQUIRE(s.gaps()[0].packet == 5);
  REQUIRE(s.duplicates() == 2);
  REQUIRE(s.heartbeats() == 1);
  REQUIRE(s.ends_of_session() == 1);
  REQUIRE(r.errors().total() == 0);
}

std::string error_of(TickSource& src) {
  try {
    read_all(src);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Bytes file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Offset of record `n` (1-based) in a classic pcap of these frames.
std::uint64_t record_offset(const std::vector<Bytes>& frames, std::size_t n) {
  std::uint64_t off = 24;
  for (std::size_t i = 0; i + 1 < n; ++i) off += 16 + frames[i].size();
  return off;
}

}  // namespace

TEST_CASE("pcapReaderDecodesAWrittenCaptureWithGapsAndSkippedPackets") {
  const auto frames = session_frames();
  test::TempFile f(".pcap");
  test::write_pcap(f.path(), frames);
  PcapMoldReader r(f.path());
  check_session(r);
  REQUIRE(r.progress().done == r.progress().total);
}

TEST_CASE("pcapReaderReadsPcapngAndMemoryAlike") {
  const auto frames = session_frames();
  const Bytes ng = test::pcapng(frames);
  PcapMoldReader r(ng, "session.pcapng");
  check_session(r);
}

TEST_CASE("pcapReaderFiltersByUdpPort") {
  auto frames = session_frames();
  frames.push_back(test::frame(test::mold_packet(kSession, 99, ItchWriter()), FrameSpec{.dport = 53}));
  test::TempFile f(".pcap");
  test::write_pcap(f.path(), frames);
  PcapMoldReader r(f.path(), PcapReadOptions{.udp_port = 26477});
  check_session(r, 11);
  REQUIRE(r.capture_counts().other_port == 1);
}

TEST_CASE("pcapReaderNamesPacketAndOffsetOfACutCapture") {
  const auto frames = session_frames();
  test::TempFile whole(".pcap");
  test::write_pcap(whole.path(), frames);
  Bytes b = file_bytes(whole.path());
  b.resize(b.size() - 10);  // into the last record's data
  PcapMoldReader r(b, "cut.pcap");
  const std::string what = error_of(r);
  REQUIRE(what.find("packet 10 (file offset " + std::to_string(record_offset(frames, 10)) + ")") !=
          std::string::npos);
  REQUIRE(what.find("truncated") != std::string::npos);
  REQUIRE(r.errors().truncated == 1);
}

TEST_CASE("pcapReaderReportsABadIpLengthAndSkipsItOnRequest") {
  ItchWriter w;
  w.order_delete(1, 1, 1);
  std::vector<Bytes> frames = {test::frame(test::mold_packet("S", 1, w)),
                               test::frame(test::mold_packet("S", 2, w), FrameSpec{.ip_total_delta = 30}),
                               test::frame(test::mold_packet("S", 3, w))};
  test::TempFile f(".pcap");
  test::write_pcap(f.path(), frames);
  PcapMoldReader r(f.path());
  const std::string what = error_of(r);
  INFO(what);
  REQUIRE(what.find("packet 2 (file offset " + std::to_string(record_offset(frames, 2)) +
                    "): IPv4 total length 99 exceeds the 69 bytes captured") != std::string::npos);
  PcapMoldReader rs(f.path(), PcapReadOptions{.skip_bad = true});
  const auto ticks = read_all(rs);
  REQUIRE(ticks.size() == 2);
  REQUIRE(rs.errors().bad_packet == 1);
  REQUIRE(rs.sequence().gap_count() == 1);  // the skipped packet's message is a gap
  REQUIRE(rs.first_error().find("packet 2") == 0);
}

TEST_CASE("pcapReaderReportsBadMoldPacketsAndBadItchInside") {
  ItchWriter two;
  two.order_delete(1, 1, 1);
  two.order_delete(1, 1, 2);
  Bytes overrun = test::mold_packet("S", 1, two);
  overrun.resize(overrun.size() - 3);
  ItchWriter bad;
  bad.order_delete(1, 1, 3);
  bad.begin_raw().ch('z').u32(0).end();
  std::vector<Bytes> frames = {test::frame(overrun), test::frame(test::mold_packet("S", 7, bad)),
                               test::frame(Bytes(5, 0))};
  test::TempFile f(".pcap");
  test::write_pcap(f.path(), frames);
  PcapMoldReader r(f.path());
  std::string what = error_of(r);
  INFO(what);
  REQUIRE(what.find("packet 1 (file offset 24): MoldUDP64 packet of 59 bytes: a message runs past "
                    "the end of the packet (message 2 of 2)") != std::string::npos);
  PcapMoldReader rs(f.path(), PcapReadOptions{.skip_bad = true});
  const auto ticks = read_all(rs);
  REQUIRE(ticks.size() == 1);
  REQUIRE(ticks[0].seq == 7);
  REQUIRE(rs.errors().bad_packet == 2);  // the overrun and the 5-byte payload
  REQUIRE(rs.errors().unknown_type == 1);

  std::vector<Bytes> only_bad = {frames[1]};
  test::TempFile g(".pcap");
  test::write_pcap(g.path(), only_bad);
  PcapMoldReader rb(g.path());
  std::vector<Tick> buf(8);
  REQUIRE(rb.read(buf) == 1);
  try {
    (void)rb.read(buf);
    FAIL("no error");
  } catch (const Error& e) {
    REQUIRE(std::string(e.what()).find("packet 1 (file offset 24): MoldUDP64 sequence 8: unknown "
                                       "message type 0x7a ('z')") != std::string::npos);
  }
}

TEST_CASE("pcapReaderRefusesWhatIsNotACapture") {
  const Bytes junk(100, 0x55);
  REQUIRE_THROWS_AS(PcapMoldReader(junk, "junk"), Error);
  REQUIRE_THROWS_AS(PcapMoldReader(Bytes(), "empty"), Error);
  REQUIRE_THROWS_AS(PcapMoldReader("/nonexistent.pcap"), Error);
}

TEST_CASE("pcapReaderReturnsToItsCallerRegularlyThroughOtherTraffic") {
  // 40,000 ARP frames, then one MoldUDP64 packet: a reading loop gets control back while the
  // reader skips the traffic that is not the feed, and the feed's tick still arrives.
  std::vector<Bytes> frames(40'000, test::frame(Bytes(28, 0), FrameSpec{.ethertype = 0x0806}));
  ItchWriter a;
  a.add_order(5, 2, 100, Side::Buy, 10, "MSFT", 3'000'000);
  frames.push_back(test::frame(test::mold_packet(kSession, 1, a)));
  test::TempFile f(".pcap");
  test::write_pcap(f.path(), frames);
  PcapMoldReader r(f.path());
  std::vector<Tick> buf(8);
  std::uint64_t calls = 0, ticks = 0;
  while (!r.at_end()) {
    ticks += r.read(buf);
    ++calls;
    REQUIRE(calls < 1000);
  }
  CHECK(ticks == 1);
  CHECK(calls >= 3);  // at most 16384 packets skipped per call
  CHECK(r.capture_counts().not_udp == 40'000);
}
