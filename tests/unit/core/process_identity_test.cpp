#include "core/process_identity.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include "../ops/ops_test_util.hpp"

using namespace tickrail;
using tickrail::test::TempDir;

namespace {
// A /proc/<pid>/stat line whose field 22 is `start`, with `comm` as the command name.
std::string stat_line(const std::string& comm, const std::string& start) {
  return "42 (" + comm + ") S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 " + start +
         " 1000 10\n";
}
}  // namespace

TEST_CASE("startTimeIsField22WhateverTheCommandNameHolds") {
  CHECK(detail::parse_start_time(stat_line("sh", "987654")) == std::optional<std::uint64_t>(987654));
  // Spaces and parentheses in the name: fields resume after the LAST ')'.
  CHECK(detail::parse_start_time(stat_line("a) b) (c", "987654")) ==
        std::optional<std::uint64_t>(987654));
  // A name crafted to look like the rest of the line cannot move field 22.
  CHECK(detail::parse_start_time(stat_line(") S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 1",
                                           "555")) == std::optional<std::uint64_t>(555));
  CHECK(detail::parse_start_time(stat_line("x", "18446744073709551615")) ==
        std::optional<std::uint64_t>(18446744073709551615ULL));
}

TEST_CASE("aStatLineThatDoesNotParseHasNoStartTime") {
  CHECK_FALSE(detail::parse_start_time("").has_value());
  CHECK_FALSE(detail::parse_start_time("garbage").has_value());
  CHECK_FALSE(detail::parse_start_time("43 (short) S 1 2 3\n").has_value());
  CHECK_FALSE(detail::parse_start_time(stat_line("x", "12a4")).has_value());
  CHECK_FALSE(detail::parse_start_time(stat_line("x", "-5")).has_value());
  CHECK_FALSE(detail::parse_start_time(stat_line("x", "18446744073709551616")).has_value());  // 2^64
}

TEST_CASE("processStartTimeReadsProcUnderTheGivenRoot") {
  TempDir root("proc");
  root.write("proc/42/stat", stat_line("a) b) (c", "987654"));
  CHECK(detail::process_start_time(42, root.path()) == std::optional<std::uint64_t>(987654));
  root.write("proc/44/stat", "garbage");
  CHECK_FALSE(detail::process_start_time(44, root.path()).has_value());
  CHECK_FALSE(detail::process_start_time(45, root.path()).has_value());  // no such process
  CHECK_FALSE(detail::process_start_time(0).has_value());
  CHECK_FALSE(detail::process_start_time(-1).has_value());
  const auto mine = detail::process_start_time(::getpid());
  REQUIRE(mine.has_value());
  CHECK(detail::process_start_time(::getpid()) == mine);  // the same process, the same identity
}

TEST_CASE("processUidsAreTheUidLineOfStatus") {
  TempDir root("proc");
  root.write("proc/42/status", "Name:\tx\nUmask:\t0022\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\n");
  CHECK(detail::process_uids(42, root.path()) == std::vector<uid_t>{1000, 1001, 1002, 1003});
  root.write("proc/43/status", "Name:\tno uid line\n");
  CHECK(detail::process_uids(43, root.path()).empty());
  CHECK(detail::process_uids(44, root.path()).empty());
  CHECK(detail::process_uids(0).empty());
  const auto mine = detail::process_uids(::getpid());
  REQUIRE(mine.size() == 4);
  CHECK(mine[0] == ::getuid());
  CHECK(mine[1] == ::geteuid());
}
