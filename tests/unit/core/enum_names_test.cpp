#include "core/enum_names.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "tickrail/tools/stats_reader.hpp"
#include "tickrail/config.hpp"
#include "tickrail/error.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "tickrail/tick.hpp"
#include "transport/rdma/rc/rc_publisher.hpp"

using namespace tickrail;

namespace {
enum class Colour : std::uint8_t { red, green, blue };
constexpr detail::EnumName<Colour> kColours[] = {
    {Colour::red, "red"}, {Colour::green, "green"}, {Colour::blue, "blue"}};
static_assert(detail::names_every_value(kColours));
constexpr detail::EnumName<Colour> kGappy[] = {{Colour::red, "red"}, {Colour::blue, "blue"}};
static_assert(!detail::names_every_value(kGappy));
}  // namespace

TEST_CASE("aNameTableGivesNamesAndValuesBothWays") {
  STATIC_REQUIRE(std::string_view(detail::name_of(kColours, Colour::green)) == "green");
  CHECK(std::string(detail::name_of(kColours, static_cast<Colour>(7))) == "unknown");
  CHECK(std::string(detail::name_of(kGappy, Colour::green, "no colour")) == "no colour");
  CHECK(detail::value_of(kColours, "blue") == Colour::blue);
  CHECK_FALSE(detail::value_of(kColours, "Blue").has_value());
  CHECK_FALSE(detail::value_of(kColours, "").has_value());
}

TEST_CASE("configNamesParseBackToTheirValues") {
  for (const TransportKind t : {TransportKind::shm, TransportKind::rc, TransportKind::ud}) {
    CHECK(parse_transport(to_string(t), "transport") == t);
  }
  for (const SlowConsumerPolicy p :
       {SlowConsumerPolicy::block, SlowConsumerPolicy::drop, SlowConsumerPolicy::disconnect}) {
    CHECK(parse_policy(to_string(p), "policy") == p);
  }
  for (const RcPolling p : {RcPolling::memory, RcPolling::cq}) {
    CHECK(parse_rc_polling(to_string(p), "rdma.polling") == p);
  }
  CHECK_THROWS_AS(parse_transport("tcp", "transport"), Error);
  CHECK(std::string(to_string(static_cast<TransportKind>(9))) == "unknown");
  CHECK(std::string(to_string(Side::Sell)) == "sell");
  CHECK(std::string(to_string(static_cast<Side>('X'))) == "unknown");
}

TEST_CASE("userVisibleWordsStayTheSame") {
  CHECK(std::string(to_string(PublishStatus::back_pressured)) == "back-pressured");
  CHECK(std::string(to_string(SubscriberState::publisher_gone)) == "publisher gone");
  CHECK(std::string(to_string(stats::EndpointState::publisher_gone)) == "publisher gone");
  CHECK(std::string(to_string(stats::ProcessStatus::incompatible)) == "incompatible");
  CHECK(std::string(to_string(TickKind::Heartbeat)) == "heartbeat");
}

TEST_CASE("anRcLinkStateIsShownByItsOwnName") {
  using rdma::rc::LinkState;
  // One name, one meaning: no state prints another's word ("connecting" is a subscriber's).
  CHECK(std::string(to_string(LinkState::free)) == "free");
  CHECK(std::string(to_string(LinkState::claimed)) == "claimed");
  CHECK(std::string(to_string(LinkState::joining)) == "joining");
  CHECK(std::string(to_string(LinkState::reserved)) == "reserved");
  CHECK(std::string(to_string(LinkState::established)) == "established");
  CHECK(std::string(to_string(LinkState::active)) == "active");
  CHECK(std::string(to_string(LinkState::leaving)) == "leaving");
  CHECK(std::string(to_string(LinkState::retired)) == "retired");
  CHECK(std::string(to_string(static_cast<LinkState>(99))) == "unknown");
}
