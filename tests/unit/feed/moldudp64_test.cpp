#include <catch2/catch.hpp>

#include "net_frames.hpp"
#include "tickrail/tools/feed/moldudp64.hpp"

using namespace tickrail;
using namespace tickrail::feed;
using test::Bytes;

namespace {

ItchWriter three_messages() {
  ItchWriter w;
  w.system_event(1, 'O');
  w.order_delete(1, 2, 10);
  w.order_delete(1, 3, 11);
  return w;
}

mold::Header header(std::string_view session, std::uint64_t seq, std::uint16_t count) {
  mold::Header h;
  for (std::size_t i = 0; i < 10; ++i) h.session[i] = i < session.size() ? session[i] : ' ';
  h.seq = seq;
  h.count = count;
  return h;
}

}  // namespace

TEST_CASE("moldPacketParsesHeaderAndWalksItsMessages") {
  const Bytes b = test::mold_packet("000010059B", 14'757'701, three_messages());
  mold::Packet p;
  REQUIRE(p.parse(b) == mold::PacketStatus::ok);
  REQUIRE(p.header().session_name() == "000010059B");
  REQUIRE(p.header().seq == 14'757'701);
  REQUIRE(p.header().count == 3);
  std::span<const std::uint8_t> m;
  REQUIRE(p.next(m));
  REQUIRE(m.size() == 12);
  REQUIRE(m[0] == 'S');
  REQUIRE(p.next(m));
  REQUIRE(p.next(m));
  REQUIRE(m[0] == 'D');
  REQUIRE(m.size() == 19);
  REQUIRE_FALSE(p.next(m));
}

TEST_CASE("moldPacketRecognisesHeartbeatAndEndOfSession") {
  const ItchWriter none;
  mold::Packet p;
  REQUIRE(p.parse(test::mold_packet("S", 42, none)) == mold::PacketStatus::ok);
  REQUIRE(p.header().heartbeat());
  REQUIRE(p.remaining() == 0);
  REQUIRE(p.parse(test::mold_packet("S", 42, none, 0xffff)) == mold::PacketStatus::ok);
  REQUIRE(p.header().end_of_session());
  REQUIRE(p.header().messages() == 0);
  REQUIRE(p.parse(test::mold_packet("S", 42, three_messages(), 0)) ==
          mold::PacketStatus::data_in_control);
}

TEST_CASE("moldPacketRejectsShortOverrunAndTrailingBytes") {
  mold::Packet p;
  const Bytes good = test::mold_packet("S", 1, three_messages());
  REQUIRE(p.parse(std::span(good).first(19)) == mold::PacketStatus::short_header);
  std::size_t at = 99;
  REQUIRE(p.parse(std::span(good).first(good.size() - 1), &at) == mold::PacketStatus::message_overrun);
  REQUIRE(at == 2);
  REQUIRE(p.parse(test::mold_packet("S", 1, three_messages(), 4), &at) ==
          mold::PacketStatus::message_overrun);
  REQUIRE(at == 3);
  REQUIRE(p.parse(test::mold_packet("S", 1, three_messages(), 2)) == mold::PacketStatus::trailing_bytes);
  REQUIRE(p.remaining() == 0);  // a rejected packet yields nothing
  Bytes one_length_byte = test::mold_packet("S", 1, three_messages(), 4);
  one_length_byte.push_back(0);
  REQUIRE(p.parse(one_length_byte, &at) == mold::PacketStatus::message_overrun);
}

TEST_CASE("sequenceTrackerReportsGapsAndTheirSize") {
  mold::SequenceTracker t;
  auto o = t.observe(header("A", 100, 5), 1);  // mid-session start: no gap
  REQUIRE(o.new_session);
  REQUIRE(o.missing == 0);
  o = t.observe(header("A", 105, 2), 2);
  REQUIRE(o.missing == 0);
  o = t.observe(header("A", 110, 1), 3);  // 107, 108, 109 lost
  REQUIRE(o.missing == 3);
  o = t.observe(header("A", 111, 0), 4);  // heartbeat, in order
  REQUIRE(o.missing == 0);
  o = t.observe(header("A", 115, 0), 5);  // heartbeat announcing 111..114 were lost
  REQUIRE(o.missing == 4);
  REQUIRE(t.gap_count() == 2);
  REQUIRE(t.missing() == 7);
  REQUIRE(t.heartbeats() == 2);
  REQUIRE(t.gaps().size() == 2);
  REQUIRE(t.gaps()[0].expected == 107);
  REQUIRE(t.gaps()[0].received == 110);
  REQUIRE(t.gaps()[0].missing() == 3);
  REQUIRE(t.gaps()[0].packet == 3);
  REQUIRE(t.gaps()[1].packet == 5);
}

TEST_CASE("sequenceTrackerSkipsDuplicatesAndKeepsSessionsApart") {
  mold::SequenceTracker t(1);
  t.observe(header("A", 1, 10), 1);
  auto o = t.observe(header("A", 5, 10), 2);  // 5..10 seen, 11..14 new
  REQUIRE(o.duplicate == 6);
  REQUIRE(o.missing == 0);
  o = t.observe(header("A", 1, 3), 3);  // all old
  REQUIRE(o.duplicate == 3);
  REQUIRE(t.duplicates() == 9);
  o = t.observe(header("B", 500, 1), 4);
  REQUIRE(o.new_session);
  o = t.observe(header("A", 20, 1), 5);
  REQUIRE(o.missing == 5);
  o = t.observe(header("A", 30, 1), 6);
  REQUIRE(o.missing == 9);
  REQUIRE(t.gap_count() == 2);
  REQUIRE(t.gaps().size() == 1);  // recording capped, counting not
  REQUIRE(t.sessions().size() == 2);
  t.observe(header("A", 31, 0xffff), 7);
  REQUIRE(t.ends_of_session() == 1);
}
