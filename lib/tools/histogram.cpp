#include "tickrail/tools/histogram.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "tickrail/error.hpp"

namespace tickrail {

Histogram::Histogram(const HistogramConfig& config)
    : lowest_(config.lowest_discernible) {
  const auto where = [&] {
    return "histogram(lowest " + std::to_string(config.lowest_discernible) + ", highest " +
           std::to_string(config.highest_trackable) + ", digits " +
           std::to_string(config.significant_digits) + ")";
  };
  if (config.lowest_discernible < 1) {
    throw Error(Errc::invalid_argument, where() + ": lowest discernible value must be >= 1");
  }
  if (config.significant_digits < 0 || config.significant_digits > 5) {
    throw Error(Errc::invalid_argument, where() + ": significant digits must be 0..5");
  }
  if (config.highest_trackable / 2 < config.lowest_discernible ||
      config.highest_trackable > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw Error(Errc::invalid_argument,
                where() + ": highest trackable value must be >= 2 * lowest and < 2^63");
  }
  highest_ = config.highest_trackable;
  digits_ = config.significant_digits;

  // Single-unit resolution up to 2 * 10^digits: that many linear sub-buckets per bucket,
  // rounded up to a power of two.
  std::uint64_t largest_single_unit = 2;
  for (int i = 0; i < digits_; ++i) largest_single_unit *= 10;
  int sub_bucket_count_magnitude = 0;
  while ((std::uint64_t{1} << sub_bucket_count_magnitude) < largest_single_unit) {
    ++sub_bucket_count_magnitude;
  }
  unit_magnitude_ = 63 - std::countl_zero(lowest_);
  sub_bucket_half_count_magnitude_ = std::max(sub_bucket_count_magnitude, 1) - 1;
  if (unit_magnitude_ + sub_bucket_half_count_magnitude_ > 61) {
    throw Error(Errc::invalid_argument, where() + ": lowest value and digits too large together");
  }
  sub_bucket_count_ = 1 << (sub_bucket_half_count_magnitude_ + 1);
  sub_bucket_half_count_ = sub_bucket_count_ / 2;
  sub_bucket_mask_ = (static_cast<std::uint64_t>(sub_bucket_count_) - 1) << unit_magnitude_;
  leading_zero_count_base_ = 64 - unit_magnitude_ - sub_bucket_half_count_magnitude_ - 1;

  // Buckets needed so that highest_ falls inside the last one.
  std::uint64_t smallest_untrackable = static_cast<std::uint64_t>(sub_bucket_count_) << unit_magnitude_;
  int buckets = 1;
  while (smallest_untrackable <= highest_) {
    if (smallest_untrackable > (std::numeric_limits<std::uint64_t>::max() >> 2)) {
      ++buckets;
      break;
    }
    smallest_untrackable <<= 1;
    ++buckets;
  }
  bucket_count_ = buckets;
  counts_.assign(static_cast<std::size_t>(bucket_count_ + 1) *
                     static_cast<std::size_t>(sub_bucket_half_count_),
                 0);
}

std::uint64_t Histogram::value_from_index(std::size_t index) const noexcept {
  int bucket = static_cast<int>(index >> sub_bucket_half_count_magnitude_) - 1;
  auto sub = static_cast<std::uint64_t>(index & static_cast<std::size_t>(sub_bucket_half_count_ - 1)) +
             static_cast<std::uint64_t>(sub_bucket_half_count_);
  if (bucket < 0) {
    sub -= static_cast<std::uint64_t>(sub_bucket_half_count_);
    bucket = 0;
  }
  return sub << (bucket + unit_magnitude_);
}

std::uint64_t Histogram::equivalent_range(std::uint64_t v) const noexcept {
  const int bucket = bucket_index(v);
  const std::uint64_t sub = v >> (bucket + unit_magnitude_);
  const int adjusted = sub >= static_cast<std::uint64_t>(sub_bucket_count_) ? bucket + 1 : bucket;
  return std::uint64_t{1} << (unit_magnitude_ + adjusted);
}

std::uint64_t Histogram::lowest_equivalent(std::uint64_t v) const noexcept {
  const int bucket = bucket_index(v);
  const std::uint64_t sub = v >> (bucket + unit_magnitude_);
  return sub << (bucket + unit_magnitude_);
}

std::uint64_t Histogram::highest_equivalent(std::uint64_t v) const noexcept {
  return lowest_equivalent(v) + equivalent_range(v) - 1;
}

std::uint64_t Histogram::median_equivalent(std::uint64_t v) const noexcept {
  return lowest_equivalent(v) + (equivalent_range(v) >> 1);
}

void Histogram::merge(const Histogram& other) {
  if (!same_geometry(other)) {
    throw Error(Errc::geometry_mismatch,
                "merge histograms: geometry (lowest " + std::to_string(other.lowest_) +
                    ", highest " + std::to_string(other.highest_) + ", digits " +
                    std::to_string(other.digits_) + ") differs from (lowest " +
                    std::to_string(lowest_) + ", highest " + std::to_string(highest_) +
                    ", digits " + std::to_string(digits_) + ")");
  }
  if (other.total_ == 0) return;
  const auto [lo, hi] = other.used_range();
  for (std::size_t i = lo; i < hi; ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
  overflow_ += other.overflow_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void Histogram::reset() noexcept {
  // Only the recorded range: a per-second reset in a measuring loop stays short.
  const auto [lo, hi] = used_range();
  std::fill(counts_.begin() + static_cast<std::ptrdiff_t>(lo),
            counts_.begin() + static_cast<std::ptrdiff_t>(hi), 0);
  total_ = 0;
  overflow_ = 0;
  sum_ = 0;
  min_ = std::numeric_limits<std::uint64_t>::max();
  max_ = 0;
}

double Histogram::mean() const noexcept {
  if (total_ == 0) return 0.0;
  return static_cast<double>(sum_) / static_cast<double>(total_);
}

double Histogram::bucket_mean() const noexcept {
  if (total_ == 0) return 0.0;
  double weighted = 0.0;
  const auto [lo, hi] = used_range();
  for (std::size_t i = lo; i < hi; ++i) {
    if (counts_[i] != 0) {
      weighted += static_cast<double>(median_equivalent(value_from_index(i))) *
                  static_cast<double>(counts_[i]);
    }
  }
  return weighted / static_cast<double>(total_);
}

double Histogram::stdev() const noexcept {
  if (total_ == 0) return 0.0;
  // Deviation of bucket midpoints around their own mean (HdrHistogram's getStdDeviation), so
  // that a constant sample has 0.
  const double m = bucket_mean();
  double sq = 0.0;
  const auto [lo, hi] = used_range();
  for (std::size_t i = lo; i < hi; ++i) {
    if (counts_[i] != 0) {
      const double d = static_cast<double>(median_equivalent(value_from_index(i))) - m;
      sq += d * d * static_cast<double>(counts_[i]);
    }
  }
  return std::sqrt(sq / static_cast<double>(total_));
}

std::uint64_t Histogram::value_at_percentile(double p) const noexcept {
  if (total_ == 0) return 0;
  // As HdrHistogram: step just below p so that p exactly on a boundary picks that bucket.
  const double requested =
      std::clamp(std::nextafter(p, -std::numeric_limits<double>::infinity()), 0.0, 100.0);
  const double fp_count = requested / 100.0 * static_cast<double>(total_);
  auto target = static_cast<std::uint64_t>(std::ceil(fp_count));
  target = std::max<std::uint64_t>(target, 1);
  std::uint64_t running = 0;
  const auto [lo, hi] = used_range();
  for (std::size_t i = lo; i < hi; ++i) {
    running += counts_[i];
    if (running >= target) {
      const std::uint64_t v = value_from_index(i);
      return p <= 0.0 ? lowest_equivalent(v) : highest_equivalent(v);
    }
  }
  return 0;
}

std::uint64_t Histogram::count_at(std::uint64_t value) const noexcept {
  return counts_[index_of(std::min(value, highest_))];
}

std::vector<PercentileStep> Histogram::percentiles(int steps_per_half_distance) const {
  if (steps_per_half_distance < 1) {
    throw Error(Errc::invalid_argument, "histogram percentiles: steps per half distance " +
                                            std::to_string(steps_per_half_distance) + " < 1");
  }
  std::vector<PercentileStep> out;
  if (total_ == 0) return out;
  // HdrHistogram's PercentileIterator, step for step: levels start at 0 and approach 100 with
  // `steps_per_half_distance` steps per halving of the remaining distance; a level is reported
  // at the first non-empty bucket whose cumulative percentage reaches it; one last step reports
  // 100%.
  const double total = static_cast<double>(total_);
  double level = 0.0;
  bool reached_last = false;
  std::uint64_t running = 0;
  std::size_t i = 0;
  bool fresh = true;
  for (;;) {
    if (running >= total_) {
      if (reached_last) break;
      level = 100.0;
      reached_last = true;
    }
    bool emitted = false;
    while (i < counts_.size()) {
      const std::uint64_t c = counts_[i];
      if (fresh) {
        running += c;
        fresh = false;
      }
      if (c != 0 && 100.0 * static_cast<double>(running) / total >= level) {
        out.push_back({highest_equivalent(value_from_index(i)), level, running});
        if (level < 100.0) {
          const auto halvings =
              static_cast<std::int64_t>(std::log(100.0 / (100.0 - level)) / std::log(2.0)) + 1;
          const std::int64_t reporting_steps =
              steps_per_half_distance *
              static_cast<std::int64_t>(std::pow(2.0, static_cast<double>(halvings)));
          level += 100.0 / static_cast<double>(reporting_steps);
        }
        emitted = true;
        break;
      }
      ++i;
      fresh = true;
    }
    if (!emitted) break;
  }
  return out;
}

}  // namespace tickrail
