// Small text helpers shared by the programs' reports.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>

namespace tickrail::cli {

// printf into a std::string (at most 511 characters: one line of a report).
template <class... Args>
std::string fmt(const char* f, Args... args) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, f, args...);
  return std::string(buf, static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
}

}  // namespace tickrail::cli
