#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/itch_writer.hpp"
#include "tickrail/tools/feed/order_book.hpp"
#include "tickrail/tools/feed/synthetic.hpp"

using namespace tickrail;
using namespace tickrail::feed;

namespace {

constexpr std::int64_t px(double dollars) { return static_cast<std::int64_t>(dollars * 10'000 + 0.5); }

// The scenario of the test below, as ITCH bytes (one truncated message at the end).
ItchWriter scenario() {
  ItchWriter w;
  w.system_event(1, 'Q');
  w.stock_directory(1, 1, "ABC");
  w.stock_directory(2, 1, "XYZ");
  w.add_order(1, 10, 1, Side::Buy, 100, "ABC", px(10.00));       // q1: bid 10.00 x 100
  w.add_order(1, 11, 2, Side::Buy, 200, "ABC", px(10.01));       // q2: bid 10.01 x 200
  w.add_order(1, 12, 3, Side::Sell, 50, "ABC", px(10.05));       // q3: ask 10.05 x 50
  w.add_order_mpid(1, 13, 4, Side::Sell, 70, "ABC", px(10.03), "GSCO");  // q4: ask 10.03 x 70
  w.add_order(1, 14, 5, Side::Buy, 300, "ABC", px(10.01));       // q5: bid 10.01 x 500
  w.trade(1, 15, Side::Buy, 10, "ABC", px(10.02), 900);          // no effect on the book
  w.order_executed(1, 16, 2, 200, 901);                          // q6: bid 10.01 x 300
  w.order_cancel(1, 17, 5, 100);                                 // q7: bid 10.01 x 200
  w.order_replace(1, 18, 4, 6, 80, px(10.04));                   // q8: ask 10.04 x 80
  w.order_delete(1, 19, 1);                                      // 10.00 gone: not the top
  w.order_executed(1, 20, 99, 10, 902);                          // unknown reference
  w.add_order(1, 21, 7, Side::Sell, 10, "ABC", px(10.04));       // q9: ask 10.04 x 90
  w.order_executed_price(1, 22, 3, 20, 903, 'Y', px(10.06));     // 10.05 x 30: not the top
  w.add_order(2, 23, 10, Side::Buy, 5, "XYZ", px(1.00));         // q10
  w.order_delete(2, 24, 10);                                     // q11: empty again
  w.cross_trade(1, 25, 1000, "ABC", px(10.02), 904, 'C');
  return w;
}

}  // namespace

TEST_CASE("bookBuiltFromAnItchFileHasTheHandComputedTopOfBook") {
  ItchWriter w = scenario();
  std::vector<std::uint8_t> bytes = w.bytes();
  bytes.insert(bytes.end(), {0, 19, 'D', 0, 1});  // a truncated delete at the end
  ItchFileReader r(bytes, "scenario");
  OrderBook book(BookConfig{.expected_orders = 16});
  std::vector<Tick> quotes;
  std::vector<Tick> buf(4);
  bool failed = false;
  try {
    while (const std::size_t n = r.read(buf)) {
      for (std::size_t i = 0; i < n; ++i) {
        Tick q{};
        if (book.apply(buf[i], q)) quotes.push_back(q);
      }
    }
  } catch (const Error& e) {
    failed = true;
    REQUIRE(e.code() == Errc::truncated);
    REQUIRE(std::string(e.what()).find("byte offset " + std::to_string(w.bytes().size())) !=
            std::string::npos);
  }
  REQUIRE(failed);
  REQUIRE(r.counts().messages == 19);

  REQUIRE(quotes.size() == 11);
  REQUIRE(book.counts().quotes == 11);
  REQUIRE(quotes[0].kind == TickKind::Quote);
  REQUIRE(quotes[0].instrument == 1);
  REQUIRE(quotes[0].price == px(10.00));
  REQUIRE(quotes[0].qty == 100);
  REQUIRE(quotes[0].ask_price() == 0);
  REQUIRE(quotes[0].aux_qty == 0);
  REQUIRE(quotes[0].exch_ts == 10);
  REQUIRE((quotes[0].flags & 0xff) == 'A');
  REQUIRE(quotes[3].ask_price() == px(10.03));
  REQUIRE(quotes[3].aux_qty == 70);
  REQUIRE(quotes[4].qty == 500);
  REQUIRE(quotes[5].qty == 300);
  REQUIRE((quotes[5].flags & 0xff) == 'E');
  REQUIRE(quotes[6].qty == 200);
  REQUIRE(quotes[7].ask_price() == px(10.04));
  REQUIRE(quotes[7].aux_qty == 80);
  REQUIRE(quotes[8].aux_qty == 90);
  REQUIRE(quotes[8].seq == 15);
  REQUIRE(quotes[9].instrument == 2);
  REQUIRE(quotes[10].instrument == 2);
  REQUIRE(quotes[10].qty == 0);

  const TopOfBook top = book.top(1);
  REQUIRE(top.bid.price == px(10.01));
  REQUIRE(top.bid.qty == 200);
  REQUIRE(top.bid.orders == 1);
  REQUIRE(top.ask.price == px(10.04));
  REQUIRE(top.ask.qty == 90);
  REQUIRE(top.ask.orders == 2);
  REQUIRE_FALSE(book.top(2).has_bid());
  REQUIRE_FALSE(book.top(2).has_ask());
  REQUIRE_FALSE(book.top(3).has_bid());
  REQUIRE(book.live_orders() == 4);  // 3, 5, 6, 7
  REQUIRE(book.live_orders(1) == 4);
  REQUIRE(book.live_orders(2) == 0);
  REQUIRE(book.instruments() == std::vector<std::uint32_t>{1, 2});
  Level asks[4];
  REQUIRE(book.depth(1, Side::Sell, asks) == 2);
  REQUIRE(asks[1].price == px(10.05));
  REQUIRE(asks[1].qty == 30);
  const BookCounts& c = book.counts();
  REQUIRE(c.adds == 7);
  REQUIRE(c.executes == 2);
  REQUIRE(c.cancels == 1);
  REQUIRE(c.deletes == 2);
  REQUIRE(c.replaces == 1);
  REQUIRE(c.unknown_refs == 1);
  REQUIRE(c.rehashes == 0);

  book.clear();
  REQUIRE(book.live_orders() == 0);
  REQUIRE_FALSE(book.top(1).has_bid());
  REQUIRE(book.counts().adds == 0);
  ItchFileReader again(w.span(), "scenario again");
  while (const std::size_t n = again.read(buf)) {
    for (std::size_t i = 0; i < n; ++i) {
      Tick q{};
      (void)book.apply(buf[i], q);
    }
  }
  REQUIRE(book.top(1).ask.qty == 90);  // the same book once more
  REQUIRE(book.live_orders() == 4);
}

TEST_CASE("bookCountsBadReferencesAndOverfills") {
  OrderBook book;
  Tick t{};
  Tick q{};
  t.kind = TickKind::Add;
  t.instrument = 1;
  t.order_ref = 5;
  t.side = Side::Buy;
  t.qty = 10;
  t.price = 100;
  REQUIRE(book.apply(t, q));
  REQUIRE_FALSE(book.apply(t, q));  // same reference again
  t.order_ref = 0;
  REQUIRE_FALSE(book.apply(t, q));
  t.order_ref = 6;
  t.side = Side::None;
  REQUIRE_FALSE(book.apply(t, q));
  t.side = Side::Buy;
  t.instrument = 70'000;
  REQUIRE_FALSE(book.apply(t, q));
  for (TickKind k : {TickKind::Cancel, TickKind::Delete, TickKind::Execute, TickKind::Modify}) {
    Tick u{};
    u.kind = k;
    u.order_ref = 77;
    REQUIRE_FALSE(book.apply(u, q));
  }
  Tick x{};
  x.kind = TickKind::Execute;
  x.order_ref = 5;
  x.qty = 11;
  REQUIRE(book.apply(x, q));
  REQUIRE(q.qty == 0);
  Tick other{};
  other.kind = TickKind::Trade;
  REQUIRE_FALSE(book.apply(other, q));
  const BookCounts& c = book.counts();
  REQUIRE(c.duplicate_adds == 1);
  REQUIRE(c.invalid_adds == 2);
  REQUIRE(c.bad_instrument == 1);
  REQUIRE(c.unknown_refs == 4);
  REQUIRE(c.overfills == 1);
  REQUIRE(book.live_orders() == 0);
}

TEST_CASE("bookMatchesAReferenceModelThroughGrowthAndRandomFlow") {
  // A deliberately small table: it rehashes many times; deletions exercise backward shifting.
  OrderBook book(BookConfig{.expected_orders = 1});
  SyntheticConfig cfg;
  cfg.seed = 11;
  cfg.instruments = 3;
  cfg.depth = 600;
  cfg.tick_size = 100;
  SyntheticFeed feed(cfg);
  struct O {
    std::uint32_t instrument;
    Side side;
    std::int64_t price;
    std::uint32_t qty;
  };
  std::unordered_map<std::uint64_t, O> model;
  std::vector<Tick> buf(1000);
  std::uint64_t mismatches = 0;
  for (int round = 0; round < 200; ++round) {
    const std::size_t n = feed.read(buf);
    for (std::size_t i = 0; i < n; ++i) {
      const Tick& t = buf[i];
      switch (t.kind) {
        case TickKind::Add: model[t.order_ref] = O{t.instrument, t.side, t.price, t.qty}; break;
        case TickKind::Delete: model.erase(t.order_ref); break;
        case TickKind::Cancel:
        case TickKind::Execute: {
          O& o = model.at(t.order_ref);
          o.qty -= t.qty;
          if (o.qty == 0) model.erase(t.order_ref);
          break;
        }
        case TickKind::Modify: {
          O o = model.at(t.order_ref);
          model.erase(t.order_ref);
          o.price = t.price;
          o.qty = t.qty;
          model[t.aux] = o;
          break;
        }
        default: break;
      }
      Tick q{};
      (void)book.apply(t, q);
    }
    // Compare every instrument's top of book with the model's, once per batch.
    for (std::uint32_t ins = 1; ins <= 3; ++ins) {
      std::map<std::int64_t, std::uint64_t> bids;
      std::map<std::int64_t, std::uint64_t> asks;
      for (const auto& [ref, o] : model) {
        if (o.instrument != ins) continue;
        (o.side == Side::Buy ? bids : asks)[o.price] += o.qty;
      }
      const TopOfBook top = book.top(ins);
      if (bids.empty() != !top.has_bid() || asks.empty() != !top.has_ask()) ++mismatches;
      if (!bids.empty() && (bids.rbegin()->first != top.bid.price || bids.rbegin()->second != top.bid.qty)) ++mismatches;
      if (!asks.empty() && (asks.begin()->first != top.ask.price || asks.begin()->second != top.ask.qty)) ++mismatches;
    }
  }
  REQUIRE(mismatches == 0);
  REQUIRE(book.live_orders() == model.size());
  INFO("live " << book.live_orders());
  REQUIRE(book.counts().rehashes >= 1);
  REQUIRE(book.counts().unknown_refs == 0);
}

TEST_CASE("bookBatchApplyGivesTheSameQuotesAsOneByOne") {
  SyntheticConfig cfg;
  cfg.seed = 5;
  cfg.instruments = 20;
  SyntheticFeed a(cfg);
  SyntheticFeed b(cfg);
  OrderBook one(BookConfig{.expected_orders = 64});  // small: rehashes happen mid-batch too
  OrderBook batch(BookConfig{.expected_orders = 64});
  std::vector<Tick> in(777);
  std::vector<Tick> in_b(777);
  std::vector<Tick> q1;
  std::vector<Tick> qn(777);
  std::uint64_t total = 0;
  for (int round = 0; round < 200; ++round) {
    REQUIRE(a.read(in) == in.size());
    REQUIRE(b.read(in_b) == in_b.size());
    q1.clear();
    for (const Tick& t : in) {
      Tick q{};
      if (one.apply(t, q)) q1.push_back(q);
    }
    const std::size_t n = batch.apply(in_b, qn);
    REQUIRE(n == q1.size());
    REQUIRE(std::memcmp(q1.data(), qn.data(), n * sizeof(Tick)) == 0);
    total += n;
  }
  REQUIRE(total > 10'000);
  REQUIRE(batch.live_orders() == one.live_orders());
  REQUIRE(batch.counts().rehashes > 0);
  std::vector<Tick> small(3);
  REQUIRE(batch.apply(in, small) <= 3);  // never writes past the quotes it was given
}
