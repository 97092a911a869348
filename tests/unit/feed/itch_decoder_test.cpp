#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "itch_samples.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch.hpp"
#include "tickrail/tools/feed/itch_decoder.hpp"
#include "tickrail/tools/feed/itch_writer.hpp"

using namespace tickrail;
using namespace tickrail::feed;

namespace {

// Splits BinaryFILE bytes into messages (test helper: trusts the framing).
std::vector<std::vector<std::uint8_t>> split(const std::vector<std::uint8_t>& b) {
  std::vector<std::vector<std::uint8_t>> out;
  for (std::size_t o = 0; o + 2 <= b.size();) {
    const std::size_t n = itch::be16(b.data() + o);
    out.emplace_back(b.begin() + static_cast<long>(o + 2), b.begin() + static_cast<long>(o + 2 + n));
    o += 2 + n;
  }
  return out;
}

std::string symbol_of(std::uint64_t aux) {
  char s[8];
  std::memcpy(s, &aux, 8);
  return std::string(s, 8);
}

}  // namespace

TEST_CASE("itchLengthTableMatchesTheSpecification") {
  // Lengths from the specification's field tables: last field offset + its length.
  const std::pair<char, int> spec[] = {
      {'S', 12}, {'R', 39}, {'H', 25}, {'Y', 20}, {'L', 26}, {'V', 35}, {'W', 12}, {'K', 28},
      {'J', 35}, {'h', 21}, {'A', 36}, {'F', 40}, {'E', 31}, {'C', 36}, {'X', 23}, {'D', 19},
      {'U', 35}, {'P', 44}, {'Q', 40}, {'B', 19}, {'I', 50}, {'N', 20}, {'O', 48}};
  int known = 0;
  for (int b = 0; b < 256; ++b) known += itch::kLengths[static_cast<std::size_t>(b)] != 0;
  REQUIRE(known == 23);
  for (auto [t, n] : spec) {
    INFO("type " << t);
    REQUIRE(itch::length_of(static_cast<std::uint8_t>(t)) == static_cast<std::size_t>(n));
  }
  REQUIRE(std::string(itch::type_name('U')) == "order replace");
  REQUIRE(std::string(itch::type_name('z')) == "unknown");
}

TEST_CASE("itchCheckRejectsEmptyUnknownAndWrongLength") {
  const std::uint8_t add[36] = {'A'};
  REQUIRE(itch::check(add, 36) == itch::Check::ok);
  REQUIRE(itch::check(add, 35) == itch::Check::bad_length);
  REQUIRE(itch::check(add, 37) == itch::Check::bad_length);
  REQUIRE(itch::check(add, 0) == itch::Check::empty);
  const std::uint8_t z[12] = {'Z'};
  REQUIRE(itch::check(z, 12) == itch::Check::unknown_type);
}

