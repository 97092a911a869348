// LineArbiter against generated interleavings of two lines of one stream: losses on one line, on
// both, lags within and beyond the window, a line that stops; each run checked against the
// delivery it must make, computed apart from the arbiter.
#include "tickrail/line_arbiter.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

using tickrail::Tick;
using tickrail::detail::LineArbiter;

namespace {

struct Offer {
  int line;
  std::uint64_t seq;
};

struct Lines {
  std::vector<std::uint64_t> on[2];  // what each line brings, in order
  std::vector<Offer> order;          // both, interleaved as they arrive
};

// Sequences 1..n; each line loses each tick with its own probability; line 1 runs up to `lag`
// ticks behind or ahead of line 0 (each line stays in order).
Lines make_lines(std::uint64_t n, double loss0, double loss1, std::uint64_t lag, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution lose0(loss0), lose1(loss1);
  Lines l;
  for (std::uint64_t s = 1; s <= n; ++s) {
    if (!lose0(rng)) l.on[0].push_back(s);
    if (!lose1(rng)) l.on[1].push_back(s);
  }
  std::size_t i[2] = {0, 0};
  std::uniform_int_distribution<std::uint64_t> pick(0, 2 * lag + 1);
  while (i[0] < l.on[0].size() || i[1] < l.on[1].size()) {
    int k = pick(rng) & 1;
    if (i[k] == l.on[k].size()) k ^= 1;
    // Bound the lag: the line too far ahead waits.
    const std::uint64_t here = l.on[k][i[k]];
    const std::uint64_t there = i[k ^ 1] < l.on[k ^ 1].size() ? l.on[k ^ 1][i[k ^ 1]] : here;
    if (here > there + lag && i[k ^ 1] < l.on[k ^ 1].size()) k ^= 1;
    l.order.push_back({k, l.on[k][i[k]++]});
  }
  return l;
}

Tick tick_of(const Offer& o) {
  Tick t{};
  t.seq = o.seq;
  t.instrument = static_cast<std::uint32_t>(o.seq % 1000);
  t.qty = static_cast<std::uint32_t>(o.line);  // which copy was delivered
  return t;
}

struct Run {
  std::vector<Tick> out;
  LineArbiter arb;
  // The streams here start at 1, as a FailoverSubscriber starts at the lower of its lines' first
  // sequences (without start_at, at the first tick offered: a line ahead would hide the other's).
  explicit Run(std::size_t window) : arb(window) { arb.start_at(1); }
  void offer(const Offer& o) {
    arb.offer(o.line, tick_of(o), [this](const Tick& t) { out.push_back(t); });
  }
  void down(int line) {
    arb.line_down(line, [this](const Tick& t) { out.push_back(t); });
  }
};

// What must come out when the window never overflows: every sequence either line brought, once,
// in order, each the copy that arrived first.
std::vector<Offer> expected(const Lines& l) {
  std::vector<Offer> first;
  std::vector<bool> seen;
  for (const Offer& o : l.order) {
    if (o.seq >= seen.size()) seen.resize(o.seq + 1, false);
    if (!seen[o.seq]) first.push_back(o);
    seen[o.seq] = true;
  }
  std::sort(first.begin(), first.end(), [](const Offer& a, const Offer& b) { return a.seq < b.seq; });
  return first;
}

void check_same(const std::vector<Tick>& out, const std::vector<Offer>& want) {
  REQUIRE(out.size() == want.size());
  std::size_t i = 0;
  while (i < out.size() && out[i].seq == want[i].seq && out[i].qty == static_cast<std::uint32_t>(want[i].line)) ++i;
  INFO("first difference at delivery " << i);
  CHECK(i == out.size());
}

// Every delivery in increasing order, once; nothing counted twice.
void check_invariants(const Run& r, const Lines& l) {
  std::size_t i = 1;
  while (i < r.out.size() && r.out[i].seq > r.out[i - 1].seq) ++i;
  CHECK(i >= r.out.size());
  const auto& a = r.arb;
  CHECK(a.delivered() == r.out.size());
  CHECK(a.line(0).first + a.line(1).first == a.delivered());
  CHECK(a.line(0).first + a.line(0).duplicates <= l.on[0].size());
  CHECK(a.line(1).first + a.line(1).duplicates <= l.on[1].size());
  CHECK(a.delivered() + a.gaps() + a.skipped() == a.next() - 1);
}

}  // namespace

