// SyntheticFeed: a seeded, deterministic stream of realistic-looking order flow, the feed used
// when no file is given.
//
// Per instrument, a mid price walks one tick_size at a time; orders are added on the right side
// of the mid (buys below, sells above, a few ticks away), then cancelled in part, replaced,
// executed or deleted, always referring to a live order, so an order book applied to the stream
// never meets an unknown reference and never crosses (when the mid moves onto resting orders,
// those are executed first). Order references are unique across instruments, as in ITCH; flags
// carry the ITCH message type each tick stands for ('A', 'C', 'X', 'D', 'U', 'P').
//
// Rate is not the generator's business (pacing is the publisher's), but timing is: exch_ts
// advances by about gap_ns per tick, and bursts, burst_length ticks every burst_every ticks on a
// single instrument, come burst_gap_ns apart, so pacing by feed time reproduces them.
//
// The same config gives the same ticks, on every platform (own PRNG, integer arithmetic only).
// All memory is allocated at construction; read() never allocates and never fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tickrail/tools/feed/tick_source.hpp"

namespace tickrail::feed {

struct SyntheticConfig {
  std::uint64_t seed = 1;
  std::uint32_t instruments = 8;
  std::uint32_t first_instrument = 1;      // instrument ids first_instrument, +1, ...
  std::uint64_t limit = 0;                 // ticks to produce; 0: endless
  std::int64_t start_price = 100 * kPriceScale;  // instrument i starts near start_price * (1 + i/8)
  std::int64_t tick_size = 100;            // $0.01
  std::uint32_t depth = 64;                // live orders per instrument it aims at
  std::uint32_t max_orders = 1024;         // live orders per instrument at most
  std::uint64_t start_ts = 34'200'000'000'000ull;  // 09:30:00, ns since midnight
  std::uint64_t gap_ns = 1'000;            // mean exch_ts step outside bursts
  std::uint64_t burst_every = 0;           // ticks from one burst start to the next; 0: none
  std::uint32_t burst_length = 0;          // ticks per burst
  std::uint64_t burst_gap_ns = 10;         // exch_ts step inside a burst
};

class SyntheticFeed final : public TickSource {
 public:
  // Throws Error(invalid_argument) for a config that cannot work (no instruments, depth 0 or
  // above max_orders, burst_length > burst_every, non-positive prices).
  explicit SyntheticFeed(const SyntheticConfig& cfg);
  ~SyntheticFeed() override;

  [[nodiscard]] std::size_t read(std::span<Tick> out) override;
  [[nodiscard]] bool at_end() const noexcept override {
    return cfg_.limit != 0 && produced_ >= cfg_.limit;
  }
  // Ticks produced out of limit (total 0 when endless).
  [[nodiscard]] Progress progress() const noexcept override;
  [[nodiscard]] const ErrorCounts& errors() const noexcept override { return errors_; }
  [[nodiscard]] const std::string& first_error() const noexcept override { return none_; }
  [[nodiscard]] std::string name() const override;

  [[nodiscard]] std::uint64_t produced() const noexcept { return produced_; }
  [[nodiscard]] std::size_t live_orders() const noexcept;
  [[nodiscard]] const SyntheticConfig& config() const noexcept { return cfg_; }

 private:
  struct Order {
    std::uint64_t ref;
    std::int64_t price;
    std::uint32_t qty;
    Side side;
  };
  struct Instrument {
    std::int64_t mid;
    std::uint32_t live;       // orders [0, live) of its slice of orders_
    std::uint32_t forced;     // orders at [live - forced, live) must execute before the mid moves
  };

  enum class Action : std::uint8_t { add, del, exec, cancel, replace, trade };

  void next(Tick& t) noexcept;
  bool advance_clock(std::uint64_t n) noexcept;  // true inside a burst
  Action pick_action(const Instrument& in) noexcept;
  Order* orders_of(std::uint32_t i) noexcept;  // instrument i's slice
  void emit_forced(std::uint32_t i, Tick& t) noexcept;
  void emit_add(std::uint32_t i, Tick& t) noexcept;
  void emit_delete(std::uint32_t i, std::uint32_t k, Tick& t) noexcept;
  void emit_execute(std::uint32_t i, std::uint32_t k, Tick& t) noexcept;
  void emit_cancel(std::uint32_t i, std::uint32_t k, Tick& t) noexcept;
  void emit_replace(std::uint32_t i, std::uint32_t k, Tick& t) noexcept;
  void emit_trade(const Instrument& in, Tick& t) noexcept;
  std::uint64_t rand() noexcept;
  std::uint64_t below(std::uint64_t n) noexcept;  // uniform in [0, n)
  void move_mid(std::uint32_t i) noexcept;
  void remove(std::uint32_t i, std::uint32_t k) noexcept;
  std::int64_t quote_price(const Instrument& in, Side s) noexcept;
  std::uint32_t lot() noexcept;

  SyntheticConfig cfg_;
  std::uint64_t s_[4]{};  // xoshiro256** state
  std::vector<Instrument> ins_;
  std::unique_ptr<Order[]> orders_;  // instrument i owns [i * max_orders, (i + 1) * max_orders)
  std::uint64_t produced_ = 0;
  std::uint64_t next_ref_ = 1;
  std::uint64_t next_match_ = 1;
  std::uint64_t ts_ = 0;
  std::uint32_t burst_instrument_ = 0;
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  std::uint32_t forced_ = kNone;  // the instrument with forced executions pending (one at most)
  ErrorCounts errors_;
  std::string none_;
};

}  // namespace tickrail::feed
