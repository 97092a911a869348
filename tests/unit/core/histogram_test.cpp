#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/tools/histogram.hpp"

using namespace tickrail;

// Counts heap allocations so a test can prove record() makes none. Sanitizer runtimes own the
// global operator new (TSan's does not link beside a replacement; ASan's nothrow and array forms
// would pair with our delete), so there it is not replaced.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TICKRAIL_COUNT_NEW 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TICKRAIL_COUNT_NEW 0
#endif
#endif
#ifndef TICKRAIL_COUNT_NEW
#define TICKRAIL_COUNT_NEW 1
#endif
namespace {
std::atomic<std::uint64_t> g_allocations{0};
}
#if TICKRAIL_COUNT_NEW
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

// A percentile as an exact fraction: num / (100 * den) of the samples.
struct Pct {
  std::uint64_t num;
  std::uint64_t den;
  [[nodiscard]] double value() const { return static_cast<double>(num) / static_cast<double>(den); }
};
const std::vector<Pct> kPercentiles = {{1, 10},   {1, 1},     {10, 1},     {25, 1},
                                       {50, 1},   {75, 1},    {90, 1},     {99, 1},
                                       {999, 10}, {9999, 100}, {99999, 1000}, {100, 1}};

// Nearest rank: the smallest sample with at least p% of the samples at or below it.
std::uint64_t exact_percentile(const std::vector<std::uint64_t>& sorted, Pct p) {
  const std::uint64_t n = sorted.size();
  std::uint64_t rank = (p.num * n + 100 * p.den - 1) / (100 * p.den);
  rank = std::max<std::uint64_t>(rank, 1);
  return sorted[rank - 1];
}

void check_accuracy(const std::vector<std::uint64_t>& samples, int digits) {
  Histogram h(1, 3'600'000'000'000ULL, digits);
  for (const auto v : samples) h.record(v);
  std::vector<std::uint64_t> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  const double tolerance = std::pow(10.0, -digits);
  for (const Pct p : kPercentiles) {
    const std::uint64_t exact = exact_percentile(sorted, p);
    const std::uint64_t got = h.value_at_percentile(p.value());
    INFO("p" << p.value() << " exact " << exact << " histogram " << got << " digits " << digits);
    REQUIRE(got >= exact);  // the highest equivalent value of exact's bucket
    REQUIRE(static_cast<double>(got - exact) <= tolerance * static_cast<double>(exact));
    REQUIRE(h.lowest_equivalent(got) == h.lowest_equivalent(exact));
  }
  REQUIRE(h.count() == samples.size());
  REQUIRE(h.min() == sorted.front());
  REQUIRE(h.max() == sorted.back());

  long double sum = 0;
  for (const auto v : samples) sum += static_cast<long double>(v);
  const long double mean = sum / static_cast<long double>(samples.size());
  REQUIRE(h.mean() == Approx(static_cast<double>(mean)).epsilon(1e-12));
  long double sq = 0;
  for (const auto v : samples) sq += (static_cast<long double>(v) - mean) * (static_cast<long double>(v) - mean);
  const auto sd = static_cast<double>(std::sqrt(sq / static_cast<long double>(samples.size())));
  REQUIRE(h.stdev() == Approx(sd).epsilon(tolerance));
}

std::vector<std::uint64_t> uniform_samples(std::size_t n) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::uint64_t> d(1, 1'000'000);
  std::vector<std::uint64_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<std::uint64_t> exponential_samples(std::size_t n) {
  std::mt19937_64 rng(2);
  std::exponential_distribution<double> d(1.0 / 10'000.0);
  std::vector<std::uint64_t> v(n);
  for (auto& x : v) x = static_cast<std::uint64_t>(d(rng)) + 1;
  return v;
}

// A fast mode near 800 ns and a 1% slow mode near 50 us: the shape of a jittery consumer.
std::vector<std::uint64_t> bimodal_samples(std::size_t n) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> fast(800.0, 40.0);
  std::normal_distribution<double> slow(50'000.0, 5'000.0);
  std::bernoulli_distribution is_slow(0.01);
  std::vector<std::uint64_t> v(n);
  for (auto& x : v) x = static_cast<std::uint64_t>(std::max(1.0, is_slow(rng) ? slow(rng) : fast(rng)));
  return v;
}

}  // namespace

