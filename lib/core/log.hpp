// The library's logger, inside the library: one asynchronous spdlog logger writing to stderr, or
// to the application's handler (tickrail/log.hpp is what applications see; spdlog stays here).
//
// Never call it from a publish or poll path: formatting allocates and the queue may block.
// The level comes from TICKRAIL_LOG (trace, debug, info, warn, error, critical, off; default
// info), read when the logger is first created, or from set_log_level. A background thread
// writes the messages; its queue is written out and its thread joined at exit (an atexit
// handler); the logger itself is never destroyed, and code logging later in static destruction
// writes synchronously.
#pragma once

#include <spdlog/logger.h>

#include <memory>

#include "tickrail/log.hpp"

namespace tickrail {

// The process-wide tickrail logger (named "tickrail"), created on first use; thread-safe.
// Use as logger()->info("...", args).
[[nodiscard]] const std::shared_ptr<spdlog::logger>& logger();

[[nodiscard]] spdlog::level::level_enum to_spdlog(LogLevel level) noexcept;

}  // namespace tickrail