TEST_CASE("typedViewsReadEveryFieldAtItsOffset") {
  ItchWriter w;
  test::write_every_type(w);
  const auto msgs = split(w.bytes());
  REQUIRE(msgs.size() == 23);
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    REQUIRE(msgs[i][0] == static_cast<std::uint8_t>(itch::kAllTypes[i]));
    REQUIRE(itch::check(msgs[i].data(), msgs[i].size()) == itch::Check::ok);
    const itch::MessageView v(msgs[i].data());
    REQUIRE(v.timestamp() == test::kTs);
  }
  const itch::StockDirectory r(msgs[1].data());
  REQUIRE(r.stock_locate() == test::kLocate);
  REQUIRE(r.stock() == "AAPL    ");
  REQUIRE(r.round_lot_size() == 100);
  REQUIRE(r.market_category() == 'Q');
  REQUIRE(r.inverse_indicator() == 'N');
  const itch::MwcbDecline v(msgs[5].data());
  REQUIRE(v.level1() == 3'000'123'456'789);
  REQUIRE(v.level3() == 2'600'000'000'000);
  const itch::LuldCollar j(msgs[8].data());
  REQUIRE(j.upper_price() == 3'300'000);
  REQUIRE(j.lower_price() == 2'700'000);
  REQUIRE(j.extension() == 2);
  const itch::AddOrderMpid f(msgs[11].data());
  REQUIRE(f.order_ref() == 1002);
  REQUIRE(f.side() == 'S');
  REQUIRE(f.shares() == 200);
  REQUIRE(f.price() == 3'188'000);
  REQUIRE(f.attribution() == "GSCO");
  const itch::OrderExecutedPrice c(msgs[13].data());
  REQUIRE(c.match_number() == 5002);
  REQUIRE(c.printable() == 'N');
  REQUIRE(c.execution_price() == 3'187'400);
  const itch::OrderReplace u(msgs[16].data());
  REQUIRE(u.original_ref() == 1001);
  REQUIRE(u.new_ref() == 1003);
  const itch::CrossTrade q(msgs[18].data());
  REQUIRE(q.shares() == 5'000'000'000ull);
  REQUIRE(q.cross_type() == 'O');
  const itch::Noii noii(msgs[20].data());
  REQUIRE(noii.paired_shares() == 1000);
  REQUIRE(noii.imbalance_direction() == 'S');
  REQUIRE(noii.far_price() == 3'180'000);
  REQUIRE(noii.price_variation() == 'L');
  const itch::DirectListing o(msgs[22].data());
  REQUIRE(o.near_execution_time() == test::kTs - 1);
  REQUIRE(o.upper_collar() == 550'000);
}

TEST_CASE("asYieldsATypedViewOnlyForItsTypeAndLength") {
  ItchWriter w;
  test::write_every_type(w);
  const auto msgs = split(w.bytes());
  // One view type per message type, in the specification's order.
  using Views = std::tuple<itch::SystemEvent, itch::StockDirectory, itch::TradingAction,
                           itch::RegSho, itch::ParticipantPosition, itch::MwcbDecline,
                           itch::MwcbStatus, itch::IpoQuotingPeriod, itch::LuldCollar,
                           itch::OperationalHalt, itch::AddOrder, itch::AddOrderMpid,
                           itch::OrderExecuted, itch::OrderExecutedPrice, itch::OrderCancel,
                           itch::OrderDelete, itch::OrderReplace, itch::Trade, itch::CrossTrade,
                           itch::BrokenTrade, itch::Noii, itch::RetailInterest,
                           itch::DirectListing>;
  STATIC_REQUIRE(std::tuple_size_v<Views> == itch::kAllTypes.size());
  int matched = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((matched += [&] {
       using V = std::tuple_element_t<I, Views>;
       const auto& m = msgs[I];
       REQUIRE(V::kType == itch::kAllTypes[I]);
       const auto v = itch::as<V>(m.data(), m.size());
       REQUIRE(v.has_value());
       REQUIRE(v->timestamp() == test::kTs);
       REQUIRE_FALSE(itch::as<V>(m.data(), m.size() - 1).has_value());
       const auto& other = msgs[(I + 1) % msgs.size()];
       REQUIRE_FALSE(itch::as<V>(other.data(), other.size()).has_value());
       return 1;
     }()), ...);
  }(std::make_index_sequence<std::tuple_size_v<Views>>());
  REQUIRE(matched == 23);
  const auto add = itch::as<itch::AddOrder>(msgs[10].data(), msgs[10].size());
  REQUIRE(add->price() == 3'187'500);
}

