// Tick: the fixed 64-byte unit every transport carries.
//
// One tick is one cache line and one ring slot. Its sequence number sits in the LAST eight bytes
// because it is the commit word: a writer (CPU store or NIC placing an RDMA WRITE in address
// order) writes it last, a reader reads it first and again after copying the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include "tickrail/export.hpp"

namespace tickrail {

inline constexpr std::size_t kCacheLine = 64;

enum class TickKind : std::uint8_t {
  None = 0,
  Add = 1,      // new order: order_ref, side, price, qty
  Modify = 2,   // order replaced: order_ref = old ref, aux = new ref, price/qty = new
  Cancel = 3,   // partial cancel: order_ref, qty = cancelled shares
  Delete = 4,   // order removed: order_ref
  Execute = 5,  // order executed: order_ref, qty, aux = match number, price if known (else 0)
  Trade = 6,    // non-displayed trade: price, qty, side, aux = match number
  Quote = 7,    // top of book: price/qty = best bid, ask_price()/aux_qty = best ask
  Status = 8,   // session or instrument status: flags low byte = source message type
  Heartbeat = 9,
};

enum class Side : std::uint8_t { None = 0, Buy = 'B', Sell = 'S' };

// Prices are fixed-point integers: 4 decimal places, as in NASDAQ ITCH 5.0.
inline constexpr std::int64_t kPriceScale = 10'000;

struct alignas(kCacheLine) Tick {
  std::uint64_t send_ts;     // publisher send time, in Clock cycles (see clock.hpp)
  std::uint64_t exch_ts;     // exchange timestamp, ns (ITCH: since midnight)
  std::uint64_t order_ref;   // exchange order reference
  std::int64_t price;        // fixed point, kPriceScale units
  std::uint64_t aux;         // kind-dependent: new ref, match number, or ask price (Quote)
  std::uint32_t qty;         // shares
  std::uint32_t aux_qty;     // Quote: ask size
  std::uint32_t instrument;  // instrument id (ITCH stock locate)
  TickKind kind;
  Side side;
  std::uint16_t flags;       // low byte: source message type (e.g. ITCH 'A')
  std::uint64_t seq;         // sequence number, starts at 1; 0 means "slot never written"

  [[nodiscard]] constexpr std::int64_t ask_price() const noexcept {
    return static_cast<std::int64_t>(aux);
  }
  constexpr void set_ask_price(std::int64_t p) noexcept { aux = static_cast<std::uint64_t>(p); }
};

// The bit of Tick::flags set on ticks a subscriber delivers from the last-value table (a snapshot,
// or a conflation: Subscriber::in_snapshot() says which) instead of the live stream. It is
// tickrail's: the feed readers never set it (ITCH puts a printable character in the high byte,
// the CSV reader refuses flags above 0x7fff), and a subscriber clears it on every live tick,
// whatever its publisher wrote.
inline constexpr std::uint16_t kTickFromTable = 0x8000;

static_assert(sizeof(Tick) == 64, "a tick is one cache line");
static_assert(alignof(Tick) == 64, "a tick is cache-line aligned");
static_assert(std::is_trivially_copyable_v<Tick>, "ticks are copied as bytes and by the NIC");
static_assert(std::is_standard_layout_v<Tick>);
static_assert(offsetof(Tick, send_ts) == 0);
static_assert(offsetof(Tick, exch_ts) == 8);
static_assert(offsetof(Tick, order_ref) == 16);
static_assert(offsetof(Tick, price) == 24);
static_assert(offsetof(Tick, aux) == 32);
static_assert(offsetof(Tick, qty) == 40);
static_assert(offsetof(Tick, aux_qty) == 44);
static_assert(offsetof(Tick, instrument) == 48);
static_assert(offsetof(Tick, kind) == 52);
static_assert(offsetof(Tick, side) == 53);
static_assert(offsetof(Tick, flags) == 54);
static_assert(offsetof(Tick, seq) == 56, "the commit word is the last word of the slot");

[[nodiscard]] TICKRAIL_API const char* to_string(TickKind k) noexcept;
[[nodiscard]] TICKRAIL_API const char* to_string(Side s) noexcept;

}  // namespace tickrail
