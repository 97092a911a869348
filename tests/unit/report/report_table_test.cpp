#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "tickrail/tools/report.hpp"

using namespace tickrail;

namespace {

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  std::string s;
  while (in >> s) w.push_back(s);
  return w;
}

}  // namespace

TEST_CASE("summaryMatchesTheHistogram") {
  Histogram h;
  for (std::uint64_t v = 1; v <= 1000; ++v) h.record(v);
  const Summary s = summarize(h, 7);
  REQUIRE(s.count == 1000);
  REQUIRE(s.lost == 7);
  REQUIRE(s.overflow == 0);
  REQUIRE(s.min_ns == 1.0);
  REQUIRE(s.p50_ns == 500.0);
  REQUIRE(s.mean_ns == 500.5);
  REQUIRE(s.stdev_ns == Approx(288.6749).epsilon(1e-6));
  REQUIRE(s.p90_ns == 900.0);
  REQUIRE(s.p99_ns == 990.0);
  REQUIRE(s.p999_ns == 999.0);
  REQUIRE(s.p9999_ns == 1000.0);
  REQUIRE(s.max_ns == 1000.0);
}

TEST_CASE("summaryPercentilesNeverExceedTheExactMax") {
  Histogram h;
  h.record(5000);  // bucket [5000, 5003]
  const Summary s = summarize(h);
  REQUIRE(h.value_at_percentile(50.0) == 5003);
  REQUIRE(s.p50_ns == 5000.0);
  REQUIRE(s.p9999_ns == 5000.0);
  REQUIRE(s.max_ns == 5000.0);
  const Summary empty = summarize(Histogram());
  REQUIRE(empty.count == 0);
  REQUIRE(empty.max_ns == 0.0);
}

TEST_CASE("tableShowsEveryFigureOfEachSeries") {
  Histogram lat;
  for (std::uint64_t v = 1; v <= 1000; ++v) lat.record(v);
  Histogram gaps;
  gaps.record(250);
  gaps.record(1'000'000);
  const std::vector<TableRow> rows = {{"latency", summarize(lat, 3)}, {"poll_gap", summarize(gaps)}};
  const std::string t = format_table(rows);
  INFO(t);
  std::istringstream in(t);
  std::string header, row1, row2;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  REQUIRE(split_ws(header) == std::vector<std::string>{"series", "count", "lost", "min", "p50", "mean",
                                                        "stdev", "p90", "p99", "p99.9", "p99.99", "max"});
  REQUIRE(split_ws(row1) == std::vector<std::string>{"latency", "1000", "3", "1.0", "500.0", "500.5",
                                                      "288.7", "900.0", "990.0", "999.0", "1000.0",
                                                      "1000.0"});
  const auto r2 = split_ws(row2);
  REQUIRE(r2.size() == 12);
  REQUIRE(r2[0] == "poll_gap");
  REQUIRE(r2[1] == "2");
  REQUIRE(r2[3] == "250.0");
  REQUIRE(r2[5] == "500125.0");
  REQUIRE(r2[11] == "1000000.0");
  // Columns line up: every row is as long as the header's last column end.
  REQUIRE(row1.size() == header.size());
  REQUIRE(t.find("note:") == std::string::npos);
}

TEST_CASE("tableNotesOverflowedSamples") {
  Histogram h(1, 1000, 3);
  h.record(10);
  h.record(5000);
  const std::string t = format_table(h, 0, "lat");
  INFO(t);
  REQUIRE(t.find("note: lat: 1 samples above the histogram's range") != std::string::npos);
  REQUIRE(t.find("5000.0") != std::string::npos);  // the exact max still shows
}
