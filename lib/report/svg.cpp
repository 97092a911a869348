#include <algorithm>
#include <array>
#include <cmath>

#include "format.hpp"
#include "tickrail/error.hpp"
#include "tickrail/report.hpp"

namespace tickrail {
namespace {

using report_detail::fixed;

constexpr std::array<const char*, 8> kColors = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
constexpr int kSamplesPerNine = 120;  // x resolution of each step line

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters, even escaped.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
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

// A round step (1, 2 or 5 times a power of ten) giving about `target` intervals over span.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

// Tick label with as many decimals as the step needs: 0, 20, 40 or 0.5, 1.0, 1.5.
std::string tick_label(double v, double step) {
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return fixed(v, decimals);
}

// Shortest text of a power of ten: 0.01, 1, 1000.
std::string decade_label(int exponent) {
  return exponent >= 0 ? fixed(std::pow(10.0, exponent), 0) : fixed(std::pow(10.0, exponent), -exponent);
}

// About three significant digits.
std::string number_label(double v) {
  if (v == 0.0) return "0";
  const double a = std::fabs(v);
  if (a >= 100.0) return fixed(v, 0);
  if (a >= 10.0) return fixed(v, 1);
  if (a >= 1.0) return fixed(v, 2);
  return fixed(v, 3);
}

}  // namespace

std::string format_svg(std::span<const SvgSeries> series, const SvgOptions& o) {
  if (o.width < 200 || o.height < 150 || !(o.value_unit_scaling_ratio > 0.0)) {
    throw Error(Errc::invalid_argument, "svg report: width >= 200, height >= 150 and a positive "
                                        "value scaling ratio are required");
  }
  std::uint64_t max_count = 0;
  for (const SvgSeries& s : series) {
    if (s.histogram == nullptr) {
      throw Error(Errc::invalid_argument, "svg report: series '" + s.name + "' has no histogram");
    }
    max_count = std::max(max_count, s.histogram->count());
  }
  // As many nines as the largest series can resolve, at least 99.999%.
  const int nines = std::clamp(
      static_cast<int>(std::ceil(std::log10(static_cast<double>(std::max<std::uint64_t>(max_count, 1))))),
      5, 9);

  // Sample every series on the nines axis.
  struct Curve {
    std::vector<std::pair<double, double>> points;  // (nines, scaled value)
    double max = 0;
  };
  std::vector<Curve> curves(series.size());
  double y_max = 0.0;
  double y_min_positive = 0.0;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const Histogram& h = *series[i].histogram;
    if (h.empty()) continue;
    Curve& c = curves[i];
    const double cap = static_cast<double>(h.max());
    const int samples = nines * kSamplesPerNine;
    for (int k = 0; k <= samples; ++k) {
      const double x = static_cast<double>(nines) * k / samples;
      const double p = 100.0 * (1.0 - std::pow(10.0, -x));
      const double v =
          std::min(static_cast<double>(h.value_at_percentile(p)), cap) / o.value_unit_scaling_ratio;
      c.points.emplace_back(x, v);
    }
    c.max = cap / o.value_unit_scaling_ratio;
    y_max = std::max(y_max, c.max);
    const double lo = static_cast<double>(h.min()) / o.value_unit_scaling_ratio;
    if (lo > 0.0 && (y_min_positive == 0.0 || lo < y_min_positive)) y_min_positive = lo;
  }

  // The legend sits right of the plot: make room for its longest label (~7 px a character).
  std::vector<std::string> legend(series.size());
  std::size_t longest = 0;
  for (std::size_t i = 0; i < series.size(); ++i) {
    legend[i] = series[i].name + (curves[i].points.empty()
                                      ? std::string(" (no samples)")
                                      : " (max " + number_label(curves[i].max) + " " + o.value_unit + ")");
    longest = std::max(longest, legend[i].size());
  }
  const double left = 90, top = 56, bottom = 66;
  const double right = std::min(60.0 + 7.0 * static_cast<double>(longest), o.width / 2.0);
  const double pw = o.width - left - right;
  const double ph = o.height - top - bottom;

