#include <algorithm>
#include <sstream>
#include <vector>

#include "format.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/report.hpp"

namespace tickrail {

using report_detail::java_fixed;
using report_detail::integer;
using report_detail::pad_left;

// Mirrors AbstractHistogram.outputPercentileDistribution (HdrHistogram Java), whose formats are
//   "%12s %14s %10s %14s\n\n"                  header
//   "%12.<digits>f %2.12f %10d %14.2f\n"        each level below 100%
//   "%12.<digits>f %2.12f %10d\n"               the 100% level
// and a three-line footer, numbers formatted as Java's Formatter does. Mean, StdDeviation and
// Max are HdrHistogram's too: from bucket midpoints, and the highest value equivalent to the
// largest recorded one.
// One departure: Java's "%12" lets a wider value (1e8 ns and up with 3 digits) fill the column
// and lose its leading blank, and plotters that match rows by leading whitespace (hdr-plot,
// plotFiles.html) then drop those rows. The Value and TotalCount columns here widen to their
// longest entry (Value plus one blank), so every row starts with a blank and the columns stay aligned;
// output that fits in Java's widths is unchanged.
void write_hgrm(std::ostream& out, const Histogram& h, double ratio, int steps_per_half_distance) {
  if (!(ratio > 0.0)) {
    throw Error(Errc::invalid_argument,
                "hgrm output: value unit scaling ratio " + std::to_string(ratio) + " must be > 0");
  }
  const int d = h.significant_digits();
  const std::vector<PercentileStep> steps = h.percentiles(steps_per_half_distance);
  int value_width = 12;
  int count_width = 10;
  for (const PercentileStep& s : steps) {
    const int v = static_cast<int>(java_fixed(static_cast<double>(s.value) / ratio, d).size());
    const int c = static_cast<int>(integer(s.total_count).size());
    value_width = std::max(value_width, v + 1);
    count_width = std::max(count_width, c);  // a literal blank already precedes it
  }
  out << pad_left("Value", static_cast<std::size_t>(value_width)) << ' ' << pad_left("Percentile", 14)
      << ' ' << pad_left("TotalCount", static_cast<std::size_t>(count_width)) << ' '
      << pad_left("1/(1-Percentile)", 14) << "\n\n";
  for (const PercentileStep& s : steps) {
    const double p = s.percentile / 100.0;
    out << java_fixed(static_cast<double>(s.value) / ratio, d, value_width) << ' '
        << java_fixed(p, 12, 2) << ' ' << integer(s.total_count, count_width);
    if (s.percentile != 100.0) out << ' ' << java_fixed(1.0 / (1.0 - p), 2, 14);
    out << '\n';
  }
  const double max = h.empty() ? 0.0 : static_cast<double>(h.highest_equivalent(h.max()));
  out << "#[Mean    = " << java_fixed(h.bucket_mean() / ratio, d, 12)
      << ", StdDeviation   = " << java_fixed(h.stdev() / ratio, d, 12) << "]\n";
  out << "#[Max     = " << java_fixed(max / ratio, d, 12) << ", Total count    = "
      << integer(h.count(), 12) << "]\n";
  out << "#[Buckets = " << integer(static_cast<std::uint64_t>(h.bucket_count()), 12)
      << ", SubBuckets     = " << integer(static_cast<std::uint64_t>(h.sub_bucket_count()), 12)
      << "]\n";
}

std::string format_hgrm(const Histogram& h, double ratio, int steps_per_half_distance) {
  std::ostringstream out;
  write_hgrm(out, h, ratio, steps_per_half_distance);
  return out.str();
}

}  // namespace tickrail
