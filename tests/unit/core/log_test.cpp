#include <catch2/catch.hpp>

#include <spdlog/async_logger.h>

#include <cstdlib>

#include "tickrail/log.hpp"

using namespace tickrail;

TEST_CASE("logLevelNamesParse") {
  using spdlog::level::level_enum;
  REQUIRE(parse_log_level("trace") == level_enum::trace);
  REQUIRE(parse_log_level("debug") == level_enum::debug);
  REQUIRE(parse_log_level("info") == level_enum::info);
  REQUIRE(parse_log_level("warn") == level_enum::warn);
  REQUIRE(parse_log_level("warning") == level_enum::warn);
  REQUIRE(parse_log_level("error") == level_enum::err);
  REQUIRE(parse_log_level("critical") == level_enum::critical);
  REQUIRE(parse_log_level("off") == level_enum::off);
  REQUIRE_FALSE(parse_log_level("loud").has_value());
  REQUIRE_FALSE(parse_log_level("").has_value());
  REQUIRE_FALSE(parse_log_level("INFO").has_value());
}

// The only test that creates the logger: it must see TICKRAIL_LOG as set here.
TEST_CASE("loggerIsOneAsyncLoggerAtTheLevelFromTheEnvironment") {
  REQUIRE(setenv("TICKRAIL_LOG", "debug", 1) == 0);
  const auto& log = logger();
  REQUIRE(log.get() == logger().get());
  REQUIRE(log->name() == "tickrail");
  REQUIRE(dynamic_cast<spdlog::async_logger*>(log.get()) != nullptr);
  REQUIRE(log->level() == spdlog::level::debug);
  REQUIRE(log->should_log(spdlog::level::debug));
  REQUIRE_FALSE(log->should_log(spdlog::level::trace));
  log->debug("log test: debug message {}", 42);
  log->flush();
}