  // y scale: linear from 0, or log over whole decades.
  const bool log_y = o.log_y && y_min_positive > 0.0;
  double y_lo = 0.0, y_hi = 1.0, y_step = 0.2;
  if (log_y) {
    y_lo = std::floor(std::log10(y_min_positive));
    y_hi = std::max(y_lo + 1.0, std::ceil(std::log10(y_max)));
  } else if (y_max > 0.0) {
    y_step = nice_step(y_max, 6);
    y_hi = std::ceil(y_max / y_step) * y_step;
  }
  const auto sx = [&](double x) { return left + pw * x / nines; };
  const auto sy = [&](double v) {
    const double t = log_y ? (std::log10(std::max(v, std::pow(10.0, y_lo))) - y_lo) / (y_hi - y_lo)
                           : (v - y_lo) / (y_hi - y_lo);
    return top + ph * (1.0 - t);
  };
  const auto n1 = [](double v) { return fixed(v, 1); };

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) +
       "\" height=\"" + std::to_string(o.height) + "\" viewBox=\"0 0 " + std::to_string(o.width) +
       " " + std::to_string(o.height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<title>" + escape(o.title) + "</title>\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(o.width) + "\" height=\"" +
       std::to_string(o.height) + "\" fill=\"white\"/>\n";
  s += "<text x=\"" + n1(left + pw / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" +
       escape(o.title) + "</text>\n";

  // Grid and ticks.
  s += "<g class=\"x-axis\" stroke=\"#dddddd\">\n";
  std::vector<double> x_ticks = {0.0, std::log10(2.0)};
  for (int k = 1; k <= nines; ++k) x_ticks.push_back(k);
  for (const double x : x_ticks) {
    s += "<line x1=\"" + n1(sx(x)) + "\" y1=\"" + n1(top) + "\" x2=\"" + n1(sx(x)) + "\" y2=\"" +
         n1(top + ph) + "\"/>\n";
    if (x == 0.0) continue;  // "0%" would crowd "50%": the left edge speaks for itself
    s += "<text x=\"" + n1(sx(x)) + "\" y=\"" + n1(top + ph + 18) +
         "\" text-anchor=\"middle\" stroke=\"none\" fill=\"black\">" + nines_label(x) + "</text>\n";
  }
  s += "</g>\n<g class=\"y-axis\" stroke=\"#dddddd\">\n";
  const auto y_tick = [&](double v, const std::string& label) {
    s += "<line x1=\"" + n1(left) + "\" y1=\"" + n1(sy(v)) + "\" x2=\"" + n1(left + pw) +
         "\" y2=\"" + n1(sy(v)) + "\"/>\n";
    s += "<text x=\"" + n1(left - 8) + "\" y=\"" + n1(sy(v) + 4) +
         "\" text-anchor=\"end\" stroke=\"none\" fill=\"black\">" + label + "</text>\n";
  };
  if (log_y) {
    for (double e = y_lo; e <= y_hi + 1e-9; e += 1.0) {
      y_tick(std::pow(10.0, e), decade_label(static_cast<int>(std::lround(e))));
    }
  } else {
    for (int k = 0; k * y_step <= y_hi + y_step * 1e-6; ++k) y_tick(k * y_step, tick_label(k * y_step, y_step));
  }
  s += "</g>\n";
  s += "<rect x=\"" + n1(left) + "\" y=\"" + n1(top) + "\" width=\"" + n1(pw) + "\" height=\"" +
       n1(ph) + "\" fill=\"none\" stroke=\"black\"/>\n";
  s += "<text x=\"" + n1(left + pw / 2) + "\" y=\"" + n1(o.height - 18.0) +
       "\" text-anchor=\"middle\">percentile</text>\n";
  s += "<text x=\"20\" y=\"" + n1(top + ph / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " +
       n1(top + ph / 2) + ")\">" + escape(o.y_label) + " (" + escape(o.value_unit) + ")</text>\n";

  // Series: step lines, a dot for each max at the right edge, and the legend.
  for (std::size_t i = 0; i < series.size(); ++i) {
    const std::string color = kColors[i % kColors.size()];
    const Curve& c = curves[i];
    s += "<g class=\"series\" data-name=\"" + escape(series[i].name) + "\" stroke=\"" + color +
         "\" fill=\"none\" stroke-width=\"2\">\n";
    if (!c.points.empty()) {
      s += "<polyline points=\"";
      double prev_y = 0;
      for (std::size_t k = 0; k < c.points.size(); ++k) {
        const double px = sx(c.points[k].first);
        const double py = sy(c.points[k].second);
        if (k > 0 && py != prev_y) s += n1(px) + "," + n1(prev_y) + " ";  // vertical step
        s += n1(px) + "," + n1(py) + " ";
        prev_y = py;
      }
      s.back() = '"';
      s += "/>\n<circle cx=\"" + n1(sx(nines)) + "\" cy=\"" + n1(sy(c.max)) + "\" r=\"3\" fill=\"" +
           color + "\"/>\n";
    }
    s += "</g>\n";
    const double ly = top + 10 + 20.0 * static_cast<double>(i);
    const double lx = left + pw + 16;
    const std::string& label = legend[i];
    s += "<g class=\"legend\"><line x1=\"" + n1(lx) + "\" y1=\"" + n1(ly) + "\" x2=\"" + n1(lx + 22) +
         "\" y2=\"" + n1(ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/><text x=\"" +
         n1(lx + 28) + "\" y=\"" + n1(ly + 4) + "\">" + escape(label) + "</text></g>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace tickrail
