#include <array>

#include "format.hpp"
#include "tickrail/tools/report.hpp"

namespace tickrail {

using report_detail::fixed;
using report_detail::integer;
using report_detail::pad_left;
using report_detail::pad_right;

std::string format_table(std::span<const TableRow> rows) {
  static constexpr std::array<const char*, 12> kHeader = {
      "series", "count", "lost", "min", "p50", "mean", "stdev",
      "p90", "p99", "p99.9", "p99.99", "max"};
  std::vector<std::array<std::string, 12>> cells;
  cells.reserve(rows.size());
  for (const TableRow& r : rows) {
    const Summary& s = r.summary;
    cells.push_back({r.name, integer(s.count), integer(s.lost), fixed(s.min_ns, 1),
                     fixed(s.p50_ns, 1), fixed(s.mean_ns, 1), fixed(s.stdev_ns, 1),
                     fixed(s.p90_ns, 1), fixed(s.p99_ns, 1), fixed(s.p999_ns, 1),
                     fixed(s.p9999_ns, 1), fixed(s.max_ns, 1)});
  }
  std::array<std::size_t, 12> width{};
  for (std::size_t c = 0; c < kHeader.size(); ++c) {
    width[c] = std::string_view(kHeader[c]).size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const auto& row) {
    std::string l = pad_right(row[0], width[0]);
    for (std::size_t c = 1; c < row.size(); ++c) l += "  " + pad_left(row[c], width[c]);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    return l + '\n';
  };
  std::array<std::string, 12> header;
  for (std::size_t c = 0; c < kHeader.size(); ++c) header[c] = kHeader[c];
  std::string out = line(header);
  for (const auto& row : cells) out += line(row);
  out += "(min..max in ns; count and lost in samples)\n";
  for (const TableRow& r : rows) {
    if (r.summary.overflow != 0) {
      out += "note: " + r.name + ": " + std::to_string(r.summary.overflow) +
             " samples above the histogram's range were counted at its highest value\n";
    }
  }
  return out;
}

std::string format_table(const Histogram& h, std::uint64_t lost, std::string_view name) {
  const TableRow row{std::string(name), summarize(h, lost)};
  return format_table(std::span<const TableRow>(&row, 1));
}

}  // namespace tickrail
