// Ring: the slot layout and commit protocol shared by every ring transport.
//
// A ring is a power-of-two array of 64-byte slots; tick `seq` lives in slot `seq & (capacity-1)`.
// The slot's last word is the tick's sequence number and commits the slot: the writer stores it
// last with release semantics (a CPU store, or a NIC placing an RDMA WRITE in address order), the
// reader loads it first with acquire semantics. Sequence numbers start at 1; a slot holding 0
// was never written, or is being overwritten (see write_slot).
//
// The reader is lapped when it finds a sequence number ahead of the one it expects: the writer
// has gone a whole ring past it. It then resumes at the oldest tick that can still be intact
// and counts every tick it skipped as lost, so received + lost always equals what was published
// up to its position. A lap is the publisher overtaking the reader by a whole ring: the reader
// is then lost + (up to a ring of) unread ticks behind, so laps = ceil(lost / capacity). A
// reader that stays lapped skips many small steps (each a run of lost ticks) per lap: those
// are counted apart, as skips.
//
// Slots are accessed only as 64-bit words through std::atomic_ref: a plain memcpy racing with
// the writer would be a data race even where the bytes are discarded afterwards.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "tickrail/tick.hpp"
#include "tickrail/export.hpp"

namespace tickrail {

struct alignas(kCacheLine) Slot {
  std::uint64_t words[8];
};
static_assert(sizeof(Slot) == sizeof(Tick));
inline constexpr unsigned kSeqWord = 7;  // offsetof(Tick, seq) / 8
static_assert(offsetof(Tick, seq) == kSeqWord * sizeof(std::uint64_t));

[[nodiscard]] constexpr bool is_valid_ring_capacity(std::uint64_t c) noexcept {
  return c >= 2 && (c & (c - 1)) == 0 && c <= (std::uint64_t{1} << 30);
}

namespace ring_detail {
inline std::uint64_t load_relaxed(std::uint64_t& w) noexcept {
  return std::atomic_ref<std::uint64_t>(w).load(std::memory_order_relaxed);
}
inline std::uint64_t load_acquire(std::uint64_t& w) noexcept {
  return std::atomic_ref<std::uint64_t>(w).load(std::memory_order_acquire);
}
inline void store_relaxed(std::uint64_t& w, std::uint64_t v) noexcept {
  std::atomic_ref<std::uint64_t>(w).store(v, std::memory_order_relaxed);
}
// Words 0 to 6 of `t` into `slot`, word 0 being `send_ts`; the caller stores the sequence word.
// Spelled out: compilers do not unroll a loop of atomic stores (five instructions a word), nor
// keep a copy of the tick out of the stack.
inline void store_tick_words(Slot& slot, const Tick& t, std::uint64_t send_ts) noexcept {
  const auto* src = reinterpret_cast<const unsigned char*>(&t);
  const auto word = [src](unsigned i) noexcept {
    std::uint64_t v;
    std::memcpy(&v, src + i * sizeof v, sizeof v);
    return v;
  };
  static_assert(kSeqWord == 7 && offsetof(Tick, send_ts) == 0);
  store_relaxed(slot.words[0], send_ts);
  store_relaxed(slot.words[1], word(1));
  store_relaxed(slot.words[2], word(2));
  store_relaxed(slot.words[3], word(3));
  store_relaxed(slot.words[4], word(4));
  store_relaxed(slot.words[5], word(5));
  store_relaxed(slot.words[6], word(6));
}
}  // namespace ring_detail

// Writes `t` with sequence number `seq` into `slot` (CPU writer). When the slot may still be
// read by a lapped reader (policies that overwrite), `may_be_read` first zeroes the commit word
// so that a reader racing with the copy sees its re-check fail instead of a torn tick.
inline void write_slot(Slot& slot, const Tick& t, std::uint64_t seq, std::uint64_t send_ts,
                       bool may_be_read) noexcept {
  using namespace ring_detail;
  if (may_be_read) {
    store_relaxed(slot.words[kSeqWord], 0);
    std::atomic_thread_fence(std::memory_order_release);
  }
  store_tick_words(slot, t, send_ts);
  std::atomic_ref<std::uint64_t>(slot.words[kSeqWord]).store(seq, std::memory_order_release);
}

// Word 6 of a slot without kTickFromTable (Tick::flags is its top 16 bits): a live tick never
// carries it, whatever the publisher wrote.
inline constexpr std::uint64_t kLiveWord6 = ~(std::uint64_t{kTickFromTable} << 48);
static_assert(offsetof(Tick, flags) == 6 * 8 + 6);

// Reads words 0 to 6 of a slot into `w` (the reader's copy, checked by re-reading the commit
// word after it); spelled out for the same reason as write_slot.
inline void read_slot_words(Slot& s, std::uint64_t* w) noexcept {
  using namespace ring_detail;
  w[0] = load_relaxed(s.words[0]);
  w[1] = load_relaxed(s.words[1]);
  w[2] = load_relaxed(s.words[2]);
  w[3] = load_relaxed(s.words[3]);
  w[4] = load_relaxed(s.words[4]);
  w[5] = load_relaxed(s.words[5]);
  w[6] = load_relaxed(s.words[6]);
}

// Single-consumer reader of one ring. Owned by one thread; not shareable.
class TICKRAIL_API RingReader {
 public:
  RingReader() noexcept = default;
  // `credit` receives the next sequence this reader expects (all below it are consumed) after
  // every poll that delivered something; the writer reads it to know which slots it may reuse.
  RingReader(Slot* slots, std::uint64_t capacity, std::uint64_t first_seq,
             std::atomic<std::uint64_t>* credit) noexcept
      : slots_(slots), mask_(capacity - 1), capacity_(capacity), next_(first_seq),
        credit_(credit) {}

