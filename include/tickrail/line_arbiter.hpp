// LineArbiter: one stream received over two lines (the same ticks under the same sequence
// numbers) delivered once per sequence number, in order, whichever line brought it first.
//
// Each line brings its ticks in increasing sequence order (a Subscriber delivers so), which is
// what makes arbitration cheap: a sequence missing at `next` is either still to come on the line
// that is behind, or lost on both lines once both have passed it. Ticks beyond such a hole wait
// in a window of `capacity` ticks. The hole is given up when it is lost on both lines (counted in
// gaps), when the window cannot hold a tick the line ahead brings (the lines are `capacity`
// apart), or when the owner gives it up (skip_hole: the line behind has stalled too long). A
// line that is down (line_down) fills no hole: the other line's holes are gaps at once.
//
// offer(), skip_hole(), line_down() and line_up() never allocate, throw or make a system call;
// each does O(1) work per tick delivered, plus one scan of the window when a hole is given up.
// The sequence numbers are the lines' own: nothing here trusts them to be sane (a line that jumps
// far ahead costs a window scan, not a loop over the jump). A tick that leaps beyond the window
// from where its own line was, while the other line is up, moves nothing until that line's next
// tick follows it (comes after it, within a window), the other line goes down, or the stream
// comes within a window of it: one corrupt or forged sequence number would
// otherwise give up every hole up to it and discard the other line's every tick below it, for
// ever. A leap its line does not follow is discarded and counted (refuted). A line that keeps a
// consistent run far ahead is followed, as any line ahead is: the arbiter cannot tell it from
// one whose partner lags.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tickrail/tick.hpp"

namespace tickrail::detail {

class LineArbiter {
 public:
  static constexpr int kLines = 2;
  struct LineCounts {
    std::uint64_t first = 0;       // ticks delivered from this line (it brought them first)
    std::uint64_t duplicates = 0;  // ticks discarded: sequence delivered, held, given up or 0
    // The highest sequence it brought (0: none), but for what offer() took while calm: at or
    // below next(), which decides nothing (decided() and leaps() look only beyond next()).
    std::uint64_t last = 0;
    std::uint64_t refuted = 0;     // leaps its next tick did not follow: discarded
    bool down = false;
  };

  // `capacity`: ticks the window holds, a power of two. Allocates it.
  explicit LineArbiter(std::size_t capacity) : slots_(capacity), mask_(capacity - 1) {}

  // The first sequence to deliver, before the first offer(). Without it, the stream starts at the
  // first tick offered.
  void start_at(std::uint64_t seq) noexcept {
    next_ = seq;
    started_ = true;
    note_calm();
  }

  // Returns whether `t` is the first copy of its sequence (delivered or held), false when it is
  // discarded or, a leap, waits for its line's next tick.
  template <class Deliver>
  bool offer(int line, const Tick& t, Deliver&& deliver) noexcept {
    LineCounts& l = lines_[line & 1];
    const std::uint64_t s = t.seq;
    // The common cases, while calm: the next tick, or a copy of one delivered (s in 1..next()).
    // What take() would do then, without its look at the window, without noting last, and
    // without settle(), which finds nothing to do: every line's last is below next() (what a
    // line brought beyond it would be held).
    if (calm_ && s - 1 < next_) [[likely]] {
      if (s != next_) {
        ++l.duplicates;
        return false;
      }
      ++l.first;
      ++delivered_;
      ++next_;
      deliver(t);
      return true;
    }
    const Tick copy = t;  // see offer_rest()
    return offer_rest(line, copy, deliver);
  }

  // Gives up the hole at next(), if ticks wait beyond it: they are delivered up to the next hole.
  template <class Deliver>
  void skip_hole(Deliver&& deliver) noexcept {
    const std::uint64_t h = first_held(~std::uint64_t{0});
    if (h != 0) skip_to(h, deliver);
    settle(deliver);
    note_calm();
  }

