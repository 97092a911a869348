// OrderBook: every instrument's limit order book built from order ticks (Add, Modify, Cancel,
// Delete, Execute), reporting top-of-book changes as Quote ticks.
//
// Orders live in one open-addressing hash table keyed by order reference (references are unique
// across instruments, as in ITCH), sized at construction for BookConfig::expected_orders; the
// table doubles if that is exceeded (an allocation, so size it right for a steady data path).
// Each instrument keeps per side a vector of price levels sorted so the best level is last:
// changes near the top, where nearly all of them happen, move few elements.
//
// apply() needs no Execute price or Cancel instrument: the book knows the order. Ticks that
// refer to an order it does not hold (a capture that starts mid-session) are counted, never
// fatal. One thread applies and queries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tickrail/tick.hpp"

namespace tickrail::feed {

struct BookConfig {
  std::size_t expected_orders = 1 << 20;  // live orders, all instruments together
  std::uint32_t max_instrument = 65535;   // ids above (ITCH locates are 16-bit) are counted, ignored
  std::size_t levels_reserve = 64;        // price levels reserved per side of a new instrument
};

struct BookCounts {
  std::uint64_t adds = 0;
  std::uint64_t executes = 0;
  std::uint64_t cancels = 0;
  std::uint64_t deletes = 0;
  std::uint64_t replaces = 0;
  std::uint64_t quotes = 0;            // top-of-book changes reported
  std::uint64_t unknown_refs = 0;      // execute/cancel/delete/replace of an order not in the book
  std::uint64_t duplicate_adds = 0;    // add (or replace) to a reference already live: ignored
  std::uint64_t invalid_adds = 0;      // add with no side or reference 0: ignored
  std::uint64_t overfills = 0;         // execute/cancel of more shares than left: order removed
  std::uint64_t bad_instrument = 0;    // instrument id above max_instrument: ignored
  std::uint64_t rehashes = 0;          // times the order table outgrew expected_orders
};

struct Level {
  std::int64_t price = 0;
  std::uint64_t qty = 0;
  std::uint32_t orders = 0;
};

struct TopOfBook {
  Level bid;  // qty 0 and orders 0: no bid
  Level ask;
  [[nodiscard]] bool has_bid() const noexcept { return bid.orders != 0; }
  [[nodiscard]] bool has_ask() const noexcept { return ask.orders != 0; }
};

class OrderBook {
 public:
  explicit OrderBook(const BookConfig& cfg = {});
  ~OrderBook();
  OrderBook(const OrderBook&) = delete;
  OrderBook& operator=(const OrderBook&) = delete;

  // Applies one tick (kinds other than the five order kinds are ignored). Returns true when the
  // best bid or ask of the tick's instrument changed, price or size, with `quote` then holding
  // a Quote tick: price/qty = best bid, ask_price()/aux_qty = best ask (0/0 for an empty side;
  // sizes saturate at 2^32-1), exch_ts, seq and flags those of the tick that caused it.
  bool apply(const Tick& t, Tick& quote);
  // Applies a batch in order, writing the quotes it causes to the front of `quotes` (which must
  // hold ticks.size()); returns how many. Same result as apply() one by one, faster on a large
  // book: it prefetches the order table slots a few ticks ahead, overlapping the cache misses.
  std::size_t apply(std::span<const Tick> ticks, std::span<Tick> quotes);

  // Empties every book and zeroes the counts, keeping all memory (to replay an input again).
  void clear() noexcept;

  [[nodiscard]] TopOfBook top(std::uint32_t instrument) const noexcept;
  // Copies up to out.size() levels of one side, best first; returns how many.
  std::size_t depth(std::uint32_t instrument, Side side, std::span<Level> out) const noexcept;
  [[nodiscard]] std::size_t live_orders() const noexcept { return size_; }
  [[nodiscard]] std::size_t live_orders(std::uint32_t instrument) const noexcept;
  // Instruments that ever had an order, ascending (allocates: for reports).
  [[nodiscard]] std::vector<std::uint32_t> instruments() const;
  [[nodiscard]] const BookCounts& counts() const noexcept { return counts_; }

 private:
  struct Order {
    std::uint64_t ref;  // 0: empty slot
    std::int64_t price;
    std::uint32_t qty;
    std::uint32_t instrument;
    Side side;
  };
  struct Book;
  struct Unmap {
    std::size_t bytes;  // no initializer: it must be default-constructible inside this class
    void operator()(Order* p) const noexcept;
  };
  using Table = std::unique_ptr<Order[], Unmap>;

  static Table allocate(std::size_t slots);

  Book* book(std::uint32_t instrument);
  [[nodiscard]] const Book* find_book(std::uint32_t instrument) const noexcept;
  [[nodiscard]] std::size_t slot_of(std::uint64_t ref) const noexcept;
  Order* find(std::uint64_t ref) noexcept;
  Order* insert(std::uint64_t ref);  // nullptr if present
  void erase(Order* o) noexcept;
  void grow();
  void level_add(Book& b, Side s, std::int64_t price, std::uint32_t qty);
  void level_sub(Book& b, Side s, std::int64_t price, std::uint32_t qty, bool last) noexcept;
  // Reduces an order by `qty` (execute/cancel), removing it when nothing is left.
  void reduce(Order* o, std::uint32_t qty) noexcept;
  void remove(Order* o) noexcept;
  // apply()'s steps: the instrument and order a tick is for (false: it cannot apply), the
  // change to the book, and a new order in it (false: the reference is taken).
  bool target(const Tick& t, std::uint32_t& instrument, Order*& o);
  void change(Book& b, const Tick& t, Order* o, std::uint32_t instrument);
  bool place(Book& b, std::uint64_t ref, Side side, std::int64_t price, std::uint32_t qty,
             std::uint32_t instrument);

  BookConfig cfg_;
  Table table_;
  std::size_t mask_ = 0;
  int bits_ = 0;  // log2 of the table size
  std::size_t size_ = 0;
  std::size_t grow_at_ = 0;
  std::vector<std::unique_ptr<Book>> books_;  // by instrument id
  BookCounts counts_;
};

}  // namespace tickrail::feed
