#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <limits>

#include "format.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/report.hpp"

namespace tickrail {
namespace {

using report_detail::duration;
using report_detail::fixed;
using report_detail::grouped;

// The reported series first (blue), then orange and green: told apart in print and by most
// colour-blind readers.
constexpr std::array<const char*, 6> kColors = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                                "#d62728", "#9467bd", "#8c564b"};
constexpr int kSamplesPerNine = 120;  // x resolution of each step line
constexpr double kCharWidth = 6.6;    // average width of a 12 px sans-serif character

// XML text and attribute values. XML 1.0 forbids most control characters even escaped, and the
// file says UTF-8: both kinds of bytes become '?'.
std::string escape(std::string_view in) {
  const std::string clean = report_detail::printable(in, true);
  std::string out;
  out.reserve(clean.size());
  for (const char c : clean) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// "50%", "99.9%", "99.999%": the percentile whose distance to 100% is 10^-nines.
std::string nines_label(double nines) {
  if (nines == 0.0) return "0%";
  const double p = 100.0 * (1.0 - std::pow(10.0, -nines));
  const int decimals = std::max(0, static_cast<int>(std::ceil(nines - 1e-9)) - 2);
  return fixed(p, decimals) + "%";
}

// Position of percentile p (0..100) on the nines axis.
double nines_of(double p) { return p >= 100.0 ? std::numeric_limits<double>::infinity() : -std::log10(1.0 - p / 100.0); }

std::string n1(double v) { return fixed(v, 1); }

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown host";
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  char buf[32] = {};
  if (::gmtime_r(&t, &tm) == nullptr || std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) {
    return "unknown time";
  }
  return buf;
}

struct Curve {
  std::vector<std::pair<double, double>> points;  // (nines, ns)
  Summary summary;
};

// Geometry of the drawing: the plot rectangle and its two scales.
struct Frame {
  double left = 80, top = 74, width = 0, height = 0;
  int nines = 5;
  double y_lo = 0, y_hi = 3;  // log10(ns) of the axis ends, whole decades

