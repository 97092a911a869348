#include "tickrail/tick.hpp"

#include "core/enum_names.hpp"

namespace tickrail {

namespace {
constexpr detail::EnumName<TickKind> kKindNames[] = {
    {TickKind::None, "none"},       {TickKind::Add, "add"},         {TickKind::Modify, "modify"},
    {TickKind::Cancel, "cancel"},   {TickKind::Delete, "delete"},   {TickKind::Execute, "execute"},
    {TickKind::Trade, "trade"},     {TickKind::Quote, "quote"},     {TickKind::Status, "status"},
    {TickKind::Heartbeat, "heartbeat"}};
constexpr detail::EnumName<Side> kSideNames[] = {
    {Side::None, "none"}, {Side::Buy, "buy"}, {Side::Sell, "sell"}};
}  // namespace

const char* to_string(TickKind k) noexcept { return detail::name_of(kKindNames, k); }
const char* to_string(Side s) noexcept { return detail::name_of(kSideNames, s); }

}  // namespace tickrail