TEST_CASE("two lines with independent losses and a lag within the window deliver every tick either brought, once, in order, first copy") {
  const double loss0 = GENERATE(0.0, 0.01, 0.10, 0.5);
  const double loss1 = GENERATE(0.0, 0.05, 0.3);
  const std::uint64_t lag = GENERATE(0u, 3u, 200u);
  const std::uint32_t seed = GENERATE(1u, 2u);
  const Lines l = make_lines(20'000, loss0, loss1, lag, seed);
  Run r(1024);
  for (const Offer& o : l.order) r.offer(o);
  r.down(0);
  r.down(1);
  const std::vector<Offer> want = expected(l);
  check_same(r.out, want);
  check_invariants(r, l);
  CHECK(r.arb.skipped() == 0);
  // Lost on both lines: every sequence below the last brought that neither line brought.
  const std::uint64_t last = std::max(l.on[0].empty() ? 0 : l.on[0].back(), l.on[1].empty() ? 0 : l.on[1].back());
  CHECK(r.arb.gaps() == last - want.size());
  CHECK(r.arb.line(0).duplicates + r.arb.line(1).duplicates == l.order.size() - want.size());
}

TEST_CASE("a hole is a gap only once both lines have passed it, and waits while one has not") {
  Run r(64);
  auto o = [&](int line, std::uint64_t s) { r.offer({line, s}); };
  o(0, 1);
  o(0, 3);  // 2 lost on line 0, line 1 has brought nothing yet: 3 waits
  REQUIRE(r.out.size() == 1);
  CHECK(r.arb.holding());
  o(1, 1);
  o(1, 2);  // line 1 fills the hole: 2 then 3
  REQUIRE(r.out.size() == 3);
  CHECK_FALSE(r.arb.holding());
  CHECK(r.out[1].seq == 2);
  CHECK(r.out[1].qty == 1);
  CHECK(r.out[2].seq == 3);
  CHECK(r.out[2].qty == 0);
  o(0, 5);  // 4 missing on line 0
  o(1, 3);
  o(1, 6);  // line 1 passed 4 too: lost on both, 5 and 6 follow
  REQUIRE(r.out.size() == 5);
  CHECK(r.arb.gaps() == 1);
  CHECK(r.out[3].seq == 5);
  CHECK(r.out[4].seq == 6);
  CHECK(r.arb.line(1).duplicates == 2);  // its 1 and 3
}

TEST_CASE("a line that goes down fills no hole: the other line's holes are gaps at once, and it counts again once up") {
  Run r(64);
  auto o = [&](int line, std::uint64_t s) { r.offer({line, s}); };
  for (std::uint64_t s = 1; s <= 10; ++s) {
    o(0, s);
    o(1, s);
  }
  r.down(1);
  o(0, 12);  // 11 lost on line 0, line 1 is down
  REQUIRE(r.out.size() == 11);
  CHECK(r.out.back().seq == 12);
  CHECK(r.arb.gaps() == 1);
  r.arb.line_up(1);
  o(0, 14);  // 13 lost on line 0: line 1 is back and may bring it
  CHECK(r.out.back().seq == 12);
  o(1, 13);
  REQUIRE(r.out.size() == 13);
  CHECK(r.out[11].seq == 13);
  CHECK(r.out[11].qty == 1);
  CHECK(r.out[12].seq == 14);
}

TEST_CASE("lines further apart than the window give up holes, counted, and still deliver in order, once") {
  const std::uint64_t lag = GENERATE(100u, 5000u);
  const double loss = GENERATE(0.01, 0.2);
  const Lines l = make_lines(20'000, loss, loss, lag, 7);
  Run r(32);
  for (const Offer& o : l.order) r.offer(o);
  r.down(0);
  r.down(1);
  check_invariants(r, l);
  CHECK(r.arb.skipped() > 0);
  // Nothing offered is invented: every delivery is a copy some line brought.
  std::vector<bool> brought(20'001, false);
  for (const Offer& o : l.order) brought[o.seq] = true;
  for (const Tick& t : r.out) CHECK(brought[t.seq]);
}

TEST_CASE("skip_hole gives up the hole the owner stopped waiting for; a far jump costs no loop over it") {
  Run r(16);
  auto o = [&](int line, std::uint64_t s) { r.offer({line, s}); };
  o(0, 1);
  o(1, 1);
  o(0, 4);
  o(0, 5);  // 2 and 3 missing on line 0; line 1 stalls at 1
  REQUIRE(r.out.size() == 1);
  r.arb.skip_hole([&](const Tick& t) { r.out.push_back(t); });
  REQUIRE(r.out.size() == 3);
  CHECK(r.out[1].seq == 4);
  CHECK(r.arb.skipped() == 2);
  o(1, 3);  // late: already given up
  CHECK(r.arb.line(1).duplicates == 2);
  const std::uint64_t far = std::uint64_t{1} << 62;
  o(0, far);  // a leap: it waits for line 0's next tick
  CHECK(r.arb.next() == 6);
  o(0, far + 1);  // which follows it: skipped at once, no loop over the range
  CHECK(r.arb.next() == far + 1 - 15);
  CHECK(r.arb.line(0).refuted == 0);
  o(0, 0);  // no tick has sequence 0
  CHECK(r.arb.line(0).duplicates == 1);
}

// One corrupt or forged sequence number must not give up the stream: before, line 1's single
// tick near 2^40 moved next() there, and every honest tick of both lines was a duplicate for ever.
TEST_CASE("a line's leap beyond the window that its next tick does not follow moves nothing and is refuted") {
  const std::uint64_t bogus = GENERATE(std::uint64_t{1} << 40, std::uint64_t{10 + 64 + 1}, ~std::uint64_t{0});
  Run r(64);
  auto o = [&](int line, std::uint64_t s) { r.offer({line, s}); };
  for (std::uint64_t s = 1; s <= 10; ++s) {
    o(0, s);
    o(1, s);
  }
  o(1, bogus);
  CHECK(r.arb.next() == 11);
  for (std::uint64_t s = 11; s <= 1000; ++s) {
    o(1, s);  // line 1's next tick first: it does not follow the leap
    o(0, s);
  }
  REQUIRE(r.out.size() == 1000);
  for (std::size_t i = 0; i < r.out.size(); ++i) REQUIRE(r.out[i].seq == i + 1);
  CHECK(r.arb.line(1).refuted == 1);
  CHECK(r.arb.line(0).refuted == 0);
  CHECK(r.arb.skipped() == 0);
  CHECK(r.arb.gaps() == 0);
  CHECK(r.arb.line(0).first + r.arb.line(1).first == 1000);
  // A leap left waiting when its line goes down is refuted too: nothing will follow it.
  o(0, std::uint64_t{1} << 50);
  r.down(0);
  CHECK(r.arb.line(0).refuted == 1);
  CHECK(r.arb.next() == 1001);
}

TEST_CASE("a leap is taken once nothing can contradict it, or once the stream comes within a window of it") {
  Run r(16);
  auto o = [&](int line, std::uint64_t s) { r.offer({line, s}); };
  o(0, 1);
  o(1, 1);
  o(1, 40);  // parked: line 0 is up
  CHECK(r.out.size() == 1);
  r.down(0);  // line 0 will bring nothing more: 40 is taken, the holes below it are gaps
  REQUIRE(r.out.size() == 2);
  CHECK(r.out[1].seq == 40);
  CHECK(r.arb.line(1).refuted == 0);

  Run w(16);
  auto p = [&](int line, std::uint64_t s) { w.offer({line, s}); };
  p(0, 1);
  p(1, 1);
  p(1, 30);  // parked
  for (std::uint64_t s = 2; s <= 14; ++s) p(0, s);  // next() reaches 15: 30 is within the window
  CHECK(w.arb.line(1).refuted == 0);
  CHECK(w.arb.holding());  // 30 held, waiting for 15..29
  for (std::uint64_t s = 15; s <= 31; ++s) p(0, s);
  REQUIRE(w.out.size() == 31);
  CHECK(w.out[29].seq == 30);
  CHECK(w.out[29].qty == 1);  // line 1's copy came first
  CHECK(w.arb.line(0).duplicates == 1);
}

TEST_CASE("a leap its line follows is taken as the lines being a window apart; with the other line down at once") {
  Run r(16);
  auto o = [&](int line, std::uint64_t s) { r.offer({line, s}); };
  o(0, 1);
  o(1, 1);
  o(1, 100);  // line 0 lags: 2..99 may still come on it
  CHECK(r.out.size() == 1);
  CHECK(r.arb.next() == 2);
  o(1, 101);  // line 1 walks on from its leap: the lines are a window apart, holes beyond given up
  CHECK(r.arb.next() == 101 - 16 + 1);
  CHECK(r.arb.skipped() == 84);
  CHECK(r.arb.line(1).refuted == 0);
  CHECK(r.out.size() == 1);  // 86..99 wait, in the window, for line 0
  r.down(0);                 // which will bring nothing more: 100 and 101 follow
  REQUIRE(r.out.size() == 3);
  CHECK(r.out[1].seq == 100);
  CHECK(r.out[2].seq == 101);
  CHECK(r.arb.gaps() == 14);
  o(1, 1000);  // nobody can contradict a line alone: taken at once
  REQUIRE(r.out.size() == 4);
  CHECK(r.out[3].seq == 1000);
}
