#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "tools/report/format.hpp"
#include "tickrail/tools/report.hpp"

using namespace tickrail;

namespace {

// HdrHistogram Java's format strings, applied with printf (C locale) to hand-derived rows.
std::string java_row(double value, double percentile, unsigned long long count, bool last) {
  char buf[128];
  if (last) {
    std::snprintf(buf, sizeof buf, "%12.3f %2.12f %10llu\n", value, percentile, count);
  } else {
    std::snprintf(buf, sizeof buf, "%12.3f %2.12f %10llu %14.2f\n", value, percentile, count,
                  1.0 / (1.0 - percentile));
  }
  return buf;
}

struct Row {
  double value;
  double percentile;
  std::uint64_t total;
};

std::vector<Row> parse_rows(const std::string& text, std::vector<std::string>& footer) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "       Value     Percentile TotalCount 1/(1-Percentile)");
  std::getline(in, line);
  REQUIRE(line.empty());
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    if (line.rfind("#[", 0) == 0) {
      footer.push_back(line);
      continue;
    }
    Row r{};
    double inv = 0;
    const int n = std::sscanf(line.c_str(), "%lf %lf %lu %lf", &r.value, &r.percentile, &r.total, &inv);
    REQUIRE(n >= 3);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

// Values 1..4: levels 0,10,..,50 then 55..75 by 5, then 77.5, then the final 100% step.
TEST_CASE("hgrmMatchesHdrHistogramForASmallDistribution") {
  Histogram h;
  for (std::uint64_t v = 1; v <= 4; ++v) h.record(v);
  std::string expect = "       Value     Percentile TotalCount 1/(1-Percentile)\n\n";
  const struct {
    double v, p;
    unsigned long long c;
  } rows[] = {{1, 0.0, 1},  {1, 0.1, 1},  {1, 0.2, 1},  {2, 0.3, 2},  {2, 0.4, 2},
              {2, 0.5, 2},  {3, 0.55, 3}, {3, 0.6, 3},  {3, 0.65, 3}, {3, 0.7, 3},
              {3, 0.75, 3}, {4, 0.775, 4}};
  for (const auto& r : rows) expect += java_row(r.v, r.p, r.c, false);
  expect += java_row(4, 1.0, 4, true);
  expect += "#[Mean    =        2.500, StdDeviation   =        1.118]\n";
  expect += "#[Max     =        4.000, Total count    =            4]\n";
  expect += "#[Buckets =           32, SubBuckets     =         2048]\n";
  REQUIRE(format_hgrm(h) == expect);
}

