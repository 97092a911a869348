#include <catch2/catch.hpp>

#include "core/silence.hpp"

using tickrail::SilenceWatch;

// One clock unit = 1 ms here: limit 1000, grace 300, looks every 10 unless a test stops.
namespace {
constexpr std::uint64_t kLimit = 1000, kGrace = 300, kStart = 5000;
}

TEST_CASE("aPeerHeardWithinTheLimitIsNotSilent") {
  SilenceWatch w(kLimit, kGrace, kStart);
  for (std::uint64_t t = kStart; t < kStart + 10'000; t += 10) {
    const std::uint64_t heard = t - t % 500;  // heard every 500
    CHECK_FALSE(w.silent(heard, t));
  }
}

TEST_CASE("aPeerThatStopsIsSilentJustAfterTheLimitWhileWeLook") {
  SilenceWatch w(kLimit, kGrace, kStart);
  std::uint64_t t = kStart;
  for (; t <= kStart + kLimit; t += 10) REQUIRE_FALSE(w.silent(kStart, t));
  CHECK(w.silent(kStart, t));
  CHECK(w.silent(kStart, t + 10'000));
  // Heard again: not silent any more.
  CHECK_FALSE(w.silent(t + 10'005, t + 10'010));
}

TEST_CASE("afterAStopLongerThanTheLimitThePeerGetsTheGraceOnce") {
  SilenceWatch w(kLimit, kGrace, kStart);
  REQUIRE_FALSE(w.silent(kStart, kStart + 10));
  // We (and perhaps the whole host) were stopped for 5000: the first look back is not a verdict.
  const std::uint64_t back = kStart + 5000;
  CHECK_FALSE(w.silent(kStart, back));
  CHECK_FALSE(w.silent(kStart, back + kGrace));
  CHECK(w.silent(kStart, back + kGrace + 1));

  SECTION("heard within the grace: alive, and the next stop gets a grace again") {
    SilenceWatch v(kLimit, kGrace, kStart);
    CHECK_FALSE(v.silent(kStart, back));
    CHECK_FALSE(v.silent(back + 100, back + 110));
    const std::uint64_t back2 = back + 110 + 4000;
    CHECK_FALSE(v.silent(back + 100, back2));
    CHECK(v.silent(back + 100, back2 + kGrace + 1));
  }
}

TEST_CASE("anAppThatLooksLessOftenThanTheLimitLearnsOfSilenceOnItsSecondLook") {
  SilenceWatch w(kLimit, kGrace, kStart);
  CHECK_FALSE(w.silent(kStart, kStart + 5000));   // the grace: it may have been us
  CHECK(w.silent(kStart, kStart + 10'000));       // silent still: now it is the peer
}

TEST_CASE("theGraceNeverExceedsTheLimitAndAClockGoingBackIsNoStop") {
  SilenceWatch w(kLimit, 1'000'000, kStart);  // a peer's absurd heartbeat interval
  CHECK_FALSE(w.silent(kStart, kStart + 5000));
  CHECK_FALSE(w.silent(kStart, kStart + 5000 + kLimit));
  CHECK(w.silent(kStart, kStart + 5000 + kLimit + 1));

  SilenceWatch b(kLimit, kGrace, kStart);
  CHECK_FALSE(b.silent(kStart, kStart - 100));  // earlier than the last look: ignored
  CHECK_FALSE(b.silent(kStart, kStart + 500));
  CHECK(b.silent(kStart, kStart + kLimit + 1));
}

TEST_CASE("aStopSoonAfterAGraceStillGetsAGraceOnceWeLookedAsUsual") {
  // The first look comes long after the start (the app polled, did not ask): that takes the
  // grace. Ordinary looks follow, the peer not heard but within the limit; then a real stop.
  SilenceWatch w(kLimit, kGrace, kStart);
  const std::uint64_t first = kStart + 60'000;
  CHECK_FALSE(w.silent(first - 20, first));
  CHECK_FALSE(w.silent(first - 20, first + 10));
  CHECK_FALSE(w.silent(first - 20, first + 20));
  const std::uint64_t back = first + 20 + 2000;
  CHECK_FALSE(w.silent(first - 20, back));
  CHECK(w.silent(first - 20, back + kGrace + 1));
}

TEST_CASE("aWordThatChangesIsAPeerHeardWhateverItsValue") {
  SilenceWatch w(kLimit, kGrace, kStart, 7);
  CHECK_FALSE(w.silent_word(7, kStart + 500));
  CHECK_FALSE(w.silent_word(3, kStart + 900));        // changed (even backwards): heard at 900
  CHECK_FALSE(w.silent_word(3, kStart + 1800));
  CHECK(w.silent_word(3, kStart + 1901));
  CHECK_FALSE(w.silent_word(~0ULL, kStart + 1910));   // a garbage value is only a change
}
