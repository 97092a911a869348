// Sequence tracking above the transport: gaps, duplicates, reordering, recovery from a history
// that forgets, giving up, and the bounded window. The "network" and the "history" here are
// plain vectors: this tests the logic, the rdma suite tests it over real verbs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "tickrail/line_arbiter.hpp"
#include "transport/rdma/ud/sequence_tracker.hpp"

using namespace tickrail;
using namespace tickrail::rdma::ud;

namespace {

Tick tick(std::uint64_t seq) {
  Tick t{};
  t.seq = seq;
  t.price = static_cast<std::int64_t>(seq) * 3;
  t.order_ref = seq ^ 0xabcdef;
  return t;
}

struct Fixture {
  explicit Fixture(std::uint32_t cap) : window(cap), tr(window.data(), cap) {}
  std::vector<Tick> window;
  SequenceTracker tr;
  std::vector<std::uint64_t> got;

  // A datagram of ticks [first, first + n), as the subscriber handles one.
  std::size_t datagram(std::uint64_t first, std::uint32_t n, std::size_t room = 1 << 20) {
    if (!tr.started()) tr.start(first);
    const bool late = tr.observe(first, first + n);
    std::uint32_t i = 0;
    std::size_t delivered = 0;
    if (tr.in_order(first)) {
      const auto k = static_cast<std::uint32_t>(std::min<std::size_t>(n, room));
      for (; i < k; ++i) got.push_back(first + i);
      tr.delivered_direct(k);
      delivered = k;
    }
    for (; i < n; ++i) {
      (void)tr.store(tick(first + i), late ? SequenceTracker::Source::late
                                           : SequenceTracker::Source::live);
    }
    return delivered;
  }
  std::size_t drain(std::size_t limit = 1 << 20) {
    return tr.deliver(
        [&](const Tick& t) {
          CHECK(t.price == static_cast<std::int64_t>(t.seq) * 3);
          CHECK(t.order_ref == (t.seq ^ 0xabcdef));
          got.push_back(t.seq);
        },
        limit);
  }
};

std::vector<std::uint64_t> range(std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t s = lo; s < hi; ++s) v.push_back(s);
  return v;
}

}  // namespace

TEST_CASE("inOrderDatagramsAreDeliveredStraightThrough") {
  Fixture f(64);
  CHECK(f.datagram(1, 3) == 3);
  CHECK(f.datagram(4, 1) == 1);
  CHECK(f.got == range(1, 5));
  CHECK_FALSE(f.tr.behind());
  CHECK(f.tr.counters().delivered == 4);
  CHECK(f.tr.counters().gaps == 0);
}

TEST_CASE("theLimitHoldsTheRestOfADatagramInOrder") {
  Fixture f(64);
  CHECK(f.datagram(1, 5, 2) == 2);
  CHECK(f.got == range(1, 3));
  CHECK(f.tr.behind());
  CHECK(f.drain(2) == 2);
  CHECK(f.datagram(6, 2) == 0);  // held behind seq 5
  CHECK(f.drain() == 3);
  CHECK(f.got == range(1, 8));
}

TEST_CASE("aLateDatagramFillsItsHoleAndCountsAsReordered") {
  Fixture f(64);
  f.datagram(1, 2);
  f.datagram(5, 2);  // 3, 4 missing
  CHECK(f.tr.counters().gaps == 1);
  CHECK(f.drain() == 0);
  const Hole h = f.tr.first_hole(100);
  CHECK(h.lo == 3);
  CHECK(h.hi == 5);  // trimmed of the present 5, 6
  f.datagram(3, 2);
  CHECK(f.drain() == 4);
  CHECK(f.got == range(1, 7));
  CHECK(f.tr.counters().reordered == 2);
  CHECK(f.tr.counters().lost == 0);
}

TEST_CASE("duplicatesAreCountedAndNeverDelivered") {
  Fixture f(64);
  f.datagram(1, 4);
  f.datagram(2, 2);  // already delivered
  f.datagram(8, 1);
  f.datagram(8, 1);  // already held
  CHECK(f.tr.counters().duplicates == 3);
  f.datagram(5, 3);
  f.drain();
  CHECK(f.got == range(1, 9));
}

