// The RC wire protocol without a device: private data layouts, encoding, and the publisher's
// verdict on every kind of bad request.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "transport/rdma/rc/protocol.hpp"

using namespace tickrail;
using namespace tickrail::rdma::rc;

namespace {

SubscriberConfig sub_config() {
  SubscriberConfig c;
  c.transport = TransportKind::rc;
  c.channel = "prices";
  c.policy = SlowConsumerPolicy::disconnect;
  c.disconnect_after = std::chrono::milliseconds(250);
  c.rdma.token = "s3cret";
  return c;
}

ServeTerms terms(const std::string& token = "s3cret") {
  return ServeTerms{"prices", channel_hash("prices"), token_hash(token), 1024, {}};
}

ConnectRequest good_request() {
  return make_request(sub_config(), WriteMode::memory, 512, 0x7f0000001000ULL, 0x1234);
}

std::vector<std::byte> bytes_of(const auto& v) {
  std::vector<std::byte> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

RejectReason verdict(const ConnectRequest& r, const ServeTerms& t = terms()) {
  const auto v = judge(r, t);
  REQUIRE(v.has_value());
  return static_cast<RejectReason>(v->reason);
}

}  // namespace

TEST_CASE("privateDataFitsWhatRdmaCmCarries") {
  STATIC_REQUIRE(sizeof(ConnectRequest) <= 56);
  STATIC_REQUIRE(sizeof(AcceptReply) <= 196);
  STATIC_REQUIRE(sizeof(RejectNote) <= 148);
  STATIC_REQUIRE(kControlBytes % 64 == 0);
  STATIC_REQUIRE(region_bytes(4) == kControlBytes + 4 * 64);
}

TEST_CASE("requestCarriesWhatThePublisherNeeds") {
  const ConnectRequest r = good_request();
  CHECK(r.magic == kMagic);
  CHECK(r.version == kVersion);
  CHECK(r.policy == static_cast<std::uint8_t>(SlowConsumerPolicy::disconnect));
  CHECK(r.mode == static_cast<std::uint8_t>(WriteMode::memory));
  CHECK(r.capacity_log2 == 9);
  CHECK(r.rkey == 0x1234);
  CHECK(r.region_addr == 0x7f0000001000ULL);
  CHECK(r.disconnect_after_ms == 250);
  CHECK(r.channel_hash == channel_hash("prices"));
  CHECK(r.token_hash == token_hash("s3cret"));

  const auto decoded = decode_request(bytes_of(r));
  REQUIRE(decoded);
  CHECK(std::memcmp(&*decoded, &r, sizeof r) == 0);
  CHECK_FALSE(judge(r, terms()).has_value());
}

TEST_CASE("hashesSeparateNamesAndDomains") {
  CHECK(channel_hash("prices") == channel_hash("prices"));
  CHECK(channel_hash("prices") != channel_hash("prices2"));
  CHECK(channel_hash("ab") != token_hash("ab"));
  CHECK(token_hash("") == 0);
  CHECK(token_hash("x") != 0);
}

TEST_CASE("decodingRefusesShortOrForeignData") {
  const ConnectRequest r = good_request();
  auto b = bytes_of(r);
  CHECK_FALSE(decode_request(std::span(b).first(sizeof r - 1)));
  b[0] = std::byte{0};
  CHECK_FALSE(decode_request(b));
  CHECK_FALSE(decode_accept({}));
  // Transports pad private data: trailing bytes are ignored.
  auto padded = bytes_of(r);
  padded.resize(56, std::byte{0xee});
  CHECK(decode_request(padded));
}

TEST_CASE("publisherRejectsEachKindOfBadRequestWithItsReason") {
  ConnectRequest r = good_request();
  r.version = kVersion + 1;
  CHECK(verdict(r) == RejectReason::version_mismatch);
  CHECK(reject_errc(RejectReason::version_mismatch) == Errc::version_mismatch);

  r = good_request();
  r.channel_hash = channel_hash("trades");
  CHECK(verdict(r) == RejectReason::wrong_channel);
  CHECK_THAT(std::string(judge(r, terms())->text), Catch::Contains("'prices'"));

  r = good_request();
  r.token_hash = token_hash("guess");
  CHECK(verdict(r) == RejectReason::bad_token);
  r.token_hash = 0;
  CHECK_THAT(std::string(judge(r, terms())->text), Catch::Contains("required"));
  // A publisher without a token takes any.
  CHECK_FALSE(judge(r, terms("")).has_value());

  for (const std::uint8_t log2 : {std::uint8_t{0}, std::uint8_t{31}, std::uint8_t{40}}) {
    r = good_request();
    r.capacity_log2 = log2;
    CHECK(verdict(r) == RejectReason::bad_geometry);
    CHECK_THAT(std::string(judge(r, terms())->text), Catch::Contains("absurd"));
  }
  r = good_request();
  r.capacity_log2 = 11;  // 2048 > 1024
  CHECK(verdict(r) == RejectReason::bad_geometry);
  CHECK(judge(r, terms())->detail == 1024);
  CHECK_THAT(std::string(judge(r, terms())->text), Catch::Contains("ring_capacity 1024"));

  r = good_request();
  r.region_addr = ~std::uint64_t{0} - 64 * 100 + 1;
  CHECK(verdict(r) == RejectReason::bad_geometry);
  r.region_addr = 0x1001;
  CHECK(verdict(r) == RejectReason::bad_geometry);

  r = good_request();
  r.policy = 7;
  CHECK(verdict(r) == RejectReason::malformed);
  r = good_request();
  r.mode = 0;
  CHECK(verdict(r) == RejectReason::malformed);
}

TEST_CASE("rejectNoteTextIsBoundedAndTerminated") {
  const std::string long_text(500, 'x');
  const RejectNote n = make_reject(RejectReason::resources, 7, long_text);
  CHECK(std::strlen(n.text) == sizeof n.text - 1);
  auto b = bytes_of(n);
  b[offsetof(RejectNote, text) + sizeof n.text - 1] = std::byte{'y'};  // no terminator sent
  const auto d = decode_reject(b);
  REQUIRE(d);
  CHECK(d->detail == 7);
  CHECK(static_cast<RejectReason>(d->reason) == RejectReason::resources);
  CHECK(std::strlen(d->text) == sizeof d->text - 1);
}

// A credit interval past the ring would leave a blocked publisher waiting for good.
TEST_CASE("creditIsReturnedAtLeastOncePerRing") {
  REQUIRE(credit_interval(0, 1024) == 256);
  REQUIRE(credit_interval(0, 2) == 1);
  REQUIRE(credit_interval(100, 1024) == 100);
  REQUIRE(credit_interval(1024, 1024) == 1024);
  REQUIRE(credit_interval(1'000'000, 1024) == 1024);
}

// The last-value table (protocol version 2): asked for in the request, refused by a publisher
// that keeps none, granted in the accept and checked by the subscriber before any READ.
TEST_CASE("aTableIsAskedForRefusedWithoutOneAndItsGrantChecked") {
  SubscriberConfig c = sub_config();
  CHECK(make_request(c, WriteMode::memory, 512, 0x7f0000001000ULL, 1).flags == 0);
  c.start = StartMode::snapshot;
  ConnectRequest r = make_request(c, WriteMode::memory, 512, 0x7f0000001000ULL, 1);
  CHECK(r.flags == kWantsTable);
  CHECK(verdict(r) == RejectReason::no_table);
  CHECK(reject_errc(RejectReason::no_table) == Errc::unsupported);
  CHECK_THAT(std::string(judge(r, terms())->text),
             Catch::Contains("start = snapshot") && Catch::Contains("'prices'") && Catch::Contains("[state]"));
  ServeTerms with_table = terms();
  with_table.table = {1000, 7};
  CHECK_FALSE(judge(r, with_table).has_value());

  c.start = StartMode::live;
  c.policy = SlowConsumerPolicy::conflate;
  r = make_request(c, WriteMode::memory, 512, 0x7f0000001000ULL, 1);
  CHECK(r.flags == kWantsTable);
  CHECK(r.policy == static_cast<std::uint8_t>(SlowConsumerPolicy::conflate));
  CHECK_THAT(std::string(judge(r, terms())->text), Catch::Contains("policy = conflate"));
  CHECK_FALSE(judge(r, with_table).has_value());
  r.flags = 0;  // conflate needs the table even from a request that does not say so
  CHECK(verdict(r) == RejectReason::no_table);
  r.flags = 0x82;
  CHECK(verdict(r, with_table) == RejectReason::malformed);

  AcceptReply a{};
  a.table_addr = 0x7f0000200000ULL;
  a.table_capacity = 1000;
  a.table_classes = 7;
  std::string why;
  const auto g = granted_table(a, why);
  REQUIRE(g);
  CHECK(g->entries() == 3000);
  CHECK(tickrail::rdma::table_region_bytes(*g) == 64 + 3000 * 64);
  auto refused = [&](const AcceptReply& bad, const char* text) {
    std::string w;
    CHECK_FALSE(granted_table(bad, w).has_value());
    CHECK_THAT(w, Catch::Contains(text));
  };
  AcceptReply bad = a;
  bad.table_capacity = 0;
  refused(bad, "0 instruments");
  bad.table_capacity = kMaxStateCapacity + 1;
  refused(bad, "instruments");
  bad = a;
  bad.table_classes = 8;
  refused(bad, "classes 8");
  bad.table_classes = 0;
  refused(bad, "classes 0");
  bad = a;
  bad.table_addr = 0;
  refused(bad, "not a usable");
  bad.table_addr = 0x7f0000200008ULL;
  refused(bad, "not a usable");
  bad.table_addr = (~std::uint64_t{0} - 64 * 100) & ~std::uint64_t{63};  // the range would wrap
  refused(bad, "not a usable");
}