  [[nodiscard]] double x(double nines_value) const {
    return left + width * std::min(nines_value, static_cast<double>(nines)) / nines;
  }
  [[nodiscard]] double y(double ns) const {
    const double l = ns > 0.0 ? std::clamp(std::log10(ns), y_lo, y_hi) : y_lo;
    return top + height * (1.0 - (l - y_lo) / (y_hi - y_lo));
  }
};

// A label on a white box, so it stays readable over grid lines and other series.
void boxed_text(std::string& s, double x, double y, const std::string& text, const char* anchor,
                const std::string& color, const std::string& attrs = {}) {
  const double w = kCharWidth * static_cast<double>(text.size()) + 6;
  const double x0 = std::string_view(anchor) == "end" ? x - w + 3 : x - 3;
  s += "<rect x=\"" + n1(x0) + "\" y=\"" + n1(y - 12) + "\" width=\"" + n1(w) +
       "\" height=\"16\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"none\"/>";
  s += "<text x=\"" + n1(x) + "\" y=\"" + n1(y) + "\" text-anchor=\"" + anchor + "\" fill=\"" + color +
       "\"" + attrs + ">" + escape(text) + "</text>";
}

// A tick's value (1, 2 or 5 times a power of ten ns) in the largest unit it is whole in:
// "500 ns", "1 us", "20 ms".
std::string tick_label(double ns) {
  static constexpr const char* kUnits[] = {"ns", "us", "ms", "s"};
  int u = 0;
  while (u < 3 && ns >= 999.5) {
    ns /= 1000.0;
    ++u;
  }
  return fixed(ns, 0) + " " + kUnits[u];
}

void x_axis(std::string& s, const Frame& f) {
  s += "<g class=\"x-axis\">\n";
  std::vector<double> ticks = {0.0, std::log10(2.0)};
  for (int k = 1; k <= f.nines; ++k) ticks.push_back(k);
  for (const double t : ticks) {
    s += "<line x1=\"" + n1(f.x(t)) + "\" y1=\"" + n1(f.top) + "\" x2=\"" + n1(f.x(t)) + "\" y2=\"" +
         n1(f.top + f.height) + "\" stroke=\"#d9d9d9\"/>";
    s += "<text x=\"" + n1(f.x(t)) + "\" y=\"" + n1(f.top + f.height + 18) + "\" text-anchor=\"middle\">" +
         nines_label(t) + "</text>\n";
  }
  s += "<text x=\"" + n1(f.left + f.width / 2) + "\" y=\"" + n1(f.top + f.height + 40) +
       "\" text-anchor=\"middle\">percentile (log scale of 1/(1 - percentile))</text>\n</g>\n";
}

void y_axis(std::string& s, const Frame& f, const std::string& label) {
  s += "<g class=\"y-axis\">\n";
  const int decades = static_cast<int>(std::lround(f.y_hi - f.y_lo));
  for (int e = static_cast<int>(std::lround(f.y_lo)); e <= static_cast<int>(std::lround(f.y_hi)); ++e) {
    for (const int m : {1, 2, 5}) {
      const double ns = m * std::pow(10.0, e);
      if (std::log10(ns) > f.y_hi + 1e-9) break;
      // Every decade is labelled; 2 and 5 too when the axis spans few decades.
      const bool labelled = m == 1 || decades <= 3;
      const double y = f.y(ns);
      s += "<g class=\"y-tick\" data-ns=\"" + fixed(ns, 0) + "\" data-y=\"" + n1(y) + "\">";
      s += "<line x1=\"" + n1(f.left) + "\" y1=\"" + n1(y) + "\" x2=\"" + n1(f.left + f.width) + "\" y2=\"" +
           n1(y) + "\" stroke=\"" + (m == 1 ? "#bdbdbd" : "#ececec") + "\"/>";
      if (labelled) {
        s += "<text x=\"" + n1(f.left - 8) + "\" y=\"" + n1(y + 4) + "\" text-anchor=\"end\"" +
             (m == 1 ? "" : " fill=\"#666666\"") + ">" + tick_label(ns) + "</text>";
      }
      s += "</g>\n";
    }
  }
  const double mid = f.top + f.height / 2;
  s += "<text x=\"18\" y=\"" + n1(mid) + "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + n1(mid) +
       ")\">" + escape(label) + " (log scale)</text>\n</g>\n";
}

void draw_series(std::string& s, const Frame& f, const std::string& name, const Curve& c,
                 const std::string& color, bool main) {
  s += "<g class=\"series\" data-name=\"" + escape(name) + "\" data-count=\"" +
       std::to_string(c.summary.count) + "\" stroke=\"" + color + "\" fill=\"none\" stroke-width=\"" +
       (main ? "2.5" : "1.5") + "\">\n";
  if (!c.points.empty()) {
    s += "<polyline points=\"";
    double prev_y = 0;
    for (std::size_t k = 0; k < c.points.size(); ++k) {
      const double px = f.x(c.points[k].first);
      const double py = f.y(c.points[k].second);
      if (k > 0 && py != prev_y) s += n1(px) + "," + n1(prev_y) + " ";  // vertical step
      s += n1(px) + "," + n1(py) + " ";
      prev_y = py;
    }
    s.back() = '"';
    s += "/>\n";
  }
  s += "</g>\n";
}

// Markers of the reported series: each a dot on its line and a label with the value. A label
// goes below and right of its dot, where a rising line never is; max, at the right edge, goes
// above and left (below and left at the top of the frame).
void draw_markers(std::string& s, const Frame& f, const Curve& c, const std::string& color) {
  const Summary& m = c.summary;
  const struct {
    const char* label;
    double percentile;
    double ns;
  } marks[] = {{"p50", 50.0, m.p50_ns},    {"p99", 99.0, m.p99_ns}, {"p99.9", 99.9, m.p999_ns},
               {"p99.99", 99.99, m.p9999_ns}, {"max", 100.0, m.max_ns}};
  s += "<g class=\"markers\" font-size=\"12\">\n";
  for (const auto& k : marks) {
    if (k.percentile < 100.0 && nines_of(k.percentile) > f.nines - 0.25) continue;  // crowds max
    const double x = f.x(nines_of(k.percentile));
    const double y = f.y(k.ns);
    const std::string text = std::string(k.label) + " " + duration(k.ns);
    s += "<g class=\"marker\" data-label=\"" + std::string(k.label) + "\" data-ns=\"" + fixed(k.ns, 0) +
         "\"><circle cx=\"" + n1(x) + "\" cy=\"" + n1(y) + "\" r=\"4\" fill=\"" + color +
         "\" stroke=\"white\"/>";
    if (k.percentile >= 100.0) {
      // Above the dot, or below it when that would cross the frame.
      boxed_text(s, x - 6, y - 9 < f.top + 14 ? y + 17 : y - 9, text, "end", color, " font-weight=\"bold\"");
    } else {
      boxed_text(s, x + 7, y + 17, text, "start", color, " font-weight=\"bold\"");
    }
    s += "</g>\n";
  }
  s += "</g>\n";
}

// Under the x axis: colour, name, count, p50 and max of every series, in as many rows as the
// width needs.
struct LegendEntry {
  std::string text;
  double x = 0, y = 0;  // relative to the legend's origin
};

std::vector<LegendEntry> layout_legend(std::span<const SvgSeries> series, const std::vector<Curve>& curves,
                                       double width) {
  std::vector<LegendEntry> out;
  double x = 0, y = 0;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const Summary& m = curves[i].summary;
    LegendEntry e;
    e.text = series[i].name + (m.count == 0 ? std::string(" (no samples)")
                                            : "  n=" + grouped(m.count) + ", p50 " + duration(m.p50_ns) +
                                                  ", max " + duration(m.max_ns));
    const double w = 30 + kCharWidth * static_cast<double>(e.text.size()) + 24;
    if (x > 0 && x + w > width) {
      x = 0;
      y += 18;
    }
    e.x = x;
    e.y = y;
    x += w;
    out.push_back(std::move(e));
  }
  return out;
}