TEST_CASE("hgrmScalesValuesAndParsesBack") {
  Histogram h;
  for (std::uint64_t i = 0; i < 100'000; ++i) h.record(500 + (i * 7919) % 20'000 + (i % 1000 == 0 ? 900'000 : 0));
  std::vector<std::string> footer;
  const std::string text = format_hgrm(h, 1000.0);
  const auto rows = parse_rows(text, footer);
  REQUIRE(rows.size() > 50);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    REQUIRE(rows[i].percentile >= rows[i - 1].percentile);
    REQUIRE(rows[i].value >= rows[i - 1].value);
    REQUIRE(rows[i].total >= rows[i - 1].total);
  }
  REQUIRE(rows.front().percentile == 0.0);
  REQUIRE(rows.back().percentile == 1.0);
  REQUIRE(rows.back().total == h.count());
  REQUIRE(rows.back().value == Approx(static_cast<double>(h.highest_equivalent(h.max())) / 1000.0).margin(0.0005));
  REQUIRE(footer.size() == 3);
  REQUIRE(footer[1].find("Total count    =       100000]") != std::string::npos);
  double mean = 0, sd = 0;
  REQUIRE(std::sscanf(footer[0].c_str(), "#[Mean    = %lf, StdDeviation   = %lf]", &mean, &sd) == 2);
  REQUIRE(mean == Approx(h.mean() / 1000.0).margin(0.0005));
  REQUIRE(sd == Approx(h.stdev() / 1000.0).margin(0.0005));
}

TEST_CASE("hgrmOfAnEmptyHistogramIsHeaderAndFooter") {
  const std::string text = format_hgrm(Histogram());
  std::vector<std::string> footer;
  REQUIRE(parse_rows(text, footer).empty());
  REQUIRE(footer.size() == 3);
  REQUIRE(footer[1] == "#[Max     =        0.000, Total count    =            0]");
}

namespace {

// Output of HdrHistogram (Java) 2.1.11's outputPercentileDistribution(out, 5, ratio) for the
// values of golden_values(), recorded into new Histogram(1, 3600000000000L, digits).
const char* const kJavaRatio1000Digits3 = R"(       Value     Percentile TotalCount 1/(1-Percentile)

       0.300 0.000000000000          2           1.00
       0.711 0.100000000000       2001           1.11
       1.121 0.200000000000       4000           1.25
       1.521 0.300000000000       6002           1.43
       1.936 0.400000000000       8001           1.67
       2.333 0.500000000000      10001           2.00
       2.535 0.550000000000      11005           2.22
       2.739 0.600000000000      12003           2.50
       2.937 0.650000000000      13000           2.86
       3.143 0.700000000000      14009           3.33
       3.337 0.750000000000      15006           4.00
       3.435 0.775000000000      15509           4.44
       3.537 0.800000000000      16010           5.00
       3.645 0.825000000000      16502           5.71
       3.741 0.850000000000      17000           6.67
       3.841 0.875000000000      17509           8.00
       3.889 0.887500000000      17751           8.89
       3.943 0.900000000000      18000          10.00
       3.991 0.912500000000      18250          11.43
       4.041 0.925000000000      18506          13.33
       4.095 0.937500000000      18763          16.00
       4.119 0.943750000000      18897          17.78
       4.139 0.950000000000      19000          20.00
       4.167 0.956250000000      19133          22.86
       4.191 0.962500000000      19261          26.67
       4.215 0.968750000000      19390          32.00
       4.227 0.971875000000      19445          35.56
       4.239 0.975000000000      19500          40.00
       4.255 0.978125000000      19584          45.71
       4.267 0.981250000000      19635          53.33
       4.279 0.984375000000      19697          64.00
       4.287 0.985937500000      19735          71.11
       4.291 0.987500000000      19752          80.00
       4.299 0.989062500000      19793          91.43
    5132.287 0.990625000000      19813         106.67
   14548.991 0.992187500000      19844         128.00
   16957.439 0.992968750000      19860         142.22
   20791.295 0.993750000000      19875         160.00
   26001.407 0.994531250000      19891         182.86
   29589.503 0.995312500000      19908         213.33
   32112.639 0.996093750000      19923         256.00
   34013.183 0.996484375000      19930         284.44
   35323.903 0.996875000000      19938         320.00
   37224.447 0.997265625000      19946         365.71
   38666.239 0.997656250000      19954         426.67
   40730.623 0.998046875000      19962         512.00
   41254.911 0.998242187500      19965         568.89
   41615.359 0.998437500000      19969         640.00
   42401.791 0.998632812500      19973         731.43
   43384.831 0.998828125000      19977         853.33
   44269.567 0.999023437500      19981        1024.00
   44826.623 0.999121093750      19983        1137.78
   45055.999 0.999218750000      19985        1280.00
   46006.271 0.999316406250      19987        1462.86
   47054.847 0.999414062500      19989        1706.67
   47153.151 0.999511718750      19991        2048.00
   47218.687 0.999560546875      19992        2275.56
   47579.135 0.999609375000      19993        2560.00
   47939.583 0.999658203125      19994        2925.71
   48726.015 0.999707031250      19995        3413.33
   48988.159 0.999755859375      19996        4096.00
   48988.159 0.999780273438      19996        4551.11
   49086.463 0.999804687500      19997        5120.00
   49086.463 0.999829101563      19997        5851.43
   49414.143 0.999853515625      19998        6826.67
   49414.143 0.999877929688      19998        8192.00
   49414.143 0.999890136719      19998        9102.22
   49905.663 0.999902343750      19999       10240.00
   49905.663 0.999914550781      19999       11702.86
   49905.663 0.999926757813      19999       13653.33
   49905.663 0.999938964844      19999       16384.00
   49905.663 0.999945068359      19999       18204.44
   50102.271 0.999951171875      20000       20480.00
   50102.271 1.000000000000      20000
#[Mean    =      270.192, StdDeviation   =     2979.670]
#[Max     =    50102.271, Total count    =        20000]
#[Buckets =           32, SubBuckets     =         2048]
)";
const char* const kJavaRatio1Digits2 = R"(       Value     Percentile TotalCount 1/(1-Percentile)

      301.00 0.000000000000          2           1.00
      711.00 0.100000000000       2001           1.11
     1127.00 0.200000000000       4038           1.25
     1527.00 0.300000000000       6037           1.43
     1943.00 0.400000000000       8046           1.67
     2335.00 0.500000000000      10011           2.00
     2543.00 0.550000000000      11036           2.22
     2751.00 0.600000000000      12065           2.50
     2943.00 0.650000000000      13016           2.86
     3151.00 0.700000000000      14065           3.33
     3343.00 0.750000000000      15041           4.00
     3439.00 0.775000000000      15526           4.44
     3551.00 0.800000000000      16064           5.00
     3647.00 0.825000000000      16514           5.71
     3743.00 0.850000000000      17013           6.67
     3855.00 0.875000000000      17580           8.00
     3903.00 0.887500000000      17818           8.89
     3951.00 0.900000000000      18046          10.00
     3999.00 0.912500000000      18300          11.43
     4047.00 0.925000000000      18533          13.33
     4095.00 0.937500000000      18763          16.00
     4127.00 0.943750000000      18934          17.78
     4159.00 0.950000000000      19083          20.00
     4191.00 0.956250000000      19261          22.86
     4191.00 0.962500000000      19261          26.67
     4223.00 0.968750000000      19425          32.00
     4255.00 0.971875000000      19584          35.56
     4255.00 0.975000000000      19584          40.00
     4255.00 0.978125000000      19584          45.71
     4287.00 0.981250000000      19735          53.33
     4287.00 0.984375000000      19735          64.00
     4287.00 0.985937500000      19735          71.11
     4319.00 0.987500000000      19793          80.00
     4319.00 0.989062500000      19793          91.43
  5144575.00 0.990625000000      19813         106.67
 14548991.00 0.992187500000      19844         128.00
 17039359.00 0.992968750000      19860         142.22
 20840447.00 0.993750000000      19875         160.00
 26083327.00 0.994531250000      19891         182.86
 29622271.00 0.995312500000      19908         213.33
 32112639.00 0.996093750000      19923         256.00
 34078719.00 0.996484375000      19930         284.44
 35389439.00 0.996875000000      19938         320.00
 37224447.00 0.997265625000      19946         365.71
 38797311.00 0.997656250000      19954         426.67
 40894463.00 0.998046875000      19963         512.00
 41418751.00 0.998242187500      19967         568.89
 41680895.00 0.998437500000      19969         640.00
 42467327.00 0.998632812500      19973         731.43
 43515903.00 0.998828125000      19977         853.33
 44302335.00 0.999023437500      19981        1024.00
 44826623.00 0.999121093750      19983        1137.78
 45088767.00 0.999218750000      19985        1280.00
 46137343.00 0.999316406250      19987        1462.86
 47185919.00 0.999414062500      19991        1706.67
 47185919.00 0.999511718750      19991        2048.00
 47448063.00 0.999560546875      19992        2275.56
 47710207.00 0.999609375000      19993        2560.00
 47972351.00 0.999658203125      19994        2925.71
 48758783.00 0.999707031250      19995        3413.33
 49020927.00 0.999755859375      19996        4096.00
 49020927.00 0.999780273438      19996        4551.11
 49283071.00 0.999804687500      19997        5120.00
 49283071.00 0.999829101563      19997        5851.43
 49545215.00 0.999853515625      19998        6826.67
 49545215.00 0.999877929688      19998        8192.00
 49545215.00 0.999890136719      19998        9102.22
 50069503.00 0.999902343750      19999       10240.00
 50069503.00 0.999914550781      19999       11702.86
 50069503.00 0.999926757813      19999       13653.33
 50069503.00 0.999938964844      19999       16384.00
 50069503.00 0.999945068359      19999       18204.44
 50331647.00 0.999951171875      20000       20480.00
 50331647.00 1.000000000000      20000
#[Mean    =    270191.60, StdDeviation   =   2979649.84]
#[Max     =  50331647.00, Total count    =        20000]
#[Buckets =           35, SubBuckets     =          256]
)";

