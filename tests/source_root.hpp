// Where the tests find the sources (configs/, docs/) and the real ITCH excerpts beside them:
// through Meson, which sets TICKRAIL_SOURCE_ROOT in every test's environment, so that a build
// directory anywhere (a packager's /tmp/build) sees the same files as one inside the tree.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace tickrail::source_tree {

// $TICKRAIL_SOURCE_ROOT; run by hand without it, the first parent of the working directory that
// holds include/tickrail/tick.hpp. Empty when neither finds the sources.
inline std::filesystem::path root() {
  if (const char* env = std::getenv("TICKRAIL_SOURCE_ROOT"); env != nullptr && *env != '\0') {
    return env;
  }
  std::filesystem::path d = std::filesystem::current_path();
  for (int up = 0; up < 4 && !d.empty(); ++up, d = d.parent_path()) {
    if (std::filesystem::exists(d / "include/tickrail/tick.hpp")) return d;
  }
  return {};
}

// The real excerpts: $TICKRAIL_ITCH_DATA, else ../shared/data/itch beside the source root.
// Empty when absent (they are never copied into the project).
inline std::filesystem::path itch_data_dir() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("TICKRAIL_ITCH_DATA"); env != nullptr && *env != '\0') {
    dir = env;
  } else if (const std::filesystem::path src = root(); !src.empty()) {
    dir = src.parent_path() / "shared/data/itch";
  }
  return std::filesystem::is_directory(dir) ? dir : std::filesystem::path();
}

}  // namespace tickrail::source_tree
