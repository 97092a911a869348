// The last-value table: per instrument and class, the latest tick, in memory subscribers read
// without the publisher (a sealed memfd on one host).
//
// Entry (instrument, class) is slot instrument * kStateClasses + class. Its last word is the tick's
// sequence number and doubles as a seqlock: the writer stores kEntryBusy, fences, writes the
// other seven words, then stores the sequence with release; a reader that finds kEntryBusy, or a
// different word after its copy than before, copied nothing it may use. 0 means never written.
// The writer is the publishing thread, on the publish path: stores only to the table (it never
// reads it), no allocation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/counters.hpp"
#include "tickrail/ring.hpp"
#include "tickrail/state.hpp"

namespace tickrail::detail {

inline constexpr std::uint64_t kEntryBusy = std::uint64_t{1} << 63;

// What a channel's table holds; travels in the attach handshake and is validated once.
struct TableGeometry {
  std::uint32_t capacity = 0;  // instruments; 0: the channel keeps no table
  std::uint32_t classes = 0;   // bit c: class c is kept

  [[nodiscard]] static TableGeometry of(const StateConfig& c) noexcept {
    if (!c.enabled) return {};
    return {c.capacity, (c.quote ? 1u : 0u) | (c.trade ? 2u : 0u) | (c.status ? 4u : 0u)};
  }
  [[nodiscard]] bool valid() const noexcept {
    return capacity >= 1 && capacity <= kMaxStateCapacity && classes != 0 && classes < 8;
  }
  [[nodiscard]] std::size_t entries() const noexcept {
    return std::size_t{capacity} * kStateClasses;
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return entries() * sizeof(Slot); }
  // The entry a tick updates, or ~0 when the table does not keep it.
  [[nodiscard]] std::size_t entry_of(const Tick& t) const noexcept {
    const int c = state_class_of(t.kind);
    if (c < 0 || (classes & (1u << c)) == 0) return ~std::size_t{0};
    return std::size_t{t.instrument} * kStateClasses + static_cast<unsigned>(c);
  }
  friend bool operator==(const TableGeometry&, const TableGeometry&) = default;
};

// The publisher's side.
class LastValueWriter {
 public:
  LastValueWriter() noexcept = default;
  LastValueWriter(Slot* entries, TableGeometry g) : entries_(entries), g_(g), filled_((g.entries() + 63) / 64) {}
  [[nodiscard]] bool on() const noexcept { return entries_ != nullptr; }
  [[nodiscard]] TableGeometry geometry() const noexcept { return g_; }

  // Ticks[i] was published as sequence first + i, with send time `stamp` (0: its own). Counts
  // entries filled for the first time (state_entries) and kept-class ticks of instruments beyond
  // the capacity (state_beyond).
  void update(std::span<const Tick> ticks, std::uint64_t first, std::uint64_t stamp,
              PublisherCounters& c) noexcept {
    for (std::size_t i = 0; i < ticks.size(); ++i) {
      const Tick& t = ticks[i];
      const int cls = state_class_of(t.kind);
      if (cls < 0 || (g_.classes & (1u << cls)) == 0) continue;
      if (t.instrument >= g_.capacity) [[unlikely]] {
        ++c.state_beyond;
        continue;
      }
      const std::size_t k = std::size_t{t.instrument} * kStateClasses + static_cast<unsigned>(cls);
      // A bit of our own says whether the entry was ever filled: reading the entry's word would
      // be a cache miss that each update waits for, where its stores alone need not wait.
      std::uint64_t& f = filled_[k >> 6];
      const std::uint64_t bit = std::uint64_t{1} << (k & 63);
      if ((f & bit) == 0) {
        f |= bit;
        ++c.state_entries;
      }
      write(entries_[k], t, first + i, stamp != 0 ? stamp : t.send_ts);
    }
  }

  // The entry's current tick, read as a subscriber would (tests and tools).
  [[nodiscard]] Slot* entries() const noexcept { return entries_; }

 private:
  static void write(Slot& e, const Tick& t, std::uint64_t seq, std::uint64_t send_ts) noexcept {
    using namespace ring_detail;
    store_relaxed(e.words[kSeqWord], kEntryBusy);
    std::atomic_thread_fence(std::memory_order_release);
    store_tick_words(e, t, send_ts);
    std::atomic_ref<std::uint64_t>(e.words[kSeqWord]).store(seq, std::memory_order_release);
  }

  Slot* entries_ = nullptr;
  TableGeometry g_;
  std::vector<std::uint64_t> filled_;  // bit k: entry k has been written (24 KiB at 65,536 instruments)
};

enum class EntryRead : std::uint8_t { empty, ok, busy };

// Copies entry `e` into `out` unless it is being written (busy: try again later); a copy torn by
// a concurrent write is retried up to `attempts` times, then reported busy.
[[nodiscard]] inline EntryRead read_entry(Slot& e, Tick& out, unsigned attempts = 8) noexcept {
  using namespace ring_detail;
  for (unsigned a = 0; a < attempts; ++a) {
    const std::uint64_t seq = load_acquire(e.words[kSeqWord]);
    if (seq == 0) return EntryRead::empty;
    if (seq == kEntryBusy) return EntryRead::busy;
    alignas(kCacheLine) std::uint64_t w[8];
    read_slot_words(e, w);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (load_relaxed(e.words[kSeqWord]) != seq) continue;
    w[kSeqWord] = seq;
    std::memcpy(&out, w, sizeof out);
    return EntryRead::ok;
  }
  return EntryRead::busy;
}

// An entry read twice by a reader that cannot re-check its seqlock word around one copy (an RDMA
// READ of a slot reads its words in no promised order): the copies are usable when they are
// identical and not busy. The second copy is made after the first has landed (docs/state.md
// says why two identical, unbusy copies are the publisher's write); busy: read it again.
[[nodiscard]] inline EntryRead check_copies(const Slot& first, const Slot& second, Tick& out) noexcept {
  if (std::memcmp(&first, &second, sizeof(Slot)) != 0) return EntryRead::busy;
  const std::uint64_t seq = second.words[kSeqWord];
  if ((seq & kEntryBusy) != 0) return EntryRead::busy;
  if (seq == 0) return EntryRead::empty;
  std::memcpy(&out, &second, sizeof out);
  return EntryRead::ok;
}

}  // namespace tickrail::detail
