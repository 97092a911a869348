#include "core/log.hpp"

#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "core/enum_names.hpp"
#include "core/thread.hpp"

namespace tickrail {
namespace {

constexpr std::size_t kQueueSize = 8192;

constexpr detail::EnumName<LogLevel> kLevelNames[] = {
    {LogLevel::trace, "trace"}, {LogLevel::debug, "debug"},       {LogLevel::info, "info"},
    {LogLevel::warn, "warn"},   {LogLevel::error, "error"},       {LogLevel::critical, "critical"},
    {LogLevel::off, "off"},
};
static_assert(detail::names_every_value(kLevelNames));

LogLevel from_spdlog(spdlog::level::level_enum l) noexcept {
  switch (l) {
    case spdlog::level::trace: return LogLevel::trace;
    case spdlog::level::debug: return LogLevel::debug;
    case spdlog::level::info: return LogLevel::info;
    case spdlog::level::warn: return LogLevel::warn;
    case spdlog::level::err: return LogLevel::error;
    case spdlog::level::critical: return LogLevel::critical;
    default: return LogLevel::off;
  }
}

// stderr, or the application's handler when it has set one. spdlog's base_sink holds its mutex
// around every call, so the handler is swapped under the same lock the messages are written under.
class HandlerSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_handler(LogHandler handler) {
    std::lock_guard lock(mutex_);
    handler_ = std::move(handler);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!handler_) {
      stderr_.log(msg);
      return;
    }
    try {
      handler_(from_spdlog(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
    } catch (...) {  // the application's exception has nowhere to go on the log thread
    }
  }
  void flush_() override { stderr_.flush(); }
  void set_pattern_(const std::string& pattern) override { stderr_.set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> f) override {
    stderr_.set_formatter(std::move(f));
  }

 private:
  LogHandler handler_;
  spdlog::sinks::stderr_color_sink_st stderr_;
};

struct AsyncLog {
  // Our own pool, not spdlog's global one, so an application's spdlog setup is left alone.
  // Its one thread is named and placed like the endpoints' background threads (core/thread.hpp).
  std::shared_ptr<spdlog::details::thread_pool> pool = std::make_shared<spdlog::details::thread_pool>(
      kQueueSize, 1, [] { detail::enter_process_thread("tr-log"); },
      [] { detail::leave_process_thread(); });
  std::shared_ptr<HandlerSink> sink = std::make_shared<HandlerSink>();
  std::shared_ptr<spdlog::logger> log;
  // After the drain: the same sink, written by the caller (the async one would throw).
  std::shared_ptr<spdlog::logger> late;
  std::atomic<bool> drained{false};

  AsyncLog() {
    // Control-plane messages are rare and must not be lost: block when the queue is full.
    log = std::make_shared<spdlog::async_logger>("tickrail", sink, pool,
                                                 spdlog::async_overflow_policy::block);
    late = std::make_shared<spdlog::logger>("tickrail", sink);
    const char* env = std::getenv("TICKRAIL_LOG");
    const auto level = parse_log_level(env != nullptr ? env : "info");
    for (const auto& l : {log, late}) {
      l->set_pattern("%Y-%m-%dT%H:%M:%S.%f %^%l%$ tickrail: %v");
      l->set_level(to_spdlog(level.value_or(LogLevel::info)));
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

spdlog::level::level_enum to_spdlog(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::critical: return spdlog::level::critical;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::off;
}

std::optional<LogLevel> parse_log_level(std::string_view name) noexcept {
  if (name == "warning") return LogLevel::warn;
  if (name == "err") return LogLevel::error;
  return detail::value_of(kLevelNames, name);
}

const char* to_string(LogLevel level) noexcept { return detail::name_of(kLevelNames, level); }

void set_log_level(LogLevel level) {
  AsyncLog& l = async_log();
  if (!l.drained.load(std::memory_order_acquire)) l.log->set_level(to_spdlog(level));
  l.late->set_level(to_spdlog(level));
}

LogLevel log_level() { return from_spdlog(logger()->level()); }

void set_log_handler(LogHandler handler) { async_log().sink->set_handler(std::move(handler)); }

}  // namespace tickrail
