#include <catch2/catch.hpp>

#include <spdlog/async_logger.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/log.hpp"

using namespace tickrail;

TEST_CASE("logLevelNamesParse") {
  REQUIRE(parse_log_level("trace") == LogLevel::trace);
  REQUIRE(parse_log_level("debug") == LogLevel::debug);
  REQUIRE(parse_log_level("info") == LogLevel::info);
  REQUIRE(parse_log_level("warn") == LogLevel::warn);
  REQUIRE(parse_log_level("warning") == LogLevel::warn);
  REQUIRE(parse_log_level("error") == LogLevel::error);
  REQUIRE(parse_log_level("err") == LogLevel::error);
  REQUIRE(parse_log_level("critical") == LogLevel::critical);
  REQUIRE(parse_log_level("off") == LogLevel::off);
  REQUIRE_FALSE(parse_log_level("loud").has_value());
  REQUIRE_FALSE(parse_log_level("").has_value());
  REQUIRE_FALSE(parse_log_level("INFO").has_value());
  for (const LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn,
                           LogLevel::error, LogLevel::critical, LogLevel::off}) {
    REQUIRE(parse_log_level(to_string(l)) == l);
  }
}

// The only test that creates the logger: it must see TICKRAIL_LOG as set here.
TEST_CASE("loggerIsOneAsyncLoggerAtTheLevelFromTheEnvironment") {
  REQUIRE(setenv("TICKRAIL_LOG", "debug", 1) == 0);
  const auto& log = logger();
  REQUIRE(log.get() == logger().get());
  REQUIRE(log->name() == "tickrail");
  REQUIRE(dynamic_cast<spdlog::async_logger*>(log.get()) != nullptr);
  REQUIRE(log_level() == LogLevel::debug);
  REQUIRE(log->should_log(spdlog::level::debug));
  REQUIRE_FALSE(log->should_log(spdlog::level::trace));
  log->debug("log test: debug message {}", 42);
  log->flush();
}

// An application's handler gets the library's messages (text and level, in order) at the level
// it set, and stderr gets them again once the handler is removed.
TEST_CASE("anApplicationTakesTheLogWithAHandler") {
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::pair<LogLevel, std::string>> got;
  set_log_handler([&](LogLevel level, std::string_view text) {
    if (!text.starts_with("handler test: ")) return;  // queued by an earlier test
    std::lock_guard lock(m);
    got.emplace_back(level, std::string(text));
    cv.notify_all();
  });
  set_log_level(LogLevel::info);
  REQUIRE(log_level() == LogLevel::info);
  logger()->debug("handler test: below the level");
  logger()->info("handler test: {} of {}", 1, 2);
  logger()->error("handler test: 2 of 2");
  {
    std::unique_lock lock(m);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return got.size() >= 2; }));
    REQUIRE(got.size() == 2);
    CHECK(got[0] == std::pair(LogLevel::info, std::string("handler test: 1 of 2")));
    CHECK(got[1] == std::pair(LogLevel::error, std::string("handler test: 2 of 2")));
  }
  set_log_handler({});
  logger()->info("handler test: back on stderr");
  // A later handler sees what comes after it; the removed one hears nothing more.
  std::atomic<bool> sentinel{false};
  set_log_handler([&](LogLevel, std::string_view text) {
    if (text == "handler test: sentinel") sentinel = true;
  });
  logger()->info("handler test: sentinel");
  for (int i = 0; i < 10'000 && !sentinel; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  set_log_handler({});
  REQUIRE(sentinel);
  std::lock_guard lock(m);
  CHECK(got.size() == 2);
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
