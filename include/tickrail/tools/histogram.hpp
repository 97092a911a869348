// Histogram: a fixed-memory, log-linear latency histogram with HdrHistogram's design.
//
// Values are unsigned integers (tickrail records nanoseconds). The value range is split into
// buckets whose width doubles; each bucket holds the same number of linear sub-buckets, so every
// recorded value is kept to `significant_digits` decimal digits of relative precision. The counts
// array is allocated once, in the constructor: record() never allocates, never throws, never
// makes a system call, and costs a count-leading-zeros, a shift and an add.
//
// The index arithmetic, value_at_percentile() and the percentile iteration are HdrHistogram's
// (AbstractHistogram.java), so percentiles and .hgrm output agree with the tools users know.
// Differences, on purpose:
//  - a value above highest_trackable() is not an error: it is counted at highest_trackable() and
//    in overflow_count(), so no sample is ever silently dropped;
//  - min() and max() are exact (the smallest and largest values passed to record(), even when
//    they overflowed), not bucket-equivalent values;
//  - mean() is exact (from a 128-bit running sum of the recorded, possibly clamped, values);
//    stdev() is computed from bucket midpoints, as HdrHistogram does.
//
// Threads: a Histogram is not synchronized. Each thread records into its own and a control
// thread merges them (merge() adds counts; histograms of one geometry are mergeable).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace tickrail {

struct HistogramConfig {
  std::uint64_t lowest_discernible = 1;                  // smallest value told apart from 0
  std::uint64_t highest_trackable = 3'600'000'000'000;   // 1 hour in ns
  int significant_digits = 3;                            // 0..5
};

// One step of a percentile iteration (HdrHistogram's PercentileIterator).
struct PercentileStep {
  std::uint64_t value;        // highest value equivalent to the bucket that reached the level
  double percentile;          // the level iterated to, 0..100
  std::uint64_t total_count;  // count of values at or below this bucket
};

class Histogram {
 public:
  // Throws Error(Errc::invalid_argument) when lowest < 1, digits outside 0..5, or
  // highest < 2 * lowest.
  Histogram() : Histogram(HistogramConfig{}) {}
  explicit Histogram(const HistogramConfig& config);
  Histogram(std::uint64_t lowest_discernible, std::uint64_t highest_trackable,
            int significant_digits)
      : Histogram(HistogramConfig{lowest_discernible, highest_trackable, significant_digits}) {}

  // Hot path. A value above highest_trackable() is counted at it and in overflow_count().
  void record(std::uint64_t value) noexcept { record_n(value, 1); }
  void record_n(std::uint64_t value, std::uint64_t n) noexcept {
    if (n == 0) [[unlikely]] return;
    if (value < min_) min_ = value;
    if (value > max_) max_ = value;
    std::uint64_t v = value;
    if (v > highest_) [[unlikely]] {
      v = highest_;
      overflow_ += n;
    }
    counts_[index_of(v)] += n;
    total_ += n;
    sum_ += static_cast<U128>(v) * n;
  }

  // Adds other's counts. Throws Error(Errc::geometry_mismatch) when the two were built with a
  // different lowest, highest or significant digits.
  void merge(const Histogram& other);
  void reset() noexcept;

  [[nodiscard]] std::uint64_t count() const noexcept { return total_; }
  [[nodiscard]] bool empty() const noexcept { return total_ == 0; }
  [[nodiscard]] std::uint64_t overflow_count() const noexcept { return overflow_; }
  // Exact; 0 when empty.
  [[nodiscard]] std::uint64_t min() const noexcept { return total_ == 0 ? 0 : min_; }
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
  [[nodiscard]] double mean() const noexcept;
  // HdrHistogram's getMean(): the mean of bucket midpoints (what .hgrm files report).
  [[nodiscard]] double bucket_mean() const noexcept;
  // Population standard deviation from bucket midpoints; 0 when empty.
  [[nodiscard]] double stdev() const noexcept;
  // HdrHistogram's getValueAtPercentile: the highest value equivalent to the first bucket at
  // which the cumulative count reaches p percent of count() (the lowest equivalent for p == 0).
  // p is clamped to [0, 100]; 0 when empty.
  [[nodiscard]] std::uint64_t value_at_percentile(double p) const noexcept;
  // Count recorded in the bucket that holds value.
  [[nodiscard]] std::uint64_t count_at(std::uint64_t value) const noexcept;

