// Who a process is, from /proc: what tells a live process from a dead one whose pid was reused,
// and which users it runs as. Control plane; every value read is validated (a /proc file may
// name any command, and tests pass a fake /proc).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tickrail::detail {

// Field 22 (start time since boot, in units of sysconf(_SC_CLK_TCK)) of a /proc/<pid>/stat
// line; nullopt when the line does not parse. The command name (field 2) may hold spaces and
// parentheses: fields resume after the last ')'.
[[nodiscard]] std::optional<std::uint64_t> parse_start_time(std::string_view stat_line) noexcept;

// The start time of process `pid` read from <root>/proc/<pid>/stat ("/" on a real host);
// nullopt when the process does not exist or the file does not parse. Together with the pid it
// names one process: a pid reused by another process has another start time.
[[nodiscard]] std::optional<std::uint64_t> process_start_time(int pid,
                                                              const std::string& root = "/");

// The uids of process `pid` (real, effective, saved, filesystem) from <root>/proc/<pid>/status;
// empty when unreadable.
[[nodiscard]] std::vector<uid_t> process_uids(int pid, const std::string& root = "/");

}  // namespace tickrail::detail
