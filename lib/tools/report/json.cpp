#include "tickrail/tools/report.hpp"

namespace tickrail {

nlohmann::json to_json(const Summary& s) {
  return nlohmann::json{
      {"count", s.count},       {"lost", s.lost},         {"overflow", s.overflow},
      {"min_ns", s.min_ns},     {"p50_ns", s.p50_ns},     {"mean_ns", s.mean_ns},
      {"stdev_ns", s.stdev_ns}, {"p90_ns", s.p90_ns},     {"p99_ns", s.p99_ns},
      {"p999_ns", s.p999_ns},   {"p9999_ns", s.p9999_ns}, {"max_ns", s.max_ns},
  };
}

std::string format_json(const Histogram& h, std::uint64_t lost, const nlohmann::json& extra) {
  nlohmann::json j = to_json(summarize(h, lost));
  if (extra.is_object()) j.update(extra);
  return j.dump(2) + '\n';
}

}  // namespace tickrail
