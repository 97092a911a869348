// The UD wire format: sizes against the MTU, and what validate() accepts and refuses.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "tickrail/error.hpp"
#include "transport/rdma/ud/datagram.hpp"

using namespace tickrail;
using namespace tickrail::rdma::ud;

namespace {

std::vector<std::byte> make(DatagramKind kind, std::uint64_t first, std::uint32_t count) {
  std::vector<std::byte> d(datagram_bytes(count));
  DatagramHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.kind = kind;
  h.session = 0x1234;
  h.first_seq = first;
  h.count = count;
  std::memcpy(d.data(), &h, sizeof h);
  for (std::uint32_t i = 0; i < count; ++i) {
    Tick t{};
    t.seq = first + i;
    t.price = static_cast<std::int64_t>(first + i) * 100;
    std::memcpy(d.data() + kHeaderBytes + i * kTickBytes, &t, sizeof t);
  }
  return d;
}

template <class F>
std::vector<std::byte> patched(std::vector<std::byte> d, F&& f) {
  DatagramHeader h = read_header(d.data());
  f(h);
  std::memcpy(d.data(), &h, sizeof h);
  return d;
}

}  // namespace

TEST_CASE("ticksPerDatagramFollowThePathMtu") {
  CHECK(ticks_per_mtu(1024) == 15);  // rxe's default active MTU
  CHECK(ticks_per_mtu(4096) == 63);  // RoCE fabrics
  CHECK(ticks_per_mtu(256) == 3);
  CHECK(ticks_per_mtu(128) == 1);
  CHECK(ticks_per_mtu(127) == 0);
  CHECK(datagram_bytes(1) == 128);
  CHECK(datagram_bytes(15) == 1024);
}

TEST_CASE("mtuTooSmallForOneTickIsAClearError") {
  try {
    (void)checked_ticks_per_datagram(1, 100, "device rxe0 port 1");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("path MTU 100 bytes cannot carry one tick"));
    CHECK_THAT(what, Catch::Contains("rxe0"));
  }
}

TEST_CASE("moreTicksPerDatagramThanTheMtuAllowsIsAClearError") {
  CHECK(checked_ticks_per_datagram(15, 1024, "d") == 15);
  try {
    (void)checked_ticks_per_datagram(16, 1024, "device rxe0 port 1");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
    CHECK_THAT(std::string(e.what()), Catch::Contains("max_ticks_per_datagram = 16") &&
                                          Catch::Contains("1088 bytes") &&
                                          Catch::Contains("1..15 ticks fit"));
  }
  CHECK_THROWS_AS(checked_ticks_per_datagram(0, 1024, "d"), Error);
}

TEST_CASE("wellFormedDatagramsAreAccepted") {
  auto one = make(DatagramKind::data, 7, 1);
  CHECK(validate(one.data(), one.size()) == Verdict::ok);
  auto full = make(DatagramKind::data, 1000, 15);
  CHECK(validate(full.data(), full.size()) == Verdict::ok);
  auto hb = make(DatagramKind::heartbeat, 1016, 0);
  CHECK(validate(hb.data(), hb.size()) == Verdict::ok);
  auto end = make(DatagramKind::end, 1016, 0);
  CHECK(validate(end.data(), end.size()) == Verdict::ok);
}

TEST_CASE("foreignDatagramsAreRecognised") {
  // rdma-core's mckey sends 100 bytes of whatever its buffer holds.
  std::vector<std::byte> mckey(100, std::byte{0});
  CHECK(validate(mckey.data(), mckey.size()) == Verdict::foreign);
  std::vector<std::byte> junk(100, std::byte{0x5a});
  CHECK(validate(junk.data(), junk.size()) == Verdict::foreign);
  auto d = make(DatagramKind::data, 1, 1);
  CHECK(validate(d.data(), kHeaderBytes - 1) == Verdict::foreign);  // shorter than a header
  CHECK(validate(d.data(), 0) == Verdict::foreign);
  auto other = patched(d, [](DatagramHeader& h) { h.magic = 0x12345678; });
  CHECK(validate(other.data(), other.size()) == Verdict::foreign);
}

TEST_CASE("malformedDatagramsAreRefused") {
  auto d = make(DatagramKind::data, 50, 3);
  SECTION("another version") {
    auto x = patched(d, [](DatagramHeader& h) { h.version = kVersion + 1; });
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
  SECTION("session 0") {
    auto x = patched(d, [](DatagramHeader& h) { h.session = 0; });
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
  SECTION("count larger than the bytes") {
    auto x = patched(d, [](DatagramHeader& h) { h.count = 4; });
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
  SECTION("count smaller than the bytes") {
    auto x = patched(d, [](DatagramHeader& h) { h.count = 2; });
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
  SECTION("truncated") { CHECK(validate(d.data(), d.size() - 1) == Verdict::malformed); }
  SECTION("unknown kind") {
    auto x = patched(d, [](DatagramHeader& h) { h.kind = static_cast<DatagramKind>(9); });
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
  SECTION("data without ticks") {
    auto x = make(DatagramKind::data, 50, 0);
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
  SECTION("sequence 0") {
    auto x = make(DatagramKind::heartbeat, 0, 0);
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
  SECTION("a tick whose sequence does not follow first_seq") {
    Tick t{};
    t.seq = 99;
    std::memcpy(d.data() + kHeaderBytes + kTickBytes, &t, sizeof t);
    CHECK(validate(d.data(), d.size()) == Verdict::malformed);
  }
  SECTION("a heartbeat carrying ticks") {
    auto x = patched(d, [](DatagramHeader& h) { h.kind = DatagramKind::heartbeat; });
    CHECK(validate(x.data(), x.size()) == Verdict::malformed);
  }
}

TEST_CASE("validationReadsNoFurtherThanTheLengthGiven") {
  // An unaligned copy at the very end of an allocation: sanitizers catch any overread.
  auto d = make(DatagramKind::data, 5, 2);
  std::vector<std::byte> odd(d.size() + 1);
  std::memcpy(odd.data() + 1, d.data(), d.size());
  CHECK(validate(odd.data() + 1, d.size()) == Verdict::ok);
}
