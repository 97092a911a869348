#include "transport/rdma/ud/sequence_tracker.hpp"

#include <algorithm>

namespace tickrail::rdma::ud {

Hole SequenceTracker::first_hole(std::uint64_t max_len) const noexcept {
  Hole h;
  if (!started() || max_len == 0) return h;
  const std::uint64_t end = std::min(highest_, next_ + capacity_);
  std::uint64_t s = std::max(next_, covered_until_);
  // Present, or known gone (marked lost: a conflating tracker stopped there reads it no more).
  while (s < end && (window_[s & mask_].seq == s || window_[s & mask_].seq == (s | kLostMark))) ++s;
  if (s >= end) return h;
  h.lo = s;
  h.hi = std::min(end, s + max_len);
  if (covering_) {
    // Under failover, what is present between two holes may mean the other line brought the
    // second one: read one run at a time, and not what the other line is known to have brought.
    std::uint64_t e = s + 1;
    while (e < h.hi && window_[e & mask_].seq != e) ++e;
    h.hi = read_until_ > h.lo ? std::min(e, read_until_) : e;
    return h;
  }
  // Fetch no present ticks at the end of the run (the start is missing by construction).
  while (h.hi > h.lo + 1 && window_[(h.hi - 1) & mask_].seq == h.hi - 1) --h.hi;
  return h;
}

std::uint64_t SequenceTracker::recovered(const Tick* ticks, std::uint64_t lo,
                                         std::uint64_t n) noexcept {
  std::uint64_t stored = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t s = lo + i;
    if (s < next_ || s - next_ >= capacity_) continue;  // delivered or given up meanwhile
    const std::uint64_t got = ticks[i].seq;
    if (got == s) {
      // Ticks the read covered but that were already held are not duplicates of the network.
      if (window_[s & mask_].seq != s && store(ticks[i], Source::recovery) == Stored::stored) {
        ++stored;
      }
      continue;
    }
    // Another sequence in that history slot: newer (the publisher went a whole history past
    // s), or 0 (being rewritten with a newer one). Either way s is gone, unless we hold it.
    Tick& slot = window_[s & mask_];
    if (slot.seq != s && (got == 0 || got > s)) slot.seq = s | kLostMark;
  }
  return stored;
}

}  // namespace tickrail::rdma::ud