TEST_CASE("recoveryFillsHolesAndDeliveryStaysInOrder") {
  Fixture f(64);
  f.datagram(1, 1);
  f.datagram(10, 1);
  const Hole h = f.tr.first_hole(100);
  REQUIRE(h.lo == 2);
  REQUIRE(h.hi == 10);
  std::vector<Tick> history;
  for (std::uint64_t s = h.lo; s < h.hi; ++s) history.push_back(tick(s));
  CHECK(f.tr.recovered(history.data(), h.lo, h.size()) == 8);
  f.drain();
  CHECK(f.got == range(1, 11));
  CHECK(f.tr.counters().recovered == 8);
  CHECK(f.tr.counters().lost == 0);
}

TEST_CASE("ticksOverwrittenInHistoryAreLostWithAnExactCount") {
  Fixture f(64);
  f.datagram(1, 1);
  f.datagram(20, 1);  // 2..19 missing
  // The history (capacity 8, say) now holds 12..19: slots of 2..11 carry newer sequences,
  // and one is being rewritten (0).
  std::vector<Tick> read;
  for (std::uint64_t s = 2; s < 20; ++s) read.push_back(s >= 12 ? tick(s) : tick(s + 8));
  read[3].seq = 0;
  f.tr.recovered(read.data(), 2, read.size());
  f.drain();
  CHECK(f.got == std::vector<std::uint64_t>{1, 12, 13, 14, 15, 16, 17, 18, 19, 20});
  CHECK(f.tr.counters().lost == 10);
  CHECK(f.tr.counters().loss_events == 1);
  CHECK(f.tr.counters().recovered == 8);
}

TEST_CASE("aTickHeldWhenItsRecoveryFailsIsStillDelivered") {
  Fixture f(64);
  f.datagram(1, 1);
  f.datagram(5, 1);
  f.datagram(3, 1);  // late, held
  std::vector<Tick> read{tick(10), tick(11), tick(12)};  // 2, 3, 4 overwritten
  f.tr.recovered(read.data(), 2, 3);
  f.drain();
  CHECK(f.got == std::vector<std::uint64_t>{1, 3, 5});
  CHECK(f.tr.counters().lost == 2);
  CHECK(f.tr.counters().loss_events == 2);  // two separate runs: 2, and 4
}

TEST_CASE("aHeartbeatRevealsALostTail") {
  Fixture f(64);
  f.datagram(1, 3);
  f.tr.observe(7, 7);  // the publisher's next is 7: 4, 5, 6 exist
  CHECK(f.tr.counters().gaps == 1);
  CHECK(f.tr.behind());
  const Hole h = f.tr.first_hole(100);
  CHECK(h.lo == 4);
  CHECK(h.hi == 7);
  f.tr.observe(7, 7);  // the same heartbeat again: no new gap
  CHECK(f.tr.counters().gaps == 1);
}

TEST_CASE("givingUpCountsEveryHoleOnceAndDeliversWhatWasHeld") {
  Fixture f(64);
  f.datagram(1, 1);
  f.datagram(4, 1);
  f.datagram(8, 2);  // holes: 2, 3, 5, 6, 7
  f.tr.observe(12, 12);  // and 10, 11
  f.tr.give_up(f.tr.highest());
  f.drain();
  CHECK(f.got == std::vector<std::uint64_t>{1, 4, 8, 9});
  CHECK(f.tr.counters().lost == 7);
  CHECK(f.tr.counters().loss_events == 3);
  CHECK_FALSE(f.tr.behind());
  f.datagram(12, 1);
  CHECK(f.got.back() == 12);
}

