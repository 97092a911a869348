#include "tickrail/tools/feed/order_book.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include "tickrail/error.hpp"

namespace tickrail::feed {

// One instrument: per side, levels sorted by key ascending, so the best is last. The key is the
// price for bids and -price for asks: "higher key is better" on both sides.
struct OrderBook::Book {
  std::vector<Level> side[2];
  std::size_t live = 0;
};

namespace {

constexpr int side_index(Side s) noexcept { return s == Side::Buy ? 0 : 1; }
constexpr std::int64_t key_of(Side s, std::int64_t price) noexcept {
  return s == Side::Buy ? price : -price;
}

// Position of `key`'s level in `v`, or where it would go. Most activity is at the top of the
// book, the end of the vector: look at the last few levels before searching.
std::size_t level_pos(const std::vector<Level>& v, Side s, std::int64_t key) noexcept {
  const std::size_t n = v.size();
  constexpr std::size_t kScan = 4;
  for (std::size_t i = n; i > 0 && n - i < kScan; --i) {
    const std::int64_t k = key_of(s, v[i - 1].price);
    if (k == key) return i - 1;
    if (k < key) return i;
  }
  const auto it = std::lower_bound(v.begin(), v.end() - static_cast<long>(std::min(n, kScan)), key,
                                   [s](const Level& l, std::int64_t k) { return key_of(s, l.price) < k; });
  return static_cast<std::size_t>(it - v.begin());
}

Level best(const std::vector<Level>& v) noexcept { return v.empty() ? Level{} : v.back(); }

bool same(const Level& a, const Level& b) noexcept {
  return a.price == b.price && a.qty == b.qty && (a.orders == 0) == (b.orders == 0);
}

std::uint32_t saturate32(std::uint64_t v) noexcept {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, std::numeric_limits<std::uint32_t>::max()));
}

}  // namespace

OrderBook::OrderBook(const BookConfig& cfg) : cfg_(cfg) {
  if (cfg.max_instrument > (1u << 24)) {
    throw Error(Errc::invalid_argument, "order book: max_instrument above 2^24");
  }
  // Load factor at most 1/2: short probe sequences for linear probing.
  const std::size_t cap = std::bit_ceil(std::max<std::size_t>(cfg.expected_orders, 512) * 2);
  table_ = allocate(cap);
  mask_ = cap - 1;
  bits_ = std::countr_zero(cap);
  grow_at_ = cap / 2;
  books_.resize(std::size_t{cfg.max_instrument} + 1);
}

OrderBook::~OrderBook() = default;

void OrderBook::Unmap::operator()(Order* p) const noexcept { ::munmap(p, bytes); }

// The table is a private anonymous mapping with transparent huge pages asked for: lookups land
// anywhere in it, and 4 KiB pages would cost a TLB miss on most of them. It is touched here, at
// construction, so the data path takes no page faults.
OrderBook::Table OrderBook::allocate(std::size_t slots) {
  const std::size_t bytes = slots * sizeof(Order);
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw_errno(errno, "order book: mmap of " + std::to_string(bytes) + " bytes");
  ::madvise(m, bytes, MADV_HUGEPAGE);  // advisory: fine if the kernel says no
  std::memset(m, 0, bytes);
  return Table(static_cast<Order*>(m), Unmap{bytes});
}

// Exchanges hand out references in increasing order, and most activity is on recent orders: the
// low bits of the reference keep those in a few neighbouring cache lines (a multiplicative hash
// scatters them and costs a cache miss per lookup). Folding the higher bits in breaks up
// references that stride by a power of two.
std::size_t OrderBook::slot_of(std::uint64_t ref) const noexcept {
  return static_cast<std::size_t>(ref ^ (ref >> bits_) ^ (ref >> (2 * bits_))) & mask_;
}

OrderBook::Order* OrderBook::find(std::uint64_t ref) noexcept {
  if (ref == 0) return nullptr;
  for (std::size_t i = slot_of(ref);; i = (i + 1) & mask_) {
    Order& o = table_[i];
    if (o.ref == ref) return &o;
    if (o.ref == 0) return nullptr;
  }
}