TEST_CASE("decoderMapsOrderFlowToTicks") {
  ItchWriter w;
  test::write_every_type(w);
  const auto msgs = split(w.bytes());
  ItchDecoder dec;
  std::vector<Tick> t(msgs.size());
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    REQUIRE(dec.decode(msgs[i].data(), msgs[i].size(), t[i]) == Decoded::tick);
    REQUIRE((t[i].flags & 0xff) == msgs[i][0]);
    REQUIRE(t[i].exch_ts == test::kTs);
    REQUIRE(t[i].seq == 0);
  }
  REQUIRE(dec.counts().messages == 23);
  REQUIRE(dec.counts().ticks == 23);
  REQUIRE(dec.counts()[itch::MsgType::AddOrder] == 1);
  REQUIRE(dec.symbols().symbol(test::kLocate) == "AAPL");

  const Tick& a = t[10];
  REQUIRE(a.kind == TickKind::Add);
  REQUIRE(a.instrument == test::kLocate);
  REQUIRE(a.order_ref == 1001);
  REQUIRE(a.side == Side::Buy);
  REQUIRE(a.qty == 300);
  REQUIRE(a.price == 3'187'500);
  REQUIRE(a.aux == 0);
  const Tick& f = t[11];
  REQUIRE(f.kind == TickKind::Add);
  REQUIRE(f.side == Side::Sell);
  REQUIRE(symbol_of(f.aux).substr(0, 4) == "GSCO");
  REQUIRE(t[12].kind == TickKind::Execute);
  REQUIRE(t[12].qty == 100);
  REQUIRE(t[12].aux == 5001);
  REQUIRE(t[12].price == 0);
  REQUIRE(t[13].kind == TickKind::Execute);
  REQUIRE(t[13].price == 3'187'400);
  REQUIRE(t[13].flags == ('C' | ('N' << 8)));
  REQUIRE(t[14].kind == TickKind::Cancel);
  REQUIRE(t[14].qty == 25);
  REQUIRE(t[15].kind == TickKind::Delete);
  REQUIRE(t[15].order_ref == 1002);
  REQUIRE(t[16].kind == TickKind::Modify);
  REQUIRE(t[16].order_ref == 1001);
  REQUIRE(t[16].aux == 1003);
  REQUIRE(t[16].qty == 400);
  REQUIRE(t[16].price == 3'187'600);
  REQUIRE(t[17].kind == TickKind::Trade);
  REQUIRE(t[17].aux == 5003);
  REQUIRE(t[17].price == 3'187'700);
  REQUIRE(t[18].kind == TickKind::Trade);
  REQUIRE(t[18].qty == 0xffffffffu);  // 5e9 shares saturate
  REQUIRE(t[18].flags == ('Q' | ('O' << 8)));
}