// policy = conflate over UD: a tick the history no longer holds stops the stream there (the
// subscriber then catches up through the last-value table) instead of being passed as lost.
TEST_CASE("aConflatingTrackerStopsAtATickLostForGoodUntilItSkips") {
  Fixture f(64);
  f.tr.stop_at_loss(true);
  f.datagram(1, 2);
  f.datagram(10, 3);  // 3..9 missing; 10, 11, 12 held
  std::vector<Tick> read;
  for (std::uint64_t s = 3; s < 10; ++s) read.push_back(s < 6 ? tick(s) : tick(s + 64));  // 6..9 gone
  f.tr.recovered(read.data(), 3, read.size());
  f.drain();
  CHECK(f.got == range(1, 6));  // up to the first tick lost for good, and no further
  CHECK(f.tr.lapped());
  CHECK(f.tr.next() == 6);
  CHECK(f.tr.counters().lost == 0);
  f.drain();  // stays stopped
  CHECK(f.got == range(1, 6));
  CHECK(f.tr.lapped());

  // The table said the publisher was at 11: 6..10 are skipped (10 was held: lost all the same),
  // counted once, and the stream goes on from 11 with what it held.
  f.tr.skip_to(11);
  CHECK_FALSE(f.tr.lapped());
  CHECK(f.tr.counters().lost == 5);
  CHECK(f.tr.counters().loss_events == 1);
  f.drain();
  CHECK(f.got.back() == 12);
  CHECK(f.tr.next() == 13);
  CHECK_FALSE(f.tr.behind());
  // Nothing of the skipped run is left in the window: nothing held (13 goes straight through),
  // and 10's slot takes the tick a window later.
  CHECK(f.datagram(13, 1) == 1);
  f.datagram(74, 1);  // 10 + 64: the slot 10 used
  f.tr.give_up(74);
  f.drain();
  CHECK(f.tr.lapped());  // 14..73 given up: a conflating tracker stops there too
  f.tr.skip_to(74);
  f.drain();
  CHECK(f.got.back() == 74);
  CHECK(f.tr.counters().lost == 5 + 60);
  CHECK(f.tr.counters().duplicates == 0);

  // Stopped at a loss it cannot catch up with (no table now): the run is passed and counted,
  // and the next run stops again.
  f.datagram(76, 1);  // 75 missing, and gone from the history
  const Tick newer = tick(75 + 64);
  f.tr.recovered(&newer, 75, 1);
  f.drain();
  REQUIRE(f.tr.lapped());
  CHECK(f.tr.first_hole(100).empty());  // known gone: not read again
  f.tr.pass_loss();
  f.drain();
  CHECK_FALSE(f.tr.lapped());
  CHECK(f.got.back() == 76);
  CHECK(f.tr.counters().lost == 5 + 60 + 1);
  f.datagram(78, 1);  // 77 missing
  f.tr.give_up(78);
  f.drain();
  CHECK(f.tr.lapped());
}

TEST_CASE("ticksATableDeliveryRolledForwardAreNotDeliveredAndMayCountAsLost") {
  Fixture f(64);
  f.datagram(1, 10);
  CHECK(f.tr.counters().delivered == 10);
  f.tr.discount(4, false);  // a snapshot's roll forward: neither delivered nor lost
  CHECK(f.tr.counters().delivered == 6);
  CHECK(f.tr.counters().lost == 0);
  f.tr.discount(3, true);  // a conflation's: lost (their entries reach the app)
  CHECK(f.tr.counters().delivered == 3);
  CHECK(f.tr.counters().lost == 3);
}

TEST_CASE("holesAnotherLineCoveredArePassedWithoutAReadOrALoss") {
  Fixture f(64);
  f.datagram(1, 1);
  f.datagram(4, 1);
  f.datagram(8, 2);  // holes: 2, 3, 5, 6, 7
  f.tr.cover(6);     // the other line delivered up to 5
  const Hole h = f.tr.first_hole(100);
  CHECK(h.lo == 6);  // only what the other line has not delivered is left to read
  CHECK(h.hi == 8);
  f.tr.cover(6, 7);  // and it brought 7: only 6 is read
  CHECK(f.tr.first_hole(100).hi == 7);
  f.tr.cover(6);
  f.drain();
  // 4, held, is still delivered (the arbiter discards it as the other line's duplicate).
  CHECK(f.got == std::vector<std::uint64_t>{1, 4});
  CHECK(f.tr.counters().covered == 3);
  CHECK(f.tr.counters().lost == 0);
  CHECK(f.tr.next() == 6);
  std::vector<Tick> history{tick(6), tick(7)};
  f.tr.recovered(history.data(), 6, 2);
  f.drain();
  CHECK(f.got == std::vector<std::uint64_t>{1, 4, 6, 7, 8, 9});
  CHECK(f.tr.counters().recovered == 2);
  CHECK(f.tr.counters().lost == 0);
  CHECK_FALSE(f.tr.behind());
}