TEST_CASE("histogramGeometryMatchesHdrHistogram") {
  const Histogram h(1, 3'600'000'000ULL, 3);
  REQUIRE(h.sub_bucket_count() == 2048);
  REQUIRE(h.bucket_count() == 22);
  REQUIRE(h.counts_length() == 23u * 1024u);
  const Histogram two(1, 3'600'000'000ULL, 2);
  REQUIRE(two.sub_bucket_count() == 256);
  const Histogram def;
  REQUIRE(def.significant_digits() == 3);
  REQUIRE(def.highest_trackable() == 3'600'000'000'000ULL);
  REQUIRE(def.bucket_count() == 32);
  REQUIRE(def.memory_bytes() < 300 * 1024);
}

TEST_CASE("histogramRejectsImpossibleGeometry") {
  const auto code = [](auto&& make) {
    try {
      make();
    } catch (const Error& e) {
      return e.code();
    }
    return std::error_code();
  };
  REQUIRE(code([] { Histogram h(0, 1000, 3); }) == Errc::invalid_argument);
  REQUIRE(code([] { Histogram h(1, 1000, 6); }) == Errc::invalid_argument);
  REQUIRE(code([] { Histogram h(1, 1000, -1); }) == Errc::invalid_argument);
  REQUIRE(code([] { Histogram h(100, 150, 3); }) == Errc::invalid_argument);
  REQUIRE(code([] { Histogram h(1, std::numeric_limits<std::uint64_t>::max(), 3); }) ==
          Errc::invalid_argument);
}

TEST_CASE("histogramRecordsValuesBelowTwiceTenToTheDigitsExactly") {
  Histogram h;
  for (std::uint64_t v = 0; v < 2048; ++v) h.record(v);
  for (std::uint64_t v = 0; v < 2048; ++v) REQUIRE(h.count_at(v) == 1);
  REQUIRE(h.value_at_percentile(100.0) == 2047);
  REQUIRE(h.value_at_percentile(50.0) == 1023);
  REQUIRE(h.min() == 0);
  REQUIRE(h.max() == 2047);
}

TEST_CASE("histogramPercentilesMatchSortedSamplesForUniformData") {
  const auto s = uniform_samples(200'000);
  check_accuracy(s, 3);
  check_accuracy(s, 2);
}

TEST_CASE("histogramPercentilesMatchSortedSamplesForExponentialData") {
  const auto s = exponential_samples(200'000);
  check_accuracy(s, 3);
  check_accuracy(s, 2);
}

TEST_CASE("histogramPercentilesMatchSortedSamplesForBimodalData") {
  const auto s = bimodal_samples(200'000);
  check_accuracy(s, 3);
  check_accuracy(s, 4);
}

TEST_CASE("histogramMergeOfPerThreadHistogramsEqualsOneHistogram") {
  const auto s = bimodal_samples(100'000);
  Histogram whole;
  for (const auto v : s) whole.record(v);

  constexpr int kThreads = 4;
  std::vector<Histogram> parts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < s.size(); i += kThreads) parts[static_cast<std::size_t>(t)].record(s[i]);
    });
  }
  for (auto& th : threads) th.join();
  Histogram merged;
  for (const auto& p : parts) merged.merge(p);
  REQUIRE(merged == whole);
  REQUIRE(merged.count() == s.size());
  REQUIRE(merged.value_at_percentile(99.9) == whole.value_at_percentile(99.9));
  REQUIRE(merged.mean() == whole.mean());

  Histogram other(1, 1'000'000, 3);
  try {
    merged.merge(other);
    FAIL("merge of another geometry must throw");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::geometry_mismatch);
  }
}

TEST_CASE("histogramEmptyReportsZeros") {
  const Histogram h;
  REQUIRE(h.empty());
  REQUIRE(h.count() == 0);
  REQUIRE(h.min() == 0);
  REQUIRE(h.max() == 0);
  REQUIRE(h.mean() == 0.0);
  REQUIRE(h.stdev() == 0.0);
  REQUIRE(h.value_at_percentile(50.0) == 0);
  REQUIRE(h.percentiles().empty());
}

TEST_CASE("histogramSingleValue") {
  Histogram h;
  h.record(12'345);
  REQUIRE(h.min() == 12'345);
  REQUIRE(h.max() == 12'345);
  REQUIRE(h.mean() == 12'345.0);
  REQUIRE(h.stdev() == 0.0);
  REQUIRE(h.value_at_percentile(0.0) == h.lowest_equivalent(12'345));
  REQUIRE(h.value_at_percentile(50.0) == h.highest_equivalent(12'345));
  REQUIRE(h.value_at_percentile(100.0) == h.highest_equivalent(12'345));
  REQUIRE(h.highest_equivalent(12'345) >= 12'345);
  REQUIRE(h.highest_equivalent(12'345) - 12'345 < 13);  // within 1e-3
}

TEST_CASE("histogramHighestTrackableValueIsRecordedWithoutOverflow") {
  Histogram h(1, 1'000'000, 3);
  h.record(1'000'000);
  REQUIRE(h.overflow_count() == 0);
  REQUIRE(h.count_at(1'000'000) == 1);
  REQUIRE(h.value_at_percentile(100.0) == h.highest_equivalent(1'000'000));
}

TEST_CASE("histogramClampsAndCountsOverflowNeverDropsIt") {
  Histogram h(1, 1'000'000, 3);
  h.record(10);
  h.record(1'000'001);
  h.record(std::numeric_limits<std::uint64_t>::max());
  REQUIRE(h.count() == 3);
  REQUIRE(h.overflow_count() == 2);
  REQUIRE(h.count_at(1'000'000) == 2);
  REQUIRE(h.max() == std::numeric_limits<std::uint64_t>::max());  // exact, not clamped
  REQUIRE(h.value_at_percentile(100.0) == h.highest_equivalent(1'000'000));
  REQUIRE(h.mean() == Approx((10.0 + 2 * 1'000'000.0) / 3.0));
}

TEST_CASE("histogramRecordNCountsNTimes") {
  Histogram h;
  h.record_n(500, 0);
  REQUIRE(h.empty());
  h.record_n(500, 1000);
  h.record_n(9000, 10);
  REQUIRE(h.count() == 1010);
  REQUIRE(h.value_at_percentile(99.0) == 500);
  REQUIRE(h.value_at_percentile(99.1) == h.highest_equivalent(9000));
  REQUIRE(h.mean() == Approx((500.0 * 1000 + 9000.0 * 10) / 1010.0));
}

TEST_CASE("histogramResetReturnsToEmpty") {
  Histogram h;
  for (std::uint64_t v = 1; v < 100'000; v += 7) h.record(v);
  h.record(std::numeric_limits<std::uint64_t>::max());
  h.reset();
  REQUIRE(h == Histogram());
  h.record(3);
  REQUIRE(h.min() == 3);
  REQUIRE(h.max() == 3);
}

TEST_CASE("histogramPercentileIterationFollowsHdrHistogramLevels") {
  Histogram h;
  for (std::uint64_t v = 1; v <= 10'000; ++v) h.record(v);
  const auto steps = h.percentiles(5);
  REQUIRE(steps.size() > 20);
  const double levels[] = {0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80};
  for (std::size_t i = 0; i < std::size(levels); ++i) {
    INFO("step " << i);
    REQUIRE(steps[i].percentile == Approx(levels[i]).margin(1e-9));
  }
  REQUIRE(steps[0].value == 1);
  REQUIRE(steps[1].value == 1000);
  REQUIRE(steps[1].total_count == 1000);
  REQUIRE(steps[5].value == h.highest_equivalent(5000));
  for (std::size_t i = 1; i < steps.size(); ++i) {
    REQUIRE(steps[i].percentile > steps[i - 1].percentile);
    REQUIRE(steps[i].value >= steps[i - 1].value);
    REQUIRE(steps[i].total_count >= steps[i - 1].total_count);
  }
  REQUIRE(steps.back().percentile == 100.0);
  REQUIRE(steps.back().total_count == 10'000);
  REQUIRE(steps.back().value == h.highest_equivalent(10'000));
  REQUIRE_THROWS_AS(h.percentiles(0), Error);
}

TEST_CASE("histogramRecordDoesNotAllocate") {
  if (!TICKRAIL_COUNT_NEW) {
    WARN("operator new is the sanitizer's in this build: allocations not counted");
    return;
  }
  Histogram h;
  const auto s = exponential_samples(10'000);
  const std::uint64_t before = g_allocations.load();
  for (const auto v : s) h.record(v);
  h.record(std::numeric_limits<std::uint64_t>::max());
  h.record_n(7, 3);
  const std::uint64_t after = g_allocations.load();
  REQUIRE(after == before);
  REQUIRE(h.count() == s.size() + 4);
}
