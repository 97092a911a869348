// Renderings of a latency Histogram whose values are nanoseconds: a text table, JSON,
// HdrHistogram's percentile-distribution text (.hgrm) and an SVG percentile plot.
// Control plane: these allocate and format.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tickrail/tools/histogram.hpp"

namespace tickrail {

// The figures every report shows, in floating point, values in ns.
struct Summary {
  std::uint64_t count = 0;
  std::uint64_t lost = 0;      // samples that never arrived (gaps, laps), passed in by the caller
  std::uint64_t overflow = 0;  // samples above the histogram's range, counted at its top
  double min_ns = 0, p50_ns = 0, mean_ns = 0, stdev_ns = 0, p90_ns = 0, p99_ns = 0,
         p999_ns = 0, p9999_ns = 0, max_ns = 0;
};

// Percentiles are HdrHistogram's value_at_percentile(), capped at the exact max: the top
// bucket's highest equivalent value can exceed the largest value actually recorded.
[[nodiscard]] Summary summarize(const Histogram& h, std::uint64_t lost = 0);

// (a) Text table: a header line, one row per series, and a note when any series overflowed.
//   series         count     lost      min      p50     mean    stdev      p90 ...      max
//   latency      1000000        0     62.0     81.0     84.3     11.2     95.0 ...  18330.0
struct TableRow {
  std::string name;
  Summary summary;
};
[[nodiscard]] std::string format_table(std::span<const TableRow> rows);
[[nodiscard]] std::string format_table(const Histogram& h, std::uint64_t lost = 0,
                                       std::string_view name = "latency");

// (b) JSON object with count, lost, overflow, min_ns, p50_ns, mean_ns, stdev_ns, p90_ns,
// p99_ns, p999_ns, p9999_ns, max_ns. Add keys to the returned object, or pass them as `extra`
// (merged last, so they may also replace a key).
[[nodiscard]] nlohmann::json to_json(const Summary& s);
[[nodiscard]] std::string format_json(const Histogram& h, std::uint64_t lost = 0,
                                      const nlohmann::json& extra = nlohmann::json::object());

// (c) HdrHistogram's outputPercentileDistribution text, byte for byte (tested against the
// output of HdrHistogram Java 2.1.11): the "Value Percentile TotalCount 1/(1-Percentile)" table
// iterated with `steps_per_half_distance` steps, values divided by `value_unit_scaling_ratio`
// (1000 prints microseconds from ns), then the #[Mean/StdDeviation], #[Max/Total count],
// #[Buckets/SubBuckets] footer with HdrHistogram's figures (bucket_mean(), stdev(), the highest
// value equivalent to max()).
void write_hgrm(std::ostream& out, const Histogram& h, double value_unit_scaling_ratio = 1.0,
                int steps_per_half_distance = 5);
[[nodiscard]] std::string format_hgrm(const Histogram& h, double value_unit_scaling_ratio = 1.0,
                                      int steps_per_half_distance = 5);

// (d) Self-contained SVG in HdrHistogram's percentile-distribution style: latency (y, log scale,
// ticks in ns/us/ms/s) by percentile on a "nines" x axis (0%, 90%, 99%, 99.9%, ... as far as
// the largest series has samples for). One step line per named series, in its own colour, and
// a legend with each series' sample count, p50 and max. The first series is the one reported:
// it gets markers labelled with its p50, p99, p99.9, p99.99 and max. Under the title: its
// sample count, the host, the clock and the date (UTC).
// Structure, for tools and tests: each series is a <g class="series" data-name="...">, each
// marker a <g class="marker" data-label="p99.9" data-ns="...">, each y tick a
// <g class="y-tick" data-ns="..."> whose line sits at data-y.
struct SvgSeries {
  std::string name;
  const Histogram* histogram;  // values in ns; must outlive the call
};
struct SvgOptions {
  std::string title = "Latency by percentile";
  std::string y_label = "latency";
  std::string host;   // empty: this host's name
  std::string clock;  // e.g. Clock::describe(); empty: not shown
  std::string when;   // empty: the time of the call, "YYYY-MM-DD hh:mm:ss UTC"
  int width = 1000;
  int height = 600;
};
[[nodiscard]] std::string format_svg(std::span<const SvgSeries> series,
                                     const SvgOptions& options = {});

// Writes text to a file (replacing it). Throws Error naming the path.
void write_text_file(const std::string& path, std::string_view text);
// Writes text to `path` through a temporary file in the same directory (<path>.tmp.<pid>) and a
// rename, so a reader polling the path (node exporter's textfile collector) sees the old file
// or the new one, never half of one. The temporary is removed when a step fails. Throws Error.
void write_text_file_atomically(const std::string& path, std::string_view text);

}  // namespace tickrail
