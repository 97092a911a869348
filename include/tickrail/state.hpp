// The market's state as a publisher keeps it: which ticks its last-value table holds, and how a
// subscriber tells ticks from the table apart from live ones (docs/state.md).
#pragma once

#include <cstdint>

#include "tickrail/tick.hpp"

namespace tickrail {

// The classes of the last-value table: per instrument, the latest tick of each.
enum class StateClass : std::uint8_t { quote = 0, trade = 1, status = 2 };
inline constexpr unsigned kStateClasses = 3;

// The class a tick of kind `k` updates; -1: none (order-level ticks, heartbeats).
[[nodiscard]] constexpr int state_class_of(TickKind k) noexcept {
  switch (k) {
    case TickKind::Quote: return static_cast<int>(StateClass::quote);
    case TickKind::Trade:
    case TickKind::Execute: return static_cast<int>(StateClass::trade);
    case TickKind::Status: return static_cast<int>(StateClass::status);
    default: return -1;
  }
}

// Bits of Tick::flags set on ticks a subscriber delivers from the table instead of the live
// stream. They are tickrail's: publishers leave bits 8-11 of Tick::flags clear.
inline constexpr std::uint16_t kTickFromTable = 0x0100;  // an entry of the table, not a live tick
inline constexpr std::uint16_t kTickLastOfTable = 0x0200;  // the last entry of this delivery
inline constexpr std::uint16_t kTickConflated = 0x0400;  // delivered because the subscriber fell behind
inline constexpr std::uint16_t kTickReservedFlags = 0x0f00;

}  // namespace tickrail
