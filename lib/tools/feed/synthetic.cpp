#include "tickrail/tools/feed/synthetic.hpp"

#include <algorithm>
#include <utility>

#include "tickrail/error.hpp"

namespace tickrail::feed {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) noexcept {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

__extension__ using u128 = unsigned __int128;  // GCC and Clang; __extension__ for -Wpedantic

constexpr std::int64_t kMinMidTicks = 20;  // the mid never walks below 20 ticks: prices stay > 0

}  // namespace

SyntheticFeed::SyntheticFeed(const SyntheticConfig& cfg) : cfg_(cfg) {
  auto invalid = [](const std::string& what) {
    throw Error(Errc::invalid_argument, "synthetic feed: " + what);
  };
  if (cfg.instruments == 0) invalid("instruments must be at least 1");
  if (cfg.depth == 0 || cfg.depth > cfg.max_orders) invalid("depth must be in 1..max_orders");
  if (cfg.tick_size <= 0) invalid("tick_size must be positive");
  if (cfg.start_price < kMinMidTicks * cfg.tick_size) {
    invalid("start_price must be at least 20 tick sizes");
  }
  if (cfg.burst_every != 0 && (cfg.burst_length == 0 || cfg.burst_length > cfg.burst_every)) {
    invalid("burst_length must be in 1..burst_every");
  }
  if (std::uint64_t{cfg.instruments} * cfg.max_orders > (std::uint64_t{1} << 28)) {
    invalid("instruments * max_orders is too large");
  }
  std::uint64_t x = cfg.seed;
  for (auto& w : s_) w = splitmix64(x);
  ins_.resize(cfg.instruments);
  for (std::uint32_t i = 0; i < cfg.instruments; ++i) {
    // Spread the instruments' prices, each on the tick grid.
    const std::int64_t p = cfg.start_price + cfg.start_price * (i % 8) / 8;
    ins_[i] = Instrument{p - p % cfg.tick_size, 0, 0};
  }
  orders_ = std::make_unique<Order[]>(std::size_t{cfg.instruments} * cfg.max_orders);
  ts_ = cfg.start_ts;
}

SyntheticFeed::~SyntheticFeed() = default;

std::string SyntheticFeed::name() const {
  return "synthetic feed (seed " + std::to_string(cfg_.seed) + ", " +
         std::to_string(cfg_.instruments) + " instruments)";
}

Progress SyntheticFeed::progress() const noexcept { return {produced_, cfg_.limit}; }

std::size_t SyntheticFeed::live_orders() const noexcept {
  std::size_t n = 0;
  for (const auto& in : ins_) n += in.live;
  return n;
}

std::uint64_t SyntheticFeed::rand() noexcept {
  const std::uint64_t r = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return r;
}

std::uint64_t SyntheticFeed::below(std::uint64_t n) noexcept {
  // Lemire's multiply-shift: no division, deterministic, bias below 2^-32 for our small n.
  return static_cast<std::uint64_t>((static_cast<u128>(rand()) * n) >> 64);
}

std::uint32_t SyntheticFeed::lot() noexcept {
  if (below(10) == 0) return static_cast<std::uint32_t>(1 + below(99));  // odd lot
  return static_cast<std::uint32_t>(100 * (1 + below(10)));
}

std::int64_t SyntheticFeed::quote_price(const Instrument& in, Side s) noexcept {
  // Most orders rest within a few ticks of the mid, some further out.
  std::int64_t k = 1 + static_cast<std::int64_t>(below(5));
  if (below(4) == 0) k += static_cast<std::int64_t>(below(20));
  return s == Side::Buy ? in.mid - k * cfg_.tick_size : in.mid + k * cfg_.tick_size;
}

void SyntheticFeed::remove(std::uint32_t i, std::uint32_t k) noexcept {
  Instrument& in = ins_[i];
  Order* o = orders_.get() + std::size_t{i} * cfg_.max_orders;
  o[k] = o[in.live - 1];
  --in.live;
}