  // Delivers up to `limit` committed ticks in sequence order to `handler(const Tick&)` and
  // returns how many. Never blocks, allocates, throws or makes a system call.
  template <class Handler>
  std::size_t poll(Handler&& handler, std::size_t limit) noexcept {
    using namespace ring_detail;
    std::size_t n = 0;
    while (n < limit) {
      Slot& s = slots_[next_ & mask_];
      const std::uint64_t seq = load_acquire(s.words[kSeqWord]);
      if (seq != next_) {
        if (seq > next_) {
          if (stop_at_laps_) [[unlikely]] {
            lapped_ = true;
            break;
          }
          skip_lapped(seq);
          continue;
        }
        break;  // not yet written (or being overwritten: the next look finds the lap)
      }
      alignas(kCacheLine) std::uint64_t w[8];
      read_slot_words(s, w);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (load_relaxed(s.words[kSeqWord]) != seq) [[unlikely]] {
        continue;  // overwritten while we copied: discard the copy, re-examine the slot
      }
      w[kSeqWord] = seq;
      w[6] &= kLiveWord6;
      Tick t;
      std::memcpy(&t, w, sizeof t);
      ++next_;
      ++n;
      handler(static_cast<const Tick&>(t));
    }
    if (n != 0) {
      received_ += n;
      if (credit_ != nullptr) credit_->store(next_, std::memory_order_release);
    }
    return n;
  }

  // Ticks consumed without reaching the app (a snapshot's roll forward) are not received; with
  // `lost`, they count as lost (a conflation's).
  void discount(std::uint64_t n, bool lost = false) noexcept {
    received_ -= n;
    if (lost) {
      lost_ += n;
      laps_ = (lost_ + capacity_ - 1) / capacity_;
    }
  }
  // A conflating reader stops where it finds itself lapped instead of skipping ahead: lapped()
  // says so until it moves on with skip_to().
  void stop_at_laps(bool on) noexcept { stop_at_laps_ = on; }
  [[nodiscard]] bool lapped() const noexcept { return lapped_; }
  // Moves ahead to `seq`, counting what it skips as lost, as a lap does.
  void skip_to(std::uint64_t seq) noexcept {
    lapped_ = false;
    if (seq <= next_) return;
    lost_ += seq - next_;
    laps_ = (lost_ + capacity_ - 1) / capacity_;
    ++skips_;
    next_ = seq;
  }

  // Found lapped and given up on (a conflation abandoned): goes on as a reader that does not
  // stop at laps would, from the oldest tick that can still be intact, counting the rest as lost.
  // At most a ring's length of looks, whatever the slots say.
  void pass_lap() noexcept {
    if (!lapped_) return;
    lapped_ = false;
    for (std::uint64_t i = 0; i < capacity_; ++i) {
      const std::uint64_t seq = ring_detail::load_acquire(slots_[next_ & mask_].words[kSeqWord]);
      if (seq <= next_) return;
      skip_lapped(seq);
    }
  }

  // Whether poll() would find anything: the tick it expects, or a lap. One acquire load of the
  // slot's commit word, which poll() then reads again (from the same line, now in cache).
  [[nodiscard]] bool has_next() const noexcept {
    return ring_detail::load_acquire(slots_[next_ & mask_].words[kSeqWord]) >= next_;
  }

  [[nodiscard]] std::uint64_t next_seq() const noexcept { return next_; }
  [[nodiscard]] std::uint64_t received() const noexcept { return received_; }
  [[nodiscard]] std::uint64_t lost() const noexcept { return lost_; }
  // Times the publisher overtook this reader by a whole ring: ceil(lost / capacity).
  [[nodiscard]] std::uint64_t laps() const noexcept { return laps_; }
  // Resumptions after being lapped: each skipped a run of lost ticks.
  [[nodiscard]] std::uint64_t skips() const noexcept { return skips_; }
  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] bool valid() const noexcept { return slots_ != nullptr; }

 private:
  void skip_lapped(std::uint64_t seen) noexcept {
    // `seen` shares our slot, so the writer has committed through it; the oldest tick that can
    // still be intact is one ring behind it. Always move forward, even on a garbage value.
    std::uint64_t resume = seen >= capacity_ ? seen - capacity_ + 1 : 0;
    if (resume <= next_) resume = next_ + 1;
    lost_ += resume - next_;
    laps_ = (lost_ + capacity_ - 1) / capacity_;  // capacity_ >= 2 on any ring being read
    ++skips_;
    next_ = resume;
  }

  Slot* slots_ = nullptr;
  std::uint64_t mask_ = 0;
  std::uint64_t capacity_ = 0;
  std::uint64_t next_ = 1;
  std::uint64_t received_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t laps_ = 0;
  std::uint64_t skips_ = 0;
  std::atomic<std::uint64_t>* credit_ = nullptr;
  bool stop_at_laps_ = false;
  bool lapped_ = false;
};

}  // namespace tickrail