TEST_CASE("underCoverAReadIsOneRunOfMissingTicks") {
  Fixture f(64);
  f.datagram(1, 1);
  f.datagram(4, 1);
  f.datagram(8, 1);  // holes 2-3 and 5-7
  CHECK(f.tr.first_hole(100).hi == 8);  // alone, one read over both runs
  f.tr.cover(2);
  const Hole h = f.tr.first_hole(100);
  CHECK(h.lo == 2);
  CHECK(h.hi == 4);  // with another line, the first run only
}

TEST_CASE("coverWinsOverGivingUpAndNeverPassesWhatIsNotKnownToExist") {
  Fixture f(64);
  f.datagram(1, 1);
  f.datagram(5, 1);  // holes 2, 3, 4
  f.tr.give_up(f.tr.highest());
  f.tr.cover(4);     // 2, 3 came on the other line; 4 came on neither
  f.tr.cover(2);     // an older word changes nothing
  f.drain();
  CHECK(f.got == std::vector<std::uint64_t>{1, 5});
  CHECK(f.tr.counters().covered == 2);
  CHECK(f.tr.counters().lost == 1);
  // Covering beyond what this line knows of passes nothing yet: 6 and 7 arrive and are delivered.
  f.tr.cover(100);
  f.drain();
  CHECK(f.tr.next() == 6);
  f.datagram(6, 2);
  CHECK(f.got == std::vector<std::uint64_t>{1, 5, 6, 7});
}

TEST_CASE("ticksBeyondTheWindowAreLeftToRecovery") {
  Fixture f(16);
  f.datagram(1, 1);
  f.datagram(30, 1);  // 2..29 missing; 30 is beyond next + 16
  CHECK(f.tr.counters().overrun == 1);
  const Hole h = f.tr.first_hole(100);
  CHECK(h.lo == 2);
  CHECK(h.hi == 18);  // within the window
  std::vector<Tick> read;
  for (std::uint64_t s = h.lo; s < h.hi; ++s) read.push_back(tick(s));
  f.tr.recovered(read.data(), h.lo, h.size());
  CHECK(f.drain() == 16);
  const Hole h2 = f.tr.first_hole(100);
  CHECK(h2.lo == 18);
  CHECK(h2.hi == 31);  // 30 was never stored: it is fetched too
  read.clear();
  for (std::uint64_t s = h2.lo; s < h2.hi; ++s) read.push_back(tick(s));
  f.tr.recovered(read.data(), h2.lo, h2.size());
  f.drain();
  CHECK(f.got == range(1, 31));
  CHECK(f.tr.counters().lost == 0);
}

TEST_CASE("aLateJoinerStartsKBackAndRecoversThemAsAHoleNotAGap") {
  Fixture f(64);
  f.tr.start(91, 100);
  f.datagram(100, 1);
  CHECK(f.tr.counters().gaps == 0);
  const Hole h = f.tr.first_hole(100);
  CHECK(h.lo == 91);
  CHECK(h.hi == 100);
  std::vector<Tick> read;
  for (std::uint64_t s = 91; s < 100; ++s) read.push_back(tick(s));
  f.tr.recovered(read.data(), 91, 9);
  f.drain();
  CHECK(f.got == range(91, 101));
}

