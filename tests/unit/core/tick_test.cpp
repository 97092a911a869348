#include <catch2/catch.hpp>

#include <cstring>

#include "tickrail/error.hpp"
#include "tickrail/tick.hpp"

using namespace tickrail;

TEST_CASE("tickIsOneCacheLineWithCommitWordLast") {
  STATIC_REQUIRE(sizeof(Tick) == 64);
  STATIC_REQUIRE(alignof(Tick) == 64);
  STATIC_REQUIRE(offsetof(Tick, seq) + sizeof(Tick::seq) == sizeof(Tick));
  Tick ticks[2]{};
  REQUIRE(reinterpret_cast<std::uintptr_t>(&ticks[1]) - reinterpret_cast<std::uintptr_t>(&ticks[0]) == 64);
}

TEST_CASE("tickRoundTripsThroughBytes") {
  Tick t{};
  t.seq = 42;
  t.price = 1234500;
  t.set_ask_price(1234600);
  t.kind = TickKind::Quote;
  t.side = Side::Buy;
  unsigned char bytes[64];
  std::memcpy(bytes, &t, 64);
  Tick u;
  std::memcpy(&u, bytes, 64);
  REQUIRE(u.seq == 42);
  REQUIRE(u.ask_price() == 1234600);
  REQUIRE(std::string(to_string(u.kind)) == "quote");
  REQUIRE(std::string(to_string(u.side)) == "buy");
}

TEST_CASE("errorsCarryCategoryAndContext") {
  Error e(Errc::bad_magic, "attach channel 'x'");
  REQUIRE(e.code() == Errc::bad_magic);
  REQUIRE(std::string(e.what()).find("attach channel 'x'") != std::string::npos);
  REQUIRE(std::string(e.what()).find("bad magic") != std::string::npos);
  REQUIRE_THROWS_AS(throw_errno(ENOENT, "open /x"), Error);
}