// splitmix64, written the same way in the Java program that made the goldens.
Histogram golden_histogram(int digits) {
  Histogram h(1, 3'600'000'000'000ULL, digits);
  std::uint64_t s = 0x7ea11ca7ULL;
  for (int i = 0; i < 20'000; ++i) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z = (z ^ (z >> 31)) >> 1;
    h.record(i % 97 == 0 ? 100'000 + z % 50'000'000 : 300 + z % 4'000);
  }
  return h;
}

}  // namespace

TEST_CASE("hgrmIsByteForByteWhatHdrHistogramJavaPrints") {
  REQUIRE(format_hgrm(golden_histogram(3), 1000.0) == kJavaRatio1000Digits3);
  REQUIRE(format_hgrm(golden_histogram(2), 1.0) == kJavaRatio1Digits2);
}

TEST_CASE("hgrmNumbersRoundLikeJavasFormatter") {
  using report_detail::java_fixed;
  REQUIRE(java_fixed(0.9997802734375, 12) == "0.999780273438");  // printf: ...437
  REQUIRE(java_fixed(2.675, 2) == "2.68");                      // printf: 2.67
  REQUIRE(java_fixed(0.0, 3) == "0.000");
  REQUIRE(java_fixed(999.9996, 3) == "1000.000");
  REQUIRE(java_fixed(0.0004, 3) == "0.000");
  REQUIRE(java_fixed(0.0005, 3) == "0.001");
  REQUIRE(java_fixed(123456789.0, 0) == "123456789");
  REQUIRE(java_fixed(4551.111111, 2, 14) == "       4551.11");
  REQUIRE(java_fixed(1e-7, 12) == "0.000000100000");
}

