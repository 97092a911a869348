// The market's state as a publisher keeps it: which ticks its last-value table holds, and how a
// subscriber tells ticks from the table apart from live ones (docs/state.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// kTickFromTable (tick.hpp): the bit of Tick::flags set on ticks a subscriber delivers from the
// table (a snapshot, or a conflation: Subscriber::in_snapshot() says which).

// An app's view of the market: per instrument and class, the latest tick it was given (live, or
// from the table). Allocates at construction only; apply() and get() are poll-path safe.
class MarketView {
 public:
  explicit MarketView(std::uint32_t capacity)
      : capacity_(capacity), entries_(std::size_t{capacity} * kStateClasses) {}

  // Keeps `t` if it updates a class and is not older than what the view holds; false when its
  // instrument is beyond the capacity (counted in beyond()).
  bool apply(const Tick& t) noexcept {
    const int c = state_class_of(t.kind);
    if (c < 0) return true;
    if (t.instrument >= capacity_) {
      ++beyond_;
      return false;
    }
    Tick& e = entries_[std::size_t{t.instrument} * kStateClasses + static_cast<unsigned>(c)];
    if (t.seq >= e.seq) e = t;
    return true;
  }
  // The latest tick of `instrument` in `cls`, or nullptr.
  [[nodiscard]] const Tick* get(std::uint32_t instrument, StateClass cls) const noexcept {
    if (instrument >= capacity_) return nullptr;
    const Tick& e = entries_[std::size_t{instrument} * kStateClasses + static_cast<unsigned>(cls)];
    return e.seq != 0 ? &e : nullptr;
  }
  [[nodiscard]] std::uint32_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::uint64_t beyond() const noexcept { return beyond_; }

 private:
  std::uint32_t capacity_;
  std::vector<Tick> entries_;  // seq 0: none
  std::uint64_t beyond_ = 0;
};

[[nodiscard]] constexpr const char* to_string(StateClass c) noexcept {
  switch (c) {
    case StateClass::quote: return "quote";
    case StateClass::trade: return "trade";
    case StateClass::status: return "status";
  }
  return "?";
}

}  // namespace tickrail