OrderBook::Order* OrderBook::insert(std::uint64_t ref) {
  if (size_ + 1 > grow_at_) grow();
  for (std::size_t i = slot_of(ref);; i = (i + 1) & mask_) {
    Order& o = table_[i];
    if (o.ref == ref) return nullptr;
    if (o.ref == 0) {
      o.ref = ref;
      ++size_;
      return &o;
    }
  }
}

void OrderBook::erase(Order* o) noexcept {
  // Backward-shift deletion: no tombstones, probe sequences stay short forever.
  auto i = static_cast<std::size_t>(o - table_.get());
  for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    if (table_[j].ref == 0) break;
    const std::size_t home = slot_of(table_[j].ref);
    // Move j back into the hole at i if its home is not in (i, j] (cyclically).
    if (((j - home) & mask_) >= ((j - i) & mask_)) {
      table_[i] = table_[j];
      i = j;
    }
  }
  table_[i].ref = 0;
  --size_;
}

void OrderBook::grow() {
  const std::size_t old_cap = mask_ + 1;
  Table old = std::move(table_);
  const std::size_t cap = old_cap * 2;
  table_ = allocate(cap);
  mask_ = cap - 1;
  bits_ = std::countr_zero(cap);
  grow_at_ = cap / 2;
  size_ = 0;
  ++counts_.rehashes;
  for (std::size_t k = 0; k < old_cap; ++k) {
    if (old[k].ref == 0) continue;
    Order* o = insert(old[k].ref);
    *o = old[k];
  }
}

OrderBook::Book* OrderBook::book(std::uint32_t instrument) {
  auto& b = books_[instrument];
  if (!b) {
    b = std::make_unique<Book>();
    b->side[0].reserve(cfg_.levels_reserve);
    b->side[1].reserve(cfg_.levels_reserve);
  }
  return b.get();
}

const OrderBook::Book* OrderBook::find_book(std::uint32_t instrument) const noexcept {
  return instrument < books_.size() ? books_[instrument].get() : nullptr;
}

void OrderBook::level_add(Book& b, Side s, std::int64_t price, std::uint32_t qty) {
  auto& v = b.side[side_index(s)];
  const std::int64_t key = key_of(s, price);
  const std::size_t i = level_pos(v, s, key);
  if (i < v.size() && v[i].price == price) {
    v[i].qty += qty;
    ++v[i].orders;
  } else {
    v.insert(v.begin() + static_cast<long>(i), Level{price, qty, 1});
  }
  ++b.live;
}

void OrderBook::level_sub(Book& b, Side s, std::int64_t price, std::uint32_t qty,
                          bool last) noexcept {
  auto& v = b.side[side_index(s)];
  const std::size_t i = level_pos(v, s, key_of(s, price));
  if (i >= v.size() || v[i].price != price) return;  // cannot happen: orders always have a level
  v[i].qty -= std::min<std::uint64_t>(qty, v[i].qty);
  if (last) {
    --b.live;
    if (--v[i].orders == 0) v.erase(v.begin() + static_cast<long>(i));
  }
}

void OrderBook::remove(Order* o) noexcept {
  level_sub(*books_[o->instrument], o->side, o->price, o->qty, true);
  erase(o);
}

void OrderBook::reduce(Order* o, std::uint32_t qty) noexcept {
  if (qty >= o->qty) {
    if (qty > o->qty) ++counts_.overfills;
    remove(o);
    return;
  }
  level_sub(*books_[o->instrument], o->side, o->price, qty, false);
  o->qty -= qty;
}

bool OrderBook::apply(const Tick& t, Tick& quote) {
  std::uint32_t instrument = 0;
  Order* o = nullptr;
  if (!target(t, instrument, o)) return false;
  Book& b = *book(instrument);
  const Level bid0 = best(b.side[0]);
  const Level ask0 = best(b.side[1]);
  change(b, t, o, instrument);
  const Level bid1 = best(b.side[0]);
  const Level ask1 = best(b.side[1]);
  if (same(bid0, bid1) && same(ask0, ask1)) return false;
  quote = Tick{};
  quote.kind = TickKind::Quote;
  quote.instrument = instrument;
  quote.price = bid1.price;
  quote.qty = saturate32(bid1.qty);
  quote.set_ask_price(ask1.price);
  quote.aux_qty = saturate32(ask1.qty);
  quote.exch_ts = t.exch_ts;
  quote.seq = t.seq;
  quote.flags = t.flags;
  ++counts_.quotes;
  return true;
}