  // Percentile iteration for output, with `steps_per_half_distance` steps per halving of the
  // distance to 100% (HdrHistogram's percentileTicksPerHalfDistance; its
  // outputPercentileDistribution uses 5). The last step is at
  // 100%. Empty when the histogram is. Allocates: control plane only.
  [[nodiscard]] std::vector<PercentileStep> percentiles(int steps_per_half_distance = 5) const;

  // Calls f(lowest_equivalent, highest_equivalent, count) for every non-empty bucket, in
  // increasing value order.
  template <class F>
  void for_each_bucket(F&& f) const {
    const auto [lo, hi] = used_range();
    for (std::size_t i = lo; i < hi; ++i) {
      if (counts_[i] != 0) {
        const std::uint64_t v = value_from_index(i);
        f(lowest_equivalent(v), highest_equivalent(v), counts_[i]);
      }
    }
  }

  // Geometry.
  [[nodiscard]] std::uint64_t lowest_discernible() const noexcept { return lowest_; }
  [[nodiscard]] std::uint64_t highest_trackable() const noexcept { return highest_; }
  [[nodiscard]] int significant_digits() const noexcept { return digits_; }
  [[nodiscard]] int bucket_count() const noexcept { return bucket_count_; }
  [[nodiscard]] int sub_bucket_count() const noexcept { return sub_bucket_count_; }
  [[nodiscard]] std::size_t counts_length() const noexcept { return counts_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return sizeof(*this) + counts_.size() * sizeof(std::uint64_t);
  }
  [[nodiscard]] bool same_geometry(const Histogram& o) const noexcept {
    return lowest_ == o.lowest_ && highest_ == o.highest_ && digits_ == o.digits_;
  }

  // Equivalence ranges: values in one bucket are counted together.
  [[nodiscard]] std::uint64_t lowest_equivalent(std::uint64_t v) const noexcept;
  [[nodiscard]] std::uint64_t highest_equivalent(std::uint64_t v) const noexcept;
  [[nodiscard]] std::uint64_t median_equivalent(std::uint64_t v) const noexcept;
  [[nodiscard]] std::uint64_t equivalent_range(std::uint64_t v) const noexcept;

  bool operator==(const Histogram&) const = default;

 private:
  __extension__ typedef unsigned __int128 U128;

  [[nodiscard]] int bucket_index(std::uint64_t v) const noexcept {
    return leading_zero_count_base_ - std::countl_zero(v | sub_bucket_mask_);
  }
  [[nodiscard]] std::size_t index_of(std::uint64_t v) const noexcept {
    const int b = bucket_index(v);
    const auto sub = static_cast<std::size_t>(v >> (b + unit_magnitude_));
    return (static_cast<std::size_t>(b + 1) << sub_bucket_half_count_magnitude_) + sub -
           static_cast<std::size_t>(sub_bucket_half_count_);
  }
  [[nodiscard]] std::uint64_t value_from_index(std::size_t index) const noexcept;
  // [first, last) indices that can hold counts: those of the (clamped) min and max. Keeps
  // reset() and the scans proportional to the recorded range, not to the whole array.
  struct Range {
    std::size_t lo, hi;
  };
  [[nodiscard]] Range used_range() const noexcept {
    if (total_ == 0) return {0, 0};
    return {index_of(min_ < highest_ ? min_ : highest_),
            index_of(max_ < highest_ ? max_ : highest_) + 1};
  }

  // Hot fields first: record() touches these and one counts_ element.
  std::vector<std::uint64_t> counts_;
  std::uint64_t total_ = 0;
  std::uint64_t overflow_ = 0;
  std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t max_ = 0;
  U128 sum_ = 0;
  std::uint64_t highest_ = 0;
  std::uint64_t sub_bucket_mask_ = 0;
  int leading_zero_count_base_ = 0;
  int unit_magnitude_ = 0;
  int sub_bucket_half_count_magnitude_ = 0;
  int sub_bucket_half_count_ = 0;
  int sub_bucket_count_ = 0;
  int bucket_count_ = 0;
  int digits_ = 0;
  std::uint64_t lowest_ = 0;
};

}  // namespace tickrail