  // A line that will bring nothing more (its publisher gone) fills no hole; line_up() when it
  // is back (a new subscriber, from wherever its publisher is).
  template <class Deliver>
  void line_down(int line, Deliver&& deliver) noexcept {
    const int i = line & 1;
    lines_[i].down = true;
    if (leaps_[i].seq != 0) {  // nothing will follow it
      leaps_[i].seq = 0;
      ++lines_[i].refuted;
    }
    if (leaps_[i ^ 1].seq != 0) {  // nothing can contradict it any more
      const Tick p = std::exchange(leaps_[i ^ 1], Tick{});
      (void)take(lines_[i ^ 1], i ^ 1, p, deliver);
    }
    settle(deliver);
    note_calm();
  }
  void line_up(int line) noexcept {
    lines_[line & 1].down = false;
    lines_[line & 1].last = 0;
  }

  [[nodiscard]] std::uint64_t next() const noexcept { return next_; }
  [[nodiscard]] std::uint64_t delivered() const noexcept { return delivered_; }
  [[nodiscard]] std::uint64_t gaps() const noexcept { return gaps_; }        // lost on both lines
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipped_; }  // given up, maybe not lost
  [[nodiscard]] const LineCounts& line(int l) const noexcept { return lines_[l & 1]; }
  [[nodiscard]] std::size_t capacity() const noexcept { return slots_.size(); }
  // Is a tick waiting beyond a hole? (The owner times how long.)
  [[nodiscard]] bool holding() const noexcept { return waiting_ != 0; }
  // One past the hole at next(): the first sequence waiting beyond it, 0 when none waits. What
  // lies in between neither line has brought. A scan of the hole.
  [[nodiscard]] std::uint64_t hole_end() const noexcept { return first_held(~std::uint64_t{0}); }

 private:
  struct Held {
    Tick tick{};  // seq 0: empty
    std::uint8_t line = 0;
  };

  // offer() other than its common cases. Given a copy of the tick: a reference to the caller's
  // would keep that one in memory on the common path too.
  template <class Deliver>
  [[gnu::noinline]] bool offer_rest(int line, const Tick& t, Deliver& deliver) noexcept {
    LineCounts& l = lines_[line & 1];
    const std::uint64_t s = t.seq;
    if (s == 0) {  // no tick has sequence 0
      ++l.duplicates;
      return false;
    }
    if (!started_) start_at(s);
    Tick& leap = leaps_[line & 1];
    if (leap.seq != 0) {  // this line's tick before leapt: this one confirms or refutes it
      const Tick p = leap;
      leap.seq = 0;
      if (s > p.seq && s - p.seq < capacity()) {
        take(l, line, p, deliver);
      } else {
        ++l.refuted;
      }
    }
    if (s >= next_ && s - next_ >= capacity() && leaps(line, s)) {
      leap = t;
      note_calm();
      return false;
    }
    const bool first = take(l, line, t, deliver);
    if ((leaps_[0].seq | leaps_[1].seq) != 0) [[unlikely]] take_reached_leaps(deliver);
    note_calm();
    return first;
  }
  // Calm: started, nothing held, no leap parked; offer() may take its common cases.
  void note_calm() noexcept { calm_ = started_ && waiting_ == 0 && (leaps_[0].seq | leaps_[1].seq) == 0; }

  // A tick beyond the window that its line did not walk to, while the other line could still
  // contradict it.
  [[nodiscard]] bool leaps(int line, std::uint64_t s) const noexcept {
    const LineCounts& l = lines_[line & 1];
    const bool walked = l.last != 0 && s > l.last && s - l.last < capacity();
    return !walked && !lines_[(line & 1) ^ 1].down;
  }

  // A leap the stream has come within a window of (or passed) is a leap no more: taken as it would
  // be now, delivered, held or a duplicate.
  template <class Deliver>
  void take_reached_leaps(Deliver& deliver) noexcept {
    for (int i = 0; i < kLines; ++i) {
      const std::uint64_t s = leaps_[i].seq;
      if (s != 0 && (s < next_ || s - next_ < capacity())) {
        const Tick p = std::exchange(leaps_[i], Tick{});
        (void)take(lines_[i], i, p, deliver);
      }
    }
  }