bool OrderBook::target(const Tick& t, std::uint32_t& instrument, Order*& o) {
  switch (t.kind) {
    case TickKind::Add:
      if (t.instrument > cfg_.max_instrument) {
        ++counts_.bad_instrument;
        return false;
      }
      if (t.order_ref == 0 || (t.side != Side::Buy && t.side != Side::Sell)) {
        ++counts_.invalid_adds;
        return false;
      }
      instrument = t.instrument;
      return true;
    case TickKind::Modify:
    case TickKind::Cancel:
    case TickKind::Delete:
    case TickKind::Execute:
      o = find(t.order_ref);
      if (o == nullptr) {
        ++counts_.unknown_refs;
        return false;
      }
      instrument = o->instrument;
      return true;
    default:
      return false;
  }
}

void OrderBook::change(Book& b, const Tick& t, Order* o, std::uint32_t instrument) {
  switch (t.kind) {
    case TickKind::Add:
      if (place(b, t.order_ref, t.side, t.price, t.qty, instrument)) ++counts_.adds;
      break;
    case TickKind::Modify: {
      // An ITCH replace: the old order goes, a new reference takes its side.
      ++counts_.replaces;
      const Side side = o->side;
      remove(o);
      if (t.aux != 0) (void)place(b, t.aux, side, t.price, t.qty, instrument);
      else ++counts_.duplicate_adds;
      break;
    }
    case TickKind::Cancel:
      ++counts_.cancels;
      reduce(o, t.qty);
      break;
    case TickKind::Execute:
      ++counts_.executes;
      reduce(o, t.qty);
      break;
    case TickKind::Delete:
      ++counts_.deletes;
      remove(o);
      break;
    default:
      break;
  }
}

bool OrderBook::place(Book& b, std::uint64_t ref, Side side, std::int64_t price, std::uint32_t qty,
                      std::uint32_t instrument) {
  Order* n = insert(ref);
  if (n == nullptr) {
    ++counts_.duplicate_adds;
    return false;
  }
  n->price = price;
  n->qty = qty;
  n->instrument = instrument;
  n->side = side;
  level_add(b, side, price, qty);
  return true;
}

void OrderBook::clear() noexcept {
  std::fill_n(table_.get(), mask_ + 1, Order{});
  size_ = 0;
  for (auto& b : books_) {
    if (!b) continue;
    b->side[0].clear();
    b->side[1].clear();
    b->live = 0;
  }
  counts_ = BookCounts{};
}

std::size_t OrderBook::apply(std::span<const Tick> ticks, std::span<Tick> quotes) {
  // Far enough ahead to cover a memory access, near enough that the lines are still cached.
  constexpr std::size_t kAhead = 8;
  const std::size_t n = std::min(ticks.size(), quotes.size());
  std::size_t q = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const Tick& f = ticks[i + kAhead];
      __builtin_prefetch(&table_[slot_of(f.order_ref)]);
      if (f.kind == TickKind::Modify) __builtin_prefetch(&table_[slot_of(f.aux)]);
      if (f.instrument < books_.size()) __builtin_prefetch(&books_[f.instrument]);
    }
    q += apply(ticks[i], quotes[q]);
  }
  return q;
}

TopOfBook OrderBook::top(std::uint32_t instrument) const noexcept {
  const Book* b = find_book(instrument);
  if (b == nullptr) return {};
  return {best(b->side[0]), best(b->side[1])};
}

std::size_t OrderBook::depth(std::uint32_t instrument, Side side, std::span<Level> out) const noexcept {
  const Book* b = find_book(instrument);
  if (b == nullptr || side == Side::None) return 0;
  const auto& v = b->side[side_index(side)];
  const std::size_t n = std::min(out.size(), v.size());
  for (std::size_t i = 0; i < n; ++i) out[i] = v[v.size() - 1 - i];
  return n;
}

std::size_t OrderBook::live_orders(std::uint32_t instrument) const noexcept {
  const Book* b = find_book(instrument);
  return b == nullptr ? 0 : b->live;
}

std::vector<std::uint32_t> OrderBook::instruments() const {
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < books_.size(); ++i) {
    if (books_[i]) ids.push_back(static_cast<std::uint32_t>(i));
  }
  return ids;
}

}  // namespace tickrail::feed
