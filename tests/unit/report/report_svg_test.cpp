#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tools/report/format.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/report.hpp"

using namespace tickrail;
namespace fs = std::filesystem;

namespace {

// What an XML parser (Python's minidom) finds in the document; parsing fails the test when the
// SVG is not well-formed or its root is not an SVG element.
struct Parsed {
  std::vector<std::pair<double, double>> y_ticks;  // (ns, y), in document order
  std::map<std::string, std::vector<std::string>> tick_labels;
  struct Marker {
    std::string label;
    double ns = 0, cy = 0;
    std::string text;
  };
  std::vector<Marker> markers;
  std::vector<std::pair<std::string, std::size_t>> series;  // (name, polyline points)
  std::vector<std::string> texts;                           // every <text>, decoded
  std::string title;
};

Parsed parse_svg(const std::string& svg) {
  std::string tmpl = (fs::temp_directory_path() / "tickrail-svg-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  std::ofstream(dir / "plot.svg") << svg;
  std::ofstream(dir / "dump.py") << R"(import sys, xml.dom.minidom as m
d = m.parse(sys.argv[1])
root = d.documentElement
assert root.tagName == 'svg', root.tagName
assert root.getAttribute('xmlns') == 'http://www.w3.org/2000/svg'
out = open(sys.argv[2], 'w')
def text(e):
    return ''.join(n.data for n in e.childNodes if n.nodeType == n.TEXT_NODE).replace('\n', ' ')
for g in d.getElementsByTagName('g'):
    c = g.getAttribute('class')
    if c == 'y-tick':
        out.write('tick\t%s\t%s\n' % (g.getAttribute('data-ns'), g.getAttribute('data-y')))
    elif c == 'marker':
        out.write('marker\t%s\t%s\t%s\t%s\n' % (g.getAttribute('data-label'), g.getAttribute('data-ns'),
                  g.getElementsByTagName('circle')[0].getAttribute('cy'),
                  text(g.getElementsByTagName('text')[0])))
    elif c == 'series':
        p = g.getElementsByTagName('polyline')
        out.write('series\t%s\t%d\n' % (g.getAttribute('data-name'),
                  len(p[0].getAttribute('points').split()) if p else 0))
for t in d.getElementsByTagName('text'):
    out.write('text\t%s\n' % text(t))
out.write('title\t%s\n' % text(d.getElementsByTagName('title')[0]))
)";
  const std::string cmd = "python3 " + (dir / "dump.py").string() + " " + (dir / "plot.svg").string() +
                          " " + (dir / "out.txt").string();
  const int rc = std::system(cmd.c_str());
  std::ifstream in(dir / "out.txt");
  Parsed p;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, '\t');) f.push_back(x);
    if (f[0] == "tick") p.y_ticks.emplace_back(std::stod(f[1]), std::stod(f[2]));
    if (f[0] == "marker") p.markers.push_back({f[1], std::stod(f[2]), std::stod(f[3]), f[4]});
    if (f[0] == "series") p.series.emplace_back(f[1], std::stoul(f[2]));
    if (f[0] == "text") p.texts.push_back(f.size() > 1 ? f[1] : "");
    if (f[0] == "title") p.title = f.size() > 1 ? f[1] : "";
  }
  fs::remove_all(dir);
  REQUIRE(rc == 0);
  return p;
}

bool has_text(const Parsed& p, const std::string& t) {
  return std::find(p.texts.begin(), p.texts.end(), t) != p.texts.end();
}
bool has_text_containing(const Parsed& p, const std::string& t) {
  return std::any_of(p.texts.begin(), p.texts.end(),
                     [&](const std::string& x) { return x.find(t) != std::string::npos; });
}

