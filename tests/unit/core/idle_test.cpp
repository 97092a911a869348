#include <catch2/catch.hpp>

#include <string>

#include "tickrail/error.hpp"
#include "tickrail/idle.hpp"

using namespace tickrail;

TEST_CASE("backoffSpinsThenYieldsThenParksWithDoublingSleep") {
  Backoff b(BackoffConfig{3, 2, 1'000, 8'000});
  REQUIRE(b.state() == Backoff::State::not_idle);
  for (int i = 0; i < 3; ++i) b.idle(0);
  REQUIRE(b.state() == Backoff::State::spinning);
  b.idle(0);  // 4th: spins exceed 3
  REQUIRE(b.state() == Backoff::State::yielding);
  b.idle(0);
  b.idle(0);
  REQUIRE(b.state() == Backoff::State::yielding);
  b.idle(0);  // yields exceed 2
  REQUIRE(b.state() == Backoff::State::parking);
  REQUIRE(b.park_ns() == 1'000);
  b.idle(0);
  REQUIRE(b.park_ns() == 2'000);
  b.idle(0);
  REQUIRE(b.park_ns() == 4'000);
  b.idle(0);
  REQUIRE(b.park_ns() == 8'000);
  b.idle(0);
  REQUIRE(b.park_ns() == 8'000);  // capped
  b.idle(1);                      // work resets
  REQUIRE(b.state() == Backoff::State::not_idle);
  REQUIRE(b.park_ns() == 1'000);
  b.idle(0);
  REQUIRE(b.state() == Backoff::State::spinning);
  b.reset();
  REQUIRE(b.state() == Backoff::State::not_idle);
}

TEST_CASE("backoffRejectsAnInvertedParkRange") {
  try {
    Backoff b(BackoffConfig{1, 1, 10'000, 1'000});
    FAIL("expected invalid_argument");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::invalid_argument);
    REQUIRE(std::string(e.what()).find("10000") != std::string::npos);
  }
  REQUIRE_THROWS_AS(Backoff(BackoffConfig{1, 1, 0, 1'000}), Error);
}

TEST_CASE("idleKindParsesKnownNamesAndRejectsOthers") {
  REQUIRE(parse_idle_kind("busy_spin") == IdleKind::busy_spin);
  REQUIRE(parse_idle_kind("busy-spin") == IdleKind::busy_spin);
  REQUIRE(parse_idle_kind("spin") == IdleKind::busy_spin);
  REQUIRE(parse_idle_kind("yield") == IdleKind::yield);
  REQUIRE(parse_idle_kind("backoff") == IdleKind::backoff);
  for (const IdleKind k : {IdleKind::busy_spin, IdleKind::yield, IdleKind::backoff}) {
    REQUIRE(parse_idle_kind(to_string(k)) == k);
  }
  for (const char* bad : {"", "Backoff", "sleep", "busy spin"}) {
    try {
      (void)parse_idle_kind(bad);
      FAIL("accepted '" << bad << "'");
    } catch (const Error& e) {
      REQUIRE(e.code() == Errc::config_error);
      REQUIRE(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
      REQUIRE(std::string(e.what()).find("busy_spin, yield, backoff") != std::string::npos);
    }
  }
}

TEST_CASE("idleStrategyDispatchesOnItsKind") {
  IdleStrategy spin;
  REQUIRE(spin.kind() == IdleKind::busy_spin);
  spin.idle(0);
  REQUIRE(spin.backoff().state() == Backoff::State::not_idle);  // spin never touches backoff

  IdleStrategy back(IdleKind::backoff, BackoffConfig{1, 1, 500, 1'000});
  back.idle(0);
  REQUIRE(back.backoff().state() == Backoff::State::spinning);
  back.idle(0);
  back.idle(0);
  back.idle(0);
  REQUIRE(back.backoff().state() == Backoff::State::parking);
  back.idle(3);
  REQUIRE(back.backoff().state() == Backoff::State::not_idle);
  back.idle(0);
  back.reset();
  REQUIRE(back.backoff().state() == Backoff::State::not_idle);

  IdleStrategy y(parse_idle_kind("yield"));
  REQUIRE(y.kind() == IdleKind::yield);
  y.idle(0);
  y.idle(1);
  REQUIRE(y.backoff().state() == Backoff::State::not_idle);
}
