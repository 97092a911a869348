#include <algorithm>
#include <cerrno>
#include <fstream>

#include "tickrail/error.hpp"
#include "tickrail/report.hpp"

namespace tickrail {

Summary summarize(const Histogram& h, std::uint64_t lost) {
  Summary s;
  s.count = h.count();
  s.lost = lost;
  s.overflow = h.overflow_count();
  if (h.empty()) return s;
  const auto max = static_cast<double>(h.max());
  const auto at = [&](double p) {
    return std::min(static_cast<double>(h.value_at_percentile(p)), max);
  };
  s.min_ns = static_cast<double>(h.min());
  s.p50_ns = at(50.0);
  s.mean_ns = h.mean();
  s.stdev_ns = h.stdev();
  s.p90_ns = at(90.0);
  s.p99_ns = at(99.0);
  s.p999_ns = at(99.9);
  s.p9999_ns = at(99.99);
  s.max_ns = max;
  return s;
}

void write_text_file(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw_errno(errno, "open " + path + " for writing");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw_errno(errno, "write " + path);
}

}  // namespace tickrail
