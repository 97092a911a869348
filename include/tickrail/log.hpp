// Logging for the control plane: one asynchronous spdlog logger writing to stderr.
//
// Never call it from a publish or poll path: formatting allocates and the queue may block.
// The level comes from TICKRAIL_LOG (trace, debug, info, warn, error, critical, off; default
// info), read when the logger is first created. A background thread writes the messages; its
// queue is written out and its thread joined at exit (an atexit handler); the logger itself is
// never destroyed, and code logging later in static destruction writes synchronously.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <optional>
#include <string_view>

namespace tickrail {

// The process-wide tickrail logger (named "tickrail"), created on first use; thread-safe.
// Use as logger()->info("...", args).
[[nodiscard]] const std::shared_ptr<spdlog::logger>& logger();

// "trace".."off" (also spdlog's "warning" and "err"); nullopt for anything else.
[[nodiscard]] std::optional<spdlog::level::level_enum> parse_log_level(std::string_view name);

}  // namespace tickrail