void draw_legend(std::string& s, double left, double top, const std::vector<LegendEntry>& entries) {
  s += "<g class=\"legend\">\n";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const double x = left + entries[i].x;
    const double y = top + entries[i].y;
    const std::string color = kColors[i % kColors.size()];
    s += "<line x1=\"" + n1(x) + "\" y1=\"" + n1(y - 4) + "\" x2=\"" + n1(x + 24) + "\" y2=\"" + n1(y - 4) +
         "\" stroke=\"" + color + "\" stroke-width=\"" + (i == 0 ? "2.5" : "1.5") + "\"/>";
    s += "<text x=\"" + n1(x + 30) + "\" y=\"" + n1(y) + "\">" + escape(entries[i].text) + "</text>\n";
  }
  s += "</g>\n";
}

// The step line of one series: its value at kSamplesPerNine points of each nine.
Curve sample(const Histogram& h, int nines) {
  Curve c;
  c.summary = summarize(h);
  if (h.empty()) return c;
  const double cap = static_cast<double>(h.max());
  const int samples = nines * kSamplesPerNine;
  for (int k = 0; k <= samples; ++k) {
    const double x = static_cast<double>(nines) * k / samples;
    const double p = 100.0 * (1.0 - std::pow(10.0, -x));
    c.points.emplace_back(x, std::min(static_cast<double>(h.value_at_percentile(p)), cap));
  }
  return c;
}

// The document's start: XML declaration, <svg>, white background, title and the line under it.
void header(std::string& s, const SvgOptions& o, std::uint64_t count, double left) {
  std::string sub = grouped(count) + " samples  |  host " + (o.host.empty() ? host_name() : o.host);
  if (!o.clock.empty()) sub += "  |  clock " + o.clock;
  sub += "  |  " + (o.when.empty() ? utc_now() : o.when);
  const std::string w = std::to_string(o.width);
  const std::string h = std::to_string(o.height);
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w +
       " " + h + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  s += "<title>" + escape(o.title) + "</title>\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"white\"/>\n";
  s += "<text class=\"title\" x=\"" + n1(left) + "\" y=\"28\" font-size=\"17\" font-weight=\"bold\">" +
       escape(o.title) + "</text>\n";
  s += "<text class=\"subtitle\" x=\"" + n1(left) + "\" y=\"50\" fill=\"#444444\">" + escape(sub) + "</text>\n";
}

}  // namespace

std::string format_svg(std::span<const SvgSeries> series, const SvgOptions& o) {
  if (o.width < 400 || o.height < 300) {
    throw Error(Errc::invalid_argument, "svg report: width >= 400 and height >= 300 are required");
  }
  if (series.empty()) throw Error(Errc::invalid_argument, "svg report: no series to draw");
  std::uint64_t max_count = 0;
  for (const SvgSeries& s : series) {
    if (s.histogram == nullptr) {
      throw Error(Errc::invalid_argument, "svg report: series '" + s.name + "' has no histogram");
    }
    max_count = std::max(max_count, s.histogram->count());
  }
  Frame f;
  // As many nines as the largest series can resolve, at least 99.999%.
  f.nines = std::clamp(
      static_cast<int>(std::ceil(std::log10(static_cast<double>(std::max<std::uint64_t>(max_count, 1))))),
      5, 9);
  f.width = o.width - f.left - 45;  // room for half of the last x label

  // Sample every series on the nines axis; the y axis spans whole decades around them all.
  std::vector<Curve> curves;
  double lo = 0.0, hi = 0.0;
  for (const SvgSeries& one : series) {
    curves.push_back(sample(*one.histogram, f.nines));
    const Curve& c = curves.back();
    if (c.summary.count == 0) continue;
    const double first_positive = std::max(c.summary.min_ns, 1.0);
    lo = lo == 0.0 ? first_positive : std::min(lo, first_positive);
    hi = std::max(hi, c.summary.max_ns);
  }
  const std::vector<LegendEntry> legend = layout_legend(series, curves, o.width - f.left - 10);
  f.height = o.height - f.top - 90 - legend.back().y;
  if (f.height < 100) throw Error(Errc::invalid_argument, "svg report: too many series for the height");
  if (hi > 0.0) {
    f.y_lo = std::floor(std::log10(lo));
    f.y_hi = std::max(f.y_lo + 1.0, std::ceil(std::log10(hi) - 1e-9));
  }

  const Summary& main = curves[0].summary;
  std::string s;
  header(s, o, main.count, f.left);
  y_axis(s, f, o.y_label);
  x_axis(s, f);
  s += "<rect x=\"" + n1(f.left) + "\" y=\"" + n1(f.top) + "\" width=\"" + n1(f.width) + "\" height=\"" +
       n1(f.height) + "\" fill=\"none\" stroke=\"#333333\"/>\n";
  // Later series first, so the reported one is drawn on top.
  for (std::size_t i = series.size(); i-- > 0;) {
    draw_series(s, f, series[i].name, curves[i], kColors[i % kColors.size()], i == 0);
  }
  if (main.count != 0) draw_markers(s, f, curves[0], kColors[0]);
  draw_legend(s, f.left, f.top + f.height + 66, legend);
  s += "</svg>\n";
  return s;
}

}  // namespace tickrail
