#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tickrail/tools/report.hpp"

using namespace tickrail;

TEST_CASE("jsonCarriesTheDocumentedKeysWithTheHistogramsFigures") {
  Histogram h;
  for (std::uint64_t v = 100; v < 100'000; v += 3) h.record(v);
  const Summary s = summarize(h, 11);
  const auto j = nlohmann::json::parse(format_json(h, 11));
  for (const char* key : {"count", "lost", "min_ns", "p50_ns", "mean_ns", "stdev_ns", "p90_ns",
                          "p99_ns", "p999_ns", "p9999_ns", "max_ns"}) {
    INFO(key);
    REQUIRE(j.contains(key));
  }
  REQUIRE(j["count"].get<std::uint64_t>() == h.count());
  REQUIRE(j["lost"].get<std::uint64_t>() == 11);
  REQUIRE(j["overflow"].get<std::uint64_t>() == 0);
  REQUIRE(j["min_ns"].get<double>() == 100.0);
  REQUIRE(j["max_ns"].get<double>() == static_cast<double>(h.max()));
  REQUIRE(j["p50_ns"].get<double>() == static_cast<double>(h.value_at_percentile(50.0)));
  REQUIRE(j["p99_ns"].get<double>() == static_cast<double>(h.value_at_percentile(99.0)));
  REQUIRE(j["p999_ns"].get<double>() == s.p999_ns);
  REQUIRE(j["p9999_ns"].get<double>() == s.p9999_ns);
  REQUIRE(j["mean_ns"].get<double>() == h.mean());
  REQUIRE(j["stdev_ns"].get<double>() == h.stdev());
  REQUIRE(j["stdev_ns"].get<double>() > 0.0);
}

TEST_CASE("jsonTakesExtraKeys") {
  Histogram h;
  h.record(42);
  nlohmann::json extra = {{"mode", "one-way"}, {"transport", "shm"}, {"lost", 5}};
  const auto j = nlohmann::json::parse(format_json(h, 0, extra));
  REQUIRE(j["mode"] == "one-way");
  REQUIRE(j["transport"] == "shm");
  REQUIRE(j["lost"] == 5);  // extra is merged last
  REQUIRE(j["count"] == 1);

  nlohmann::json obj = to_json(summarize(h));
  obj["clock"] = "TSC";
  REQUIRE(obj.size() == 13);
}
