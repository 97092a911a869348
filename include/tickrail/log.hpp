// What the library says: control-plane messages (attach, detach, errors, warnings), never from
// a publish or poll path. By default a background thread writes them to stderr at the level
// TICKRAIL_LOG names (trace, debug, info, warn, error, critical, off; default info). An
// application with a log of its own takes them with set_log_handler.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

#include "tickrail/export.hpp"

namespace tickrail {

enum class LogLevel : int { trace, debug, info, warn, error, critical, off };

// "trace".."off" (also "warning" and "err"); nullopt for anything else.
[[nodiscard]] TICKRAIL_API std::optional<LogLevel> parse_log_level(std::string_view name) noexcept;
[[nodiscard]] TICKRAIL_API const char* to_string(LogLevel level) noexcept;

// Messages below `level` are dropped before they are formatted.
TICKRAIL_API void set_log_level(LogLevel level);
[[nodiscard]] TICKRAIL_API LogLevel log_level();

// Receives each message (the text alone, without time or level) instead of stderr. It is
// called on the library's log thread, one message at a time, in order; it must not throw (what
// it throws is dropped) and must not wait on a thread that is in a tickrail call. An empty
// handler sends messages to stderr again. Messages queued before the call may go either way.
using LogHandler = std::function<void(LogLevel level, std::string_view message)>;
TICKRAIL_API void set_log_handler(LogHandler handler);

}  // namespace tickrail
