#include "rounds.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace tickrail::bench {

FreshMemory::FreshMemory(std::size_t bytes)
    : bytes_(bytes), p_(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0)) {
  if (p_ == MAP_FAILED) {
    throw Error(Errc::unsupported, "fresh memory for a run (" + std::to_string(bytes) + " bytes): mmap: " +
                                       std::strerror(errno));
  }
}

FreshMemory::~FreshMemory() { ::munmap(p_, bytes_); }

double median_of(std::vector<std::uint64_t>& v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const std::uint64_t m = v[n / 2];
  const auto lo = static_cast<double>(std::lower_bound(v.begin(), v.end(), m) - v.begin());
  const auto hi = static_cast<double>(std::upper_bound(v.begin(), v.end(), m) - v.begin());
  std::uint64_t step = 0;  // the gap to the nearest other value, either side
  if (lo > 0) step = m - v[static_cast<std::size_t>(lo) - 1];
  if (hi < static_cast<double>(n)) {
    const std::uint64_t up = v[static_cast<std::size_t>(hi)] - m;
    if (step == 0 || up < step) step = up;
  }
  const auto w = static_cast<double>(step);
  return static_cast<double>(m) - w / 2 + w * (static_cast<double>(n) / 2 - lo) / (hi - lo);
}

}  // namespace tickrail::bench
