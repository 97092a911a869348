// Names in the counters file are stored as 64-bit words so that readers in other processes load
// them atomically, like every other field (a byte copy racing with a writer is a data race).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

#include "core/stats.hpp"

namespace tickrail::stats {

// Stores `s` NUL-padded (truncated to fit, leaving at least one NUL) into `n` words.
inline void store_name(Word* w, std::size_t n, std::string_view s) noexcept {
  char buf[kNameWords * 8] = {};
  const std::size_t bytes = std::min(n * 8, sizeof buf);
  if (!s.empty()) std::memcpy(buf, s.data(), std::min(s.size(), bytes - 1));  // an empty view may hold no pointer
  for (std::size_t i = 0; i < n && i * 8 < bytes; ++i) {
    std::uint64_t v = 0;
    std::memcpy(&v, buf + i * 8, 8);
    w[i].store(v, std::memory_order_relaxed);
  }
}

inline std::string load_name(const Word* w, std::size_t n) {
  char buf[kNameWords * 8 + 1] = {};
  const std::size_t words = std::min(n, kNameWords);
  for (std::size_t i = 0; i < words; ++i) {
    const std::uint64_t v = w[i].load(std::memory_order_relaxed);
    std::memcpy(buf + i * 8, &v, 8);
  }
  return std::string(buf, strnlen(buf, words * 8));
}

}  // namespace tickrail::stats