// A long stream through a network that drops, duplicates and reorders datagrams, with
// recovery from a history that keeps only the last H ticks: every sequence is delivered once,
// in order, or counted lost; and a tick is lost only if it had left the history when read.
TEST_CASE("everyTickIsDeliveredOnceInOrderOrCountedLostUnderRandomLossAndReordering") {
  std::mt19937_64 rng(GENERATE(1, 2, 3, 4));
  const std::uint32_t window = 256;
  const std::uint64_t history = GENERATE(64, 4096);
  const std::uint64_t total = 50000;
  Fixture f(window);
  std::vector<std::uint64_t> lost_expected;
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> delayed;
  std::uint64_t published = 0;  // the "publisher" has sent 1..published
  bool reading = false;
  Hole pending{};
  std::uint64_t read_at = 0;  // the publisher's position when the read completes

  auto history_read = [&](Hole h) {
    std::vector<Tick> out;
    for (std::uint64_t s = h.lo; s < h.hi; ++s) {
      // The slot of s holds the newest sequence with its residue that was published.
      const bool gone = read_at >= history && s <= read_at - history;
      std::uint64_t held = s;
      while (gone && held + history <= read_at) held += history;
      out.push_back(tick(held));
    }
    return out;
  };

  f.tr.start(1);  // joined before the first tick (which the network may drop)
  while (published < total || f.tr.behind() || !delayed.empty() || reading) {
    if (published < total) {
      const std::uint32_t n = static_cast<std::uint32_t>(1 + rng() % 4);
      const std::uint64_t first = published + 1;
      published = std::min<std::uint64_t>(total, published + n);
      const auto count = static_cast<std::uint32_t>(published - first + 1);
      const double r = u(rng);
      if (r < 0.10) {
        // dropped
      } else if (r < 0.15) {
        delayed.emplace_back(first, count);  // arrives later
      } else {
        f.datagram(first, count);
        if (r > 0.97) f.datagram(first, count);  // duplicated
      }
    } else {
      f.tr.observe(published + 1, published + 1);  // heartbeats at the end
    }
    if (!delayed.empty() && u(rng) < 0.3) {
      const auto d = delayed.front();
      delayed.erase(delayed.begin());
      f.datagram(d.first, d.second);
    }
    // Reads are slow against a short history (they take ~80 ticks): some holes are forgotten.
    if (reading && u(rng) < (history < 4096 ? 0.03 : 0.5)) {
      read_at = published;
      const auto read = history_read(pending);
      for (std::uint64_t i = 0; i < pending.size(); ++i) {
        const std::uint64_t s = pending.lo + i;
        if (read[i].seq != s && s >= f.tr.next()) lost_expected.push_back(s);
      }
      f.tr.recovered(read.data(), pending.lo, pending.size());
      reading = false;
    }
    if (!reading) {
      pending = f.tr.first_hole(64);
      reading = !pending.empty();
    }
    f.drain(1 + rng() % 8);
  }
  f.drain();
  // In order, once each, and everything accounted for.
  REQUIRE(std::is_sorted(f.got.begin(), f.got.end()));
  REQUIRE(std::adjacent_find(f.got.begin(), f.got.end()) == f.got.end());
  const TrackerCounters& c = f.tr.counters();
  CHECK(c.delivered == f.got.size());
  CHECK(c.delivered + c.lost == total);
  // Lost exactly the ones the history no longer had and that never arrived otherwise.
  std::vector<std::uint64_t> missing;
  std::size_t j = 0;
  for (std::uint64_t s = 1; s <= total; ++s) {
    if (j < f.got.size() && f.got[j] == s) {
      ++j;
    } else {
      missing.push_back(s);
    }
  }
  CHECK(missing.size() == c.lost);
  for (std::uint64_t s : missing) {
    CHECK(std::find(lost_expected.begin(), lost_expected.end(), s) != lost_expected.end());
  }
  if (history >= 4096) CHECK(c.lost == 0);  // a long history loses nothing
  if (history == 64) CHECK(c.lost > 0);     // a short one forgets some holes before they are read
  CHECK(c.recovered > 0);
  CHECK(c.reordered > 0);
  CHECK(c.duplicates > 0);
}

