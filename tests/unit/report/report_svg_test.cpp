#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tickrail/error.hpp"
#include "tickrail/report.hpp"

using namespace tickrail;
namespace fs = std::filesystem;

namespace {

// Parses the SVG with Python's XML parser and checks the series it names: exit status 0 only
// when the document is well-formed, its root is <svg>, and each expected series has a polyline.
int check_with_python(const std::string& svg, const std::string& expected_names) {
  std::string tmpl = (fs::temp_directory_path() / "tickrail-svg-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  std::ofstream(dir / "plot.svg") << svg;
  std::ofstream(dir / "check.py") << R"(import sys, xml.dom.minidom as m
d = m.parse(sys.argv[1])
root = d.documentElement
assert root.tagName == 'svg', root.tagName
assert root.getAttribute('xmlns') == 'http://www.w3.org/2000/svg'
series = [g for g in d.getElementsByTagName('g') if g.getAttribute('class') == 'series']
names = [g.getAttribute('data-name') for g in series]
assert names == sys.argv[2].split('|'), names
for g in series:
    lines = g.getElementsByTagName('polyline')
    if g.getAttribute('data-name') != 'empty':
        assert len(lines) == 1 and len(lines[0].getAttribute('points').split()) > 100
texts = [t.firstChild.data for t in d.getElementsByTagName('text') if t.firstChild]
for label in ['50%', '90%', '99%', '99.9%', '99.99%', '99.999%', 'percentile']:
    assert label in texts, label
)";
  const std::string cmd = "python3 " + (dir / "check.py").string() + " " + (dir / "plot.svg").string() +
                          " '" + expected_names + "'";
  const int rc = std::system(cmd.c_str());
  fs::remove_all(dir);
  return rc;
}

}  // namespace

TEST_CASE("svgIsWellFormedWithOneLinePerSeries") {
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> d(1.0 / 2000.0);
  Histogram a, b, empty;
  for (int i = 0; i < 200'000; ++i) {
    a.record(300 + static_cast<std::uint64_t>(d(rng)));
    b.record(900 + static_cast<std::uint64_t>(d(rng) * 3));
  }
  const SvgSeries series[] = {{"shm one-way", &a}, {"rc <rtt/2> & more", &b}, {"empty", &empty}};
  const std::string svg = format_svg(series);
  REQUIRE(svg.rfind("<?xml", 0) == 0);
  REQUIRE(svg.find("</svg>") != std::string::npos);
  REQUIRE(svg.find("rc &lt;rtt/2&gt; &amp; more") != std::string::npos);
  REQUIRE(svg.find("(no samples)") != std::string::npos);
  REQUIRE(svg.find("99.9999%") != std::string::npos);  // 200k samples: six nines
  REQUIRE(check_with_python(svg, "shm one-way|rc <rtt/2> & more|empty") == 0);
}

TEST_CASE("svgWithLogYAxisIsWellFormed") {
  Histogram h;
  for (std::uint64_t v = 100; v < 1'000'000; v = v * 11 / 10) h.record_n(v, 10);
  SvgOptions o;
  o.log_y = true;
  o.title = "jitter";
  const SvgSeries series[] = {{"poll gaps", &h}};
  REQUIRE(check_with_python(format_svg(series, o), "poll gaps") == 0);
}

TEST_CASE("svgRejectsASeriesWithoutHistogram") {
  const SvgSeries series[] = {{"x", nullptr}};
  REQUIRE_THROWS_AS(format_svg(series), Error);
}