void SyntheticFeed::move_mid(std::uint32_t i) noexcept {
  Instrument& in = ins_[i];
  const bool up = below(2) == 0;
  if (!up && in.mid <= kMinMidTicks * cfg_.tick_size) return;
  in.mid += up ? cfg_.tick_size : -cfg_.tick_size;
  // Orders the mid reached are executed (forced) before anything else: the book never crosses.
  Order* o = orders_.get() + std::size_t{i} * cfg_.max_orders;
  std::uint32_t end = in.live;
  for (std::uint32_t k = 0; k < end;) {
    const bool reached = o[k].side == Side::Buy ? o[k].price >= in.mid : o[k].price <= in.mid;
    if (reached) {
      std::swap(o[k], o[--end]);
    } else {
      ++k;
    }
  }
  in.forced = in.live - end;
}

void SyntheticFeed::emit_forced(std::uint32_t i, Tick& t) noexcept {
  Instrument& in = ins_[i];
  const Order& o = orders_[std::size_t{i} * cfg_.max_orders + in.live - 1];
  t.instrument = cfg_.first_instrument + i;
  t.kind = TickKind::Execute;
  t.flags = 'C' | ('Y' << 8);
  t.order_ref = o.ref;
  t.qty = o.qty;
  t.price = o.price;
  t.aux = next_match_++;
  --in.forced;
  --in.live;
  if (in.forced == 0) forced_ = kNone;
}

// The tick's time: a gap around gap_ns, or burst_gap_ns inside a burst on one instrument.
bool SyntheticFeed::advance_clock(std::uint64_t n) noexcept {
  bool burst = false;
  if (cfg_.burst_every != 0) {
    const std::uint64_t phase = n % cfg_.burst_every;
    if (phase == 0) burst_instrument_ = static_cast<std::uint32_t>(below(cfg_.instruments));
    burst = phase < cfg_.burst_length;
  }
  ts_ += burst ? cfg_.burst_gap_ns : cfg_.gap_ns / 2 + below(cfg_.gap_ns + 1);
  return burst;
}

void SyntheticFeed::next(Tick& t) noexcept {
  t = Tick{};
  const std::uint64_t n = produced_++;
  t.seq = n + 1;
  const bool burst = advance_clock(n);
  t.exch_ts = ts_;

  // Orders the mid reached execute first, one per tick, before the flow goes on.
  if (forced_ != kNone) {
    emit_forced(forced_, t);
    return;
  }
  const auto i = burst ? burst_instrument_ : static_cast<std::uint32_t>(below(cfg_.instruments));
  Instrument& in = ins_[i];
  t.instrument = cfg_.first_instrument + i;
  if (below(32) == 0) {
    move_mid(i);
    if (in.forced != 0) {
      forced_ = i;
      emit_forced(i, t);
      return;
    }
  }
  const Action a = pick_action(in);
  const auto k = static_cast<std::uint32_t>(in.live > 0 ? below(in.live) : 0);
  switch (a) {
    case Action::add: emit_add(i, t); return;
    case Action::del: emit_delete(i, k, t); return;
    case Action::exec: emit_execute(i, k, t); return;
    case Action::cancel: emit_cancel(i, k, t); return;
    case Action::replace: emit_replace(i, k, t); return;
    case Action::trade: emit_trade(in, t); return;
  }
}

// The event mix: adds while the book is thin, deletes when its slice is full.
SyntheticFeed::Action SyntheticFeed::pick_action(const Instrument& in) noexcept {
  if (in.live >= cfg_.max_orders) return Action::del;
  if (in.live == 0) return Action::add;
  const std::uint64_t w_add = in.live < cfg_.depth ? 55 : 35;
  std::uint64_t r = below(w_add + 60);
  if (r < w_add) return Action::add;
  if ((r -= w_add) < 28) return Action::del;
  if ((r -= 28) < 12) return Action::exec;
  if ((r -= 12) < 8) return Action::cancel;
  if ((r -= 8) < 8) return Action::replace;
  return Action::trade;
}