// Plotters (hdr-plot, plotFiles.html) find rows by a leading blank before each value: values of
// 10 ms and more in ns (12 characters with 3 decimals) must not fill the column to its edge.
TEST_CASE("hgrmRowsKeepALeadingBlankForValuesOfTenMillisecondsAndTenSeconds") {
  Histogram h;
  for (std::uint64_t i = 0; i < 10'000; ++i) h.record(800 + i % 500);
  h.record_n(12'345'678, 40);        // 12 ms
  h.record_n(98'765'432'100ULL, 5);  // 98 s
  const std::vector<PercentileStep> steps = h.percentiles(5);
  const std::string text = format_hgrm(h);
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  INFO(line);
  REQUIRE(std::regex_match(line, std::regex(R"(^ +Value +Percentile +TotalCount +1/\(1-Percentile\)$)")));
  std::getline(in, line);
  REQUIRE(line.empty());
  // hdr-plot's row pattern, with the 1/(1-Percentile) column optional for the 100% row.
  const std::regex row(R"(^\s+([0-9.]+)\s+([0-9.]+)\s+([0-9]+)(\s+([0-9.]+))?$)");
  std::size_t n = 0;
  std::size_t width = 0;
  while (std::getline(in, line) && line.rfind("#[", 0) != 0) {
    std::smatch m;
    INFO(line);
    REQUIRE(std::regex_match(line, m, row));
    REQUIRE(n < steps.size());
    REQUIRE(std::stod(m[1].str()) == static_cast<double>(steps[n].value));
    REQUIRE(std::stoull(m[3].str()) == steps[n].total_count);
    // Right-aligned: every row but the 100% one ends at the same column.
    if (m[4].matched) {
      if (width == 0) width = line.size();
      REQUIRE(line.size() == width);
    }
    ++n;
  }
  REQUIRE(n == steps.size());
  REQUIRE(steps.back().value >= 98'765'432'100ULL);
  REQUIRE(line.rfind("#[Mean    = ", 0) == 0);
  std::getline(in, line);
  REQUIRE(line.find("Total count    =        10045]") != std::string::npos);
}