TEST_CASE("decoderMapsAdministrativeMessagesToStatusTicks") {
  ItchWriter w;
  test::write_every_type(w);
  const auto msgs = split(w.bytes());
  ItchDecoder dec;
  std::vector<Tick> t(msgs.size());
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    REQUIRE(dec.decode(msgs[i].data(), msgs[i].size(), t[i]) == Decoded::tick);
  }
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 19, 20, 21, 22}) {
    INFO("message " << i);
    REQUIRE(t[static_cast<std::size_t>(i)].kind == TickKind::Status);
  }
  REQUIRE(t[0].flags == ('S' | ('O' << 8)));
  REQUIRE(t[0].instrument == 0);
  REQUIRE(symbol_of(t[1].aux) == "AAPL    ");
  REQUIRE(t[1].qty == 100);
  REQUIRE(t[2].flags == ('H' | ('T' << 8)));
  REQUIRE(t[5].price == 300'012'345);  // Price(8) 30001.23456789 -> Price(4), truncated
  REQUIRE(t[7].price == 250'000);
  REQUIRE(t[7].qty == 34'200);
  REQUIRE(t[8].order_ref == ((std::uint64_t{3'300'000} << 32) | 2'700'000));
  REQUIRE(t[19].aux == 5003);
  REQUIRE(t[20].side == Side::Sell);
  REQUIRE(t[20].qty == 1000);
  REQUIRE(t[20].aux_qty == 200);
  REQUIRE(t[20].price == 3'187'500);
  REQUIRE(t[22].price == 500'000);
}

TEST_CASE("decoderWithoutStatusTicksSkipsButCounts") {
  ItchWriter w;
  test::write_every_type(w);
  const auto msgs = split(w.bytes());
  ItchDecoder dec(DecoderOptions{.status_ticks = false});
  int ticks = 0;
  int skipped = 0;
  Tick t{};
  for (const auto& m : msgs) {
    const Decoded d = dec.decode(m.data(), m.size(), t);
    ticks += d == Decoded::tick;
    skipped += d == Decoded::skipped;
  }
  REQUIRE(ticks == 9);  // A F E C X D U P Q
  REQUIRE(skipped == 14);
  REQUIRE(dec.counts().messages == 23);
  REQUIRE(dec.symbols().symbol(test::kLocate) == "AAPL");  // the directory still learns
}

TEST_CASE("decoderCountsUnknownAndBadLength") {
  ItchDecoder dec;
  Tick t{};
  const std::uint8_t z[5] = {'Z', 0, 0, 0, 0};
  const std::uint8_t a[20] = {'A'};
  REQUIRE(dec.decode(z, 5, t) == Decoded::unknown_type);
  REQUIRE(dec.decode(a, 20, t) == Decoded::bad_length);
  REQUIRE(dec.decode(a, 0, t) == Decoded::bad_length);
  REQUIRE(dec.counts().unknown_type == 1);
  REQUIRE(dec.counts().bad_length == 2);
  REQUIRE(dec.counts().messages == 0);
}

TEST_CASE("writerEncodesTicksBackToTheSameTicks") {
  ItchWriter w;
  Tick in[7]{};
  for (auto& t : in) {
    t.instrument = 3;
    t.exch_ts = 1234;
  }
  in[0].kind = TickKind::Add; in[0].order_ref = 9; in[0].side = Side::Sell; in[0].qty = 10;
  in[0].price = 1'000'000; in[0].flags = 'A';
  in[1].kind = TickKind::Execute; in[1].order_ref = 9; in[1].qty = 4; in[1].aux = 77;
  in[1].flags = 'E';
  in[2].kind = TickKind::Execute; in[2].order_ref = 9; in[2].qty = 1; in[2].aux = 78;
  in[2].price = 999'900; in[2].flags = 'C' | ('Y' << 8);
  in[3].kind = TickKind::Cancel; in[3].order_ref = 9; in[3].qty = 2; in[3].flags = 'X';
  in[4].kind = TickKind::Modify; in[4].order_ref = 9; in[4].aux = 10; in[4].qty = 5;
  in[4].price = 1'000'100; in[4].flags = 'U';
  in[5].kind = TickKind::Delete; in[5].order_ref = 10; in[5].flags = 'D';
  in[6].kind = TickKind::Trade; in[6].side = Side::Buy; in[6].qty = 8; in[6].price = 5;
  in[6].aux = 79; in[6].flags = 'P';
  for (const auto& t : in) REQUIRE(w.append(t));
  Tick status{};
  status.kind = TickKind::Status;
  REQUIRE_FALSE(w.append(status));
  const auto msgs = split(w.bytes());
  REQUIRE(msgs.size() == 7);
  ItchDecoder dec;
  for (std::size_t i = 0; i < 7; ++i) {
    Tick out{};
    REQUIRE(dec.decode(msgs[i].data(), msgs[i].size(), out) == Decoded::tick);
    REQUIRE(std::memcmp(&out, &in[i], sizeof(Tick)) == 0);
  }
}

TEST_CASE("writerRefusesAMessageOfTheWrongLength") {
  ItchWriter w;
  REQUIRE_THROWS_AS(w.begin('A', 1, 0).u64(1).end(), Error);
  ItchWriter raw;
  raw.begin_raw().ch('A').u32(1).end();  // raw frames are the caller's business
  REQUIRE(raw.bytes().size() == 7);
}