SyntheticFeed::Order* SyntheticFeed::orders_of(std::uint32_t i) noexcept {
  return orders_.get() + std::size_t{i} * cfg_.max_orders;
}

void SyntheticFeed::emit_add(std::uint32_t i, Tick& t) noexcept {
  Instrument& in = ins_[i];
  const Side s = below(2) == 0 ? Side::Buy : Side::Sell;
  Order& o = orders_of(i)[in.live++];
  o = Order{next_ref_++, quote_price(in, s), lot(), s};
  t.kind = TickKind::Add;
  t.flags = 'A';
  t.order_ref = o.ref;
  t.side = s;
  t.price = o.price;
  t.qty = o.qty;
}

void SyntheticFeed::emit_delete(std::uint32_t i, std::uint32_t k, Tick& t) noexcept {
  t.kind = TickKind::Delete;
  t.flags = 'D';
  t.order_ref = orders_of(i)[k].ref;
  remove(i, k);
}

// Executions hit the best of a few sampled orders: they happen near the top of the book.
void SyntheticFeed::emit_execute(std::uint32_t i, std::uint32_t k, Tick& t) noexcept {
  const Instrument& in = ins_[i];
  Order* const o = orders_of(i);
  std::uint32_t best = k;
  for (int c = 0; c < 2; ++c) {
    const auto j = static_cast<std::uint32_t>(below(in.live));
    const auto dist = [&](std::uint32_t q) {
      return o[q].side == Side::Buy ? in.mid - o[q].price : o[q].price - in.mid;
    };
    if (dist(j) < dist(best)) best = j;
  }
  Order& e = o[best];
  const bool full = e.qty == 1 || below(2) == 0;
  const std::uint32_t q = full ? e.qty : static_cast<std::uint32_t>(1 + below(e.qty - 1));
  t.kind = TickKind::Execute;
  t.flags = 'C' | ('Y' << 8);
  t.order_ref = e.ref;
  t.qty = q;
  t.price = e.price;
  t.aux = next_match_++;
  if (full) {
    remove(i, best);
  } else {
    e.qty -= q;
  }
}

// Part of the order's shares; an order of one share is deleted instead.
void SyntheticFeed::emit_cancel(std::uint32_t i, std::uint32_t k, Tick& t) noexcept {
  Order& o = orders_of(i)[k];
  if (o.qty <= 1) {
    emit_delete(i, k, t);
    return;
  }
  const auto q = static_cast<std::uint32_t>(1 + below(o.qty - 1));
  t.kind = TickKind::Cancel;
  t.flags = 'X';
  t.order_ref = o.ref;
  t.qty = q;
  o.qty -= q;
}

void SyntheticFeed::emit_replace(std::uint32_t i, std::uint32_t k, Tick& t) noexcept {
  Order& r = orders_of(i)[k];
  t.kind = TickKind::Modify;
  t.flags = 'U';
  t.order_ref = r.ref;
  r.ref = next_ref_++;
  r.price = quote_price(ins_[i], r.side);
  r.qty = lot();
  t.aux = r.ref;
  t.price = r.price;
  t.qty = r.qty;
}

void SyntheticFeed::emit_trade(const Instrument& in, Tick& t) noexcept {
  t.kind = TickKind::Trade;
  t.flags = 'P';
  t.side = Side::Buy;  // as ITCH 5.0 sends it
  t.price = in.mid;
  t.qty = lot();
  t.aux = next_match_++;
}

std::size_t SyntheticFeed::read(std::span<Tick> out) {
  std::size_t n = out.size();
  if (cfg_.limit != 0) n = static_cast<std::size_t>(std::min<std::uint64_t>(n, cfg_.limit - produced_));
  for (std::size_t k = 0; k < n; ++k) next(out[k]);
  return n;
}

}  // namespace tickrail::feed