// 100,000 samples whose percentiles are known by construction: 50% at 400 ns, 49% at 1.5 us,
// 0.9% at 20 us, 0.09% at 3 ms, 9 at 40 ms and one at 2 s.
Histogram known_latency() {
  Histogram h;
  h.record_n(400, 50'000);
  h.record_n(1'500, 49'000);
  h.record_n(20'000, 900);
  h.record_n(3'000'000, 90);
  h.record_n(40'000'000, 9);
  h.record(2'000'000'000);
  return h;
}

SvgOptions fixed_options() {
  SvgOptions o;
  o.title = "tickrail-jitter: RTT/2 <shm> & 'ticks'";
  o.y_label = "RTT/2";
  o.host = "rig<1>&co";
  o.clock = "TSC 2.994 GHz, invariant";
  o.when = "2026-12-01 09:00:00 UTC";
  return o;
}

}  // namespace

TEST_CASE("svgLatencyAxisIsLogarithmicWithUnitsFromNanosecondsToSeconds") {
  const Histogram h = known_latency();
  const SvgSeries series[] = {{"RTT/2", &h}};
  const Parsed p = parse_svg(format_svg(series, fixed_options()));
  // Decades from below the smallest value (400 ns) to above the largest (2 s).
  std::vector<std::pair<double, double>> decades;
  for (const auto& t : p.y_ticks) {
    const double l = std::log10(t.first);
    if (std::fabs(l - std::round(l)) < 1e-9) decades.push_back(t);
  }
  REQUIRE(decades.size() == 9);
  REQUIRE(decades.front().first == 100.0);
  REQUIRE(decades.back().first == 1e10);
  // Log scale: every decade takes the same height, and higher values sit higher.
  const double step = decades[0].second - decades[1].second;
  REQUIRE(step > 20.0);
  for (std::size_t i = 1; i < decades.size(); ++i) {
    REQUIRE(decades[i - 1].second - decades[i].second == Approx(step).margin(0.15));
  }
  for (const char* label : {"100 ns", "1 us", "10 us", "100 us", "1 ms", "10 ms", "100 ms", "1 s", "10 s"}) {
    INFO(label);
    REQUIRE(has_text(p, label));
  }
  for (const char* label : {"0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"}) {
    INFO(label);
    REQUIRE(has_text(p, label));
  }
}

TEST_CASE("svgMarksP50ToMaxWithTheHistogramsValuesAtTheirHeights") {
  const Histogram h = known_latency();
  const SvgSeries series[] = {{"RTT/2", &h}};
  const Parsed p = parse_svg(format_svg(series, fixed_options()));
  REQUIRE(p.markers.size() == 5);
  const struct {
    const char* label;
    double ns;
    const char* text;
  } expect[] = {{"p50", 400, "p50 400 ns"},
                {"p99", 1'500, "p99 1.50 us"},
                {"p99.9", static_cast<double>(h.highest_equivalent(20'000)), "p99.9 20.0 us"},
                {"p99.99", static_cast<double>(h.highest_equivalent(3'000'000)), "p99.99 3.00 ms"},
                {"max", 2e9, "max 2.00 s"}};
  // y of a value on the log axis, from two decade ticks.
  const auto& t0 = p.y_ticks.front();
  double per_decade = 0;
  for (const auto& t : p.y_ticks) {
    if (t.first == t0.first * 10) per_decade = t0.second - t.second;
  }
  REQUIRE(per_decade > 0);
  for (std::size_t i = 0; i < 5; ++i) {
    INFO(expect[i].label);
    REQUIRE(p.markers[i].label == expect[i].label);
    REQUIRE(p.markers[i].ns == expect[i].ns);
    REQUIRE(p.markers[i].text == expect[i].text);
    const double y = t0.second - per_decade * std::log10(expect[i].ns / t0.first);
    REQUIRE(p.markers[i].cy == Approx(y).margin(0.15));
  }
}

TEST_CASE("svgShowsCountHostClockAndDateAndEscapesText") {
  const Histogram h = known_latency();
  const SvgSeries series[] = {{"RTT/2", &h}};
  SvgOptions o = fixed_options();
  o.clock += "\x01\xff";  // a control character XML cannot carry, even escaped; not UTF-8
  const std::string svg = format_svg(series, o);
  REQUIRE(svg.find("rig&lt;1&gt;&amp;co") != std::string::npos);
  REQUIRE(svg.find('\x01') == std::string::npos);
  REQUIRE(svg.find('\xff') == std::string::npos);
  const Parsed p = parse_svg(svg);
  REQUIRE(p.title == "tickrail-jitter: RTT/2 <shm> & 'ticks'");
  REQUIRE(has_text(p, "tickrail-jitter: RTT/2 <shm> & 'ticks'"));
  REQUIRE(has_text(p, "100,000 samples  |  host rig<1>&co  |  clock TSC 2.994 GHz, invariant??  |  "
                      "2026-12-01 09:00:00 UTC"));
  REQUIRE(has_text(p, "RTT/2 (log scale)"));
}

TEST_CASE("svgDateDefaultsToNowInUtc") {
  const Histogram h = known_latency();
  const SvgSeries series[] = {{"one-way", &h}};
  SvgOptions o;
  o.host = "h";
  const Parsed p = parse_svg(format_svg(series, o));
  const auto sub = std::find_if(p.texts.begin(), p.texts.end(),
                                [](const std::string& t) { return t.rfind("100,000 samples", 0) == 0; });
  REQUIRE(sub != p.texts.end());
  REQUIRE(sub->size() > 23);
  const std::string when = sub->substr(sub->size() - 23);
  INFO(when);
  REQUIRE(std::regex_match(when, std::regex(R"(20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC)")));
}

TEST_CASE("svgDrawsEverySeriesWithItsLegend") {
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> d(1.0 / 2000.0);
  Histogram latency, interarrival, poll_gap, empty;
  for (int i = 0; i < 200'000; ++i) {
    latency.record(300 + static_cast<std::uint64_t>(d(rng)));
    interarrival.record(900 + static_cast<std::uint64_t>(d(rng) * 3));
    poll_gap.record(40 + static_cast<std::uint64_t>(d(rng) / 50));
  }
  const SvgSeries series[] = {
      {"one-way latency", &latency}, {"inter-arrival", &interarrival}, {"poll gap", &poll_gap}, {"empty", &empty}};
  const Parsed p = parse_svg(format_svg(series, fixed_options()));
  // Drawn in reverse so the reported series is on top.
  REQUIRE(p.series.size() == 4);
  REQUIRE(p.series[0].first == "empty");
  REQUIRE(p.series[0].second == 0);
  REQUIRE(p.series[1].first == "poll gap");
  REQUIRE(p.series[2].first == "inter-arrival");
  REQUIRE(p.series[3].first == "one-way latency");
  for (std::size_t i = 1; i < 4; ++i) REQUIRE(p.series[i].second > 100);
  REQUIRE(has_text(p, "99.9999%"));  // 200k samples: six nines
  REQUIRE(has_text(p, "empty (no samples)"));
  const Summary s = summarize(interarrival);
  REQUIRE(has_text(p, "inter-arrival  n=200,000, p50 " + report_detail::duration(s.p50_ns) + ", max " +
                          report_detail::duration(s.max_ns)));
  REQUIRE(has_text_containing(p, "one-way latency  n=200,000, p50 "));
  REQUIRE(has_text_containing(p, "poll gap  n=200,000, p50 "));
}

TEST_CASE("svgDurationLabelsUseThreeSignificantDigits") {
  using report_detail::duration;
  REQUIRE(duration(0) == "0 ns");
  REQUIRE(duration(812) == "812 ns");
  REQUIRE(duration(999.6) == "1.00 us");
  REQUIRE(duration(1'950) == "1.95 us");
  REQUIRE(duration(12'345'678) == "12.3 ms");
  REQUIRE(duration(98'765'432'100.0) == "98.8 s");
  REQUIRE(duration(5e12) == "5000 s");
}

TEST_CASE("svgRejectsASeriesWithoutHistogramAndNoSeries") {
  const SvgSeries series[] = {{"x", nullptr}};
  REQUIRE_THROWS_AS(format_svg(series), Error);
  REQUIRE_THROWS_AS(format_svg(std::span<const SvgSeries>()), Error);
}
