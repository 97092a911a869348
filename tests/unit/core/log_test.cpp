#include <catch2/catch.hpp>

#include <spdlog/async_logger.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

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

namespace {

void log_after_the_drain() { logger()->warn("log test: logged during static destruction"); }

}  // namespace

// Run in a process of its own by the next test (hidden: "[.]").
TEST_CASE("logsAroundExit", "[.]") {
  std::atexit(log_after_the_drain);  // before the logger exists: runs after its exit drain
  for (int i = 0; i < 200; ++i) logger()->info("log test: queued before exit {}", i);
}

// Every message queued before exit is written, and logging after the drain (a static destroyed
// late) neither crashes nor touches a destroyed logger (the logger used to be a static whose
// destruction could race with its writer thread and leave later callers a dead object).
TEST_CASE("theLogIsWrittenOutAtExitAndLateLoggingIsHarmless") {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(out[1], STDERR_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::unsetenv("TICKRAIL_LOG");
    ::execl("/proc/self/exe", "test_log", "logsAroundExit", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (errno != EINTR) {
      break;
    }
  }
  ::close(out[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO(text);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(text.find("queued before exit 0") != std::string::npos);
  CHECK(text.find("queued before exit 199") != std::string::npos);
  CHECK(text.find("logged during static destruction") != std::string::npos);
}