// Two UD lines as FailoverSubscriber drives them: each line's tracker is fed by its own lossy
// network (10% and 5%, independent; line B's copies arrive `skew` steps after line A's), both
// deliver into one arbiter, and each step both lines are covered below what it delivered. A line
// reads its first hole back (at once, from a history that forgets nothing) once that hole has
// been open its delay, as rdma.recovery_delay does: line A's longer than the skew, B's twice A's.
// Then every READ of line A starts at a tick lost on both lines, line B reads nothing, and nothing
// is lost. A read takes one run of missing ticks: where the tick after one lost on both lines was
// lost on line A only, and line B holds it behind the same hole, that one is read too (about the
// 10% line A loses: bounded here by a quarter).
TEST_CASE("twoLinesReadBackOnlyWhatBothLinesLost") {
  std::mt19937_64 rng(GENERATE(1, 2, 3));
  std::uniform_real_distribution<double> u(0, 1);
  const std::uint64_t total = 100000;
  const std::uint64_t skew = 3;
  const std::uint64_t delay[2] = {8, 16};
  const double loss[2] = {0.10, 0.05};
  std::vector<bool> lost[2] = {std::vector<bool>(total + 1), std::vector<bool>(total + 1)};
  std::uint64_t both = 0;
  for (std::uint64_t s = 1; s <= total; ++s) {
    lost[0][s] = u(rng) < loss[0];
    lost[1][s] = u(rng) < loss[1];
    both += lost[0][s] && lost[1][s] ? 1 : 0;
  }
  struct Line {
    Fixture f{4096};
    std::uint64_t hole_lo = 0, hole_since = 0, reads = 0, reads_not_both_lost = 0;
  } lines[2];
  detail::LineArbiter arb(4096);
  std::vector<std::uint64_t> out;
  auto deliver = [&](const Tick& t) { out.push_back(t.seq); };
  std::uint64_t step = 0;
  for (; arb.next() <= total && step < 2 * total; ++step) {
    for (int i = 0; i < 2; ++i) {
      Line& l = lines[i];
      SequenceTracker& tr = l.f.tr;
      const std::uint64_t lag = i == 0 ? 0 : skew;
      if (step > lag && step - lag <= total) {
        const std::uint64_t s = step - lag;
        if (!tr.started()) tr.start(1);
        if (!lost[i][s]) l.f.datagram(s, 1);
      } else if (step > lag) {
        tr.observe(total + 1, total + 1);  // the publisher's heartbeat after its last tick
      }
      // What the line delivered (straight, or from its window) goes to the arbiter.
      for (const std::uint64_t s : l.f.got) arb.offer(i, tick(s), deliver);
      l.f.got.clear();
      l.f.drain();
      for (const std::uint64_t s : l.f.got) arb.offer(i, tick(s), deliver);
      l.f.got.clear();
      const Hole h = tr.first_hole(64);
      if (h.empty()) continue;
      if (h.lo != l.hole_lo) {
        l.hole_lo = h.lo;
        l.hole_since = step;
      }
      if (step - l.hole_since < delay[i]) continue;
      ++l.reads;
      if (!(lost[0][h.lo] && lost[1][h.lo])) ++l.reads_not_both_lost;
      std::vector<Tick> history;
      for (std::uint64_t s = h.lo; s < h.hi; ++s) history.push_back(tick(s));
      tr.recovered(history.data(), h.lo, h.size());
    }
    const std::uint64_t held = arb.hole_end();
    for (Line& l : lines) l.f.tr.cover(arb.next(), held != 0 ? held : ~std::uint64_t{0});
  }
  REQUIRE(out == range(1, total + 1));
  CHECK(arb.gaps() == 0);
  CHECK(arb.skipped() == 0);
  CHECK(lines[0].f.tr.counters().lost == 0);
  CHECK(lines[1].f.tr.counters().lost == 0);
  CHECK(both > 0);
  CHECK(lines[0].reads > 0);
  CHECK(lines[0].reads <= both);
  CHECK(lines[0].reads_not_both_lost == 0);
  CHECK(lines[0].f.tr.counters().recovered >= both);
  CHECK(lines[0].f.tr.counters().recovered - both <= both / 4);
  CHECK(lines[1].reads == 0);
  CHECK(lines[1].f.tr.counters().recovered == 0);
  // What a line lost and the other brought was covered, not read.
  CHECK(lines[0].f.tr.counters().covered + lines[0].f.tr.counters().recovered >= 9000);
}
