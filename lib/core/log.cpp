#include "tickrail/log.hpp"

#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

namespace tickrail {
namespace {

constexpr std::size_t kQueueSize = 8192;

struct AsyncLog {
  // Our own pool, not spdlog's global one, so an application's spdlog setup is left alone.
  std::shared_ptr<spdlog::details::thread_pool> pool =
      std::make_shared<spdlog::details::thread_pool>(kQueueSize, 1);
  std::shared_ptr<spdlog::logger> log;
  // After the drain: the same sink, written by the caller (the async one would throw).
  std::shared_ptr<spdlog::logger> late;
  std::atomic<bool> drained{false};

  AsyncLog() {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    // Control-plane messages are rare and must not be lost: block when the queue is full.
    log = std::make_shared<spdlog::async_logger>("tickrail", sink, pool,
                                                 spdlog::async_overflow_policy::block);
    late = std::make_shared<spdlog::logger>("tickrail", std::move(sink));
    const char* env = std::getenv("TICKRAIL_LOG");
    const auto level = parse_log_level(env != nullptr ? env : "info");
    for (const auto& l : {log, late}) {
      l->set_pattern("%Y-%m-%dT%H:%M:%S.%f %^%l%$ tickrail: %v");
      l->set_level(level.value_or(spdlog::level::info));
    }
    log->flush_on(spdlog::level::warn);
    if (env != nullptr && !level) {
      log->warn("TICKRAIL_LOG='{}' is not one of trace, debug, info, warn, error, critical, off: "
                "using info", env);
    }
  }
  // Writes what is queued and joins the writer thread. The logger stays: queued messages hold
  // references to it, and the last one must not be dropped on the writer thread while this
  // thread destroys statics (that deleted the logger on the writer thread, racing with us).
  void drain() noexcept {
    drained.store(true, std::memory_order_release);
    late->set_level(log->level());
    log->set_level(spdlog::level::off);  // a caller that still holds it: dropped, not thrown
    log->flush();
    pool.reset();  // the only owner: joins the thread after it has written everything queued
  }
};

AsyncLog& async_log();

void drain_at_exit() { async_log().drain(); }

AsyncLog& async_log() {
  // Leaked, never destroyed: code that logs during static destruction (after the drain) gets
  // the synchronous logger instead of a destroyed one.
  static AsyncLog* const instance = [] {
    auto* l = new AsyncLog;
    std::atexit(drain_at_exit);
    return l;
  }();
  return *instance;
}

}  // namespace

const std::shared_ptr<spdlog::logger>& logger() {
  AsyncLog& l = async_log();
  return l.drained.load(std::memory_order_acquire) ? l.late : l.log;
}

std::optional<spdlog::level::level_enum> parse_log_level(std::string_view name) {
  using spdlog::level::level_enum;
  if (name == "trace") return level_enum::trace;
  if (name == "debug") return level_enum::debug;
  if (name == "info") return level_enum::info;
  if (name == "warn" || name == "warning") return level_enum::warn;
  if (name == "error" || name == "err") return level_enum::err;
  if (name == "critical") return level_enum::critical;
  if (name == "off") return level_enum::off;
  return std::nullopt;
}

}  // namespace tickrail
