#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/tools/feed/order_book.hpp"
#include "tickrail/tools/feed/synthetic.hpp"

using namespace tickrail;
using namespace tickrail::feed;

namespace {

std::vector<Tick> generate(const SyntheticConfig& cfg, std::size_t n, std::size_t batch) {
  SyntheticFeed f(cfg);
  std::vector<Tick> out(n);
  std::size_t got = 0;
  while (got < n) got += f.read(std::span<Tick>(out).subspan(got, std::min(batch, n - got)));
  return out;
}

}  // namespace

TEST_CASE("syntheticFeedIsDeterministicForASeed") {
  SyntheticConfig cfg;
  cfg.seed = 42;
  const auto a = generate(cfg, 200'000, 1000);
  const auto b = generate(cfg, 200'000, 7);  // batching does not change the stream
  REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(Tick)) == 0);
  cfg.seed = 43;
  const auto c = generate(cfg, 200'000, 1000);
  REQUIRE(std::memcmp(a.data(), c.data(), a.size() * sizeof(Tick)) != 0);
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i].seq == i + 1);
}

TEST_CASE("syntheticFlowRefersOnlyToLiveOrdersAndNeverCrosses") {
  SyntheticConfig cfg;
  cfg.seed = 7;
  cfg.instruments = 5;
  cfg.first_instrument = 100;
  SyntheticFeed f(cfg);
  OrderBook book(BookConfig{.expected_orders = 1024});
  std::map<TickKind, std::uint64_t> kinds;
  std::vector<Tick> buf(512);
  std::uint64_t crossed = 0;
  std::uint64_t off_grid = 0;
  std::uint64_t exch_ts = 0;
  for (int round = 0; round < 1000; ++round) {
    const std::size_t n = f.read(buf);
    REQUIRE(n == buf.size());
    for (std::size_t i = 0; i < n; ++i) {
      const Tick& t = buf[i];
      ++kinds[t.kind];
      REQUIRE(t.instrument >= 100);
      REQUIRE(t.instrument < 105);
      REQUIRE(t.exch_ts > exch_ts);
      exch_ts = t.exch_ts;
      if (t.kind == TickKind::Add || t.kind == TickKind::Modify) {
        off_grid += t.price <= 0 || t.price % cfg.tick_size != 0;
      }
      Tick q{};
      if (book.apply(t, q) && q.qty != 0 && q.aux_qty != 0) crossed += q.price >= q.ask_price();
    }
  }
  REQUIRE(book.counts().unknown_refs == 0);
  REQUIRE(book.counts().duplicate_adds == 0);
  REQUIRE(book.counts().overfills == 0);
  REQUIRE(crossed == 0);
  REQUIRE(off_grid == 0);
  REQUIRE(book.live_orders() == f.live_orders());
  for (TickKind k : {TickKind::Add, TickKind::Modify, TickKind::Cancel, TickKind::Delete,
                     TickKind::Execute, TickKind::Trade}) {
    INFO(to_string(k));
    REQUIRE(kinds[k] > 1000);
  }
  // The book keeps its depth around the configured target, not growing without bound.
  REQUIRE(f.live_orders() < 5 * 2 * cfg.depth);
  REQUIRE(f.live_orders() > 5 * cfg.depth / 4);
}

TEST_CASE("syntheticBurstsComeTightlySpacedOnOneInstrument") {
  SyntheticConfig cfg;
  cfg.seed = 3;
  cfg.gap_ns = 1000;
  cfg.burst_every = 1000;
  cfg.burst_length = 100;
  cfg.burst_gap_ns = 10;
  const auto t = generate(cfg, 10'000, 256);
  std::uint64_t prev = cfg.start_ts;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::uint64_t step = t[i].exch_ts - prev;
    prev = t[i].exch_ts;
    if (i % 1000 < 100) {
      REQUIRE(step == 10);
      // A burst is one instrument's (forced executions of another's excepted: none can be
      // pending across a burst start more than a few ticks, and they stay on one instrument).
      if (i % 1000 > 20) REQUIRE(t[i].instrument == t[i - 1].instrument);
    } else {
      REQUIRE(step >= 500);
      REQUIRE(step <= 1500);
    }
  }
}

TEST_CASE("syntheticFeedStopsAtItsLimit") {
  SyntheticConfig cfg;
  cfg.limit = 1000;
  SyntheticFeed f(cfg);
  std::vector<Tick> buf(300);
  std::size_t total = 0;
  while (const std::size_t n = f.read(buf)) total += n;
  REQUIRE(total == 1000);
  REQUIRE(f.progress().done == 1000);
  REQUIRE(f.progress().total == 1000);
  REQUIRE(f.read(buf) == 0);
}

TEST_CASE("syntheticFeedRejectsConfigsThatCannotWork") {
  SyntheticConfig c;
  c.instruments = 0;
  REQUIRE_THROWS_AS(SyntheticFeed(c), Error);
  c = {};
  c.depth = c.max_orders + 1;
  REQUIRE_THROWS_AS(SyntheticFeed(c), Error);
  c = {};
  c.burst_every = 10;
  c.burst_length = 11;
  REQUIRE_THROWS_AS(SyntheticFeed(c), Error);
  c = {};
  c.start_price = 5;
  REQUIRE_THROWS_AS(SyntheticFeed(c), Error);
}