  // Delivers or holds `t`, the first copy of its sequence, or discards a later one.
  template <class Deliver>
  bool take(LineCounts& l, int line, const Tick& t, Deliver& deliver) noexcept {
    const std::uint64_t s = t.seq;
    l.last = std::max(l.last, s);
    if (s < next_ || held(s)) {
      ++l.duplicates;
      settle(deliver);
      return false;
    }
    if (s - next_ >= capacity()) skip_to(s - capacity() + 1, deliver);  // the lines are too far apart
    if (s == next_) {
      ++l.first;
      ++delivered_;
      ++next_;
      deliver(t);
    } else {
      Held& h = slots_[s & mask_];
      h.tick = t;
      h.line = static_cast<std::uint8_t>(line & 1);
      ++waiting_;
    }
    settle(deliver);
    return true;
  }

  [[nodiscard]] bool held(std::uint64_t s) const noexcept {
    return s - next_ < capacity() && slots_[s & mask_].tick.seq == s && s != 0;
  }
  // The lowest sequence waiting in the window below `limit`, 0 when none (a scan of the window,
  // only when something waits).
  [[nodiscard]] std::uint64_t first_held(std::uint64_t limit) const noexcept {
    if (waiting_ == 0) return 0;
    for (std::uint64_t s = next_; s < limit && s - next_ < capacity(); ++s) {
      if (held(s)) return s;
    }
    return 0;
  }
  // Every hole below this is lost on both lines: each line has passed it or will bring nothing.
  [[nodiscard]] std::uint64_t decided() const noexcept {
    const LineCounts& a = lines_[0];
    const LineCounts& b = lines_[1];
    if (a.down && b.down) return std::max(a.last, b.last);
    if (a.down) return b.last;
    if (b.down) return a.last;
    return std::min(a.last, b.last);
  }

  template <class Deliver>
  void deliver_held(Deliver& deliver) noexcept {
    Held& h = slots_[next_ & mask_];
    ++lines_[h.line].first;
    ++delivered_;
    ++next_;
    --waiting_;
    deliver(h.tick);
    h.tick.seq = 0;
  }

  // Moves next() to `to`, delivering what waits below it and counting the rest as skipped.
  template <class Deliver>
  void skip_to(std::uint64_t to, Deliver& deliver) noexcept {
    while (next_ < to) {
      if (held(next_)) {
        deliver_held(deliver);
        continue;
      }
      const std::uint64_t h = first_held(to);
      const std::uint64_t stop = h != 0 ? h : to;
      skipped_ += stop - next_;
      next_ = stop;
    }
  }

  // Delivers what waits at next(), and counts holes lost on both lines as gaps.
  template <class Deliver>
  void settle(Deliver& deliver) noexcept {
    for (;;) {
      if (held(next_)) {
        deliver_held(deliver);
        continue;
      }
      const std::uint64_t d = decided();
      if (next_ >= d) return;
      const std::uint64_t h = first_held(d);
      const std::uint64_t stop = h != 0 ? h : d;
      gaps_ += stop - next_;
      next_ = stop;
    }
  }

  std::vector<Held> slots_;
  std::uint64_t mask_;
  std::array<LineCounts, kLines> lines_{};
  std::array<Tick, kLines> leaps_{};  // a line's leap, waiting for its next tick (seq 0: none)
  std::uint64_t waiting_ = 0;  // ticks held in the window
  std::uint64_t next_ = 1;
  bool started_ = false;
  bool calm_ = false;  // note_calm()
  std::uint64_t delivered_ = 0;
  std::uint64_t gaps_ = 0;
  std::uint64_t skipped_ = 0;
};

}  // namespace tickrail::detail
