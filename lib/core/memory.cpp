#include "tickrail/memory.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "core/enum_names.hpp"
#include "tickrail/error.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace tickrail {
namespace {

constexpr std::size_t kTwoMiB = std::size_t{2} << 20;

std::string bytes_text(std::uint64_t b) {
  if (b == std::numeric_limits<std::uint64_t>::max()) return "unlimited";
  char buf[48];
  if (b >= (1ULL << 30) && b % (1ULL << 30) == 0) {
    std::snprintf(buf, sizeof buf, "%llu GiB", static_cast<unsigned long long>(b >> 30));
  } else if (b >= (1ULL << 20) && b % (1ULL << 20) == 0) {
    std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(b >> 20));
  } else if (b >= 1024 && b % 1024 == 0) {
    std::snprintf(buf, sizeof buf, "%llu KiB", static_cast<unsigned long long>(b >> 10));
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  }
  return buf;
}

std::uint64_t limit_value(rlim_t v) {
  return v == RLIM_INFINITY ? std::numeric_limits<std::uint64_t>::max()
                            : static_cast<std::uint64_t>(v);
}

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Default huge page size from /proc/meminfo ("Hugepagesize:    2048 kB").
std::size_t huge_page_size() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  while (in >> key) {
    if (key == "Hugepagesize:") {
      std::size_t kb = 0;
      if (in >> kb && kb > 0) return kb * 1024;
      break;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return kTwoMiB;
}

bool thp_disabled() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  return line.find("[never]") != std::string::npos;
}

}  // namespace

std::uint64_t memlock_limit() noexcept {
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return 0;
  return limit_value(rl.rlim_cur);
}

std::string memlock_failure_message(int err) {
  rlimit rl{};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  std::string m = "mlockall(MCL_CURRENT|MCL_FUTURE) failed: ";
  m += std::strerror(err);
  m += "; RLIMIT_MEMLOCK is " + bytes_text(limit_value(rl.rlim_cur)) + " (hard limit " +
       bytes_text(limit_value(rl.rlim_max)) +
       ") and the process needs all its mapped memory locked. Fix: run `ulimit -l unlimited` "
       "before starting it (raising the hard limit needs root: '<user> - memlock unlimited' in "
       "/etc/security/limits.conf, LimitMEMLOCK=infinity for a systemd unit, --ulimit "
       "memlock=-1 for docker), or give it CAP_IPC_LOCK. Without locking, pages can be swapped "
       "out and fault on the hot path";
  return m;
}

LockResult lock_all_memory() {
  LockResult r;
  if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
    r.ok = true;
    return r;
  }
  r.message = memlock_failure_message(errno);
  return r;
}

std::size_t page_size() noexcept {
  static const std::size_t size = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::size_t>(p) : std::size_t{4096};
  }();
  return size;
}

void prefault(void* addr, std::size_t len) noexcept {
  if (addr == nullptr || len == 0) return;
  const std::size_t page = page_size();
  const auto start = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t first = start / page * page;
  const std::uintptr_t end = start + len;
  if (madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE) == 0) return;
  // Older kernel: write each page's first byte back to itself (a write fault maps the page).
  auto* p = static_cast<volatile unsigned char*>(addr);
  for (std::size_t off = 0; off < len; off += page - ((start + off) % page)) {
    p[off] = p[off];
  }
}

namespace {
constexpr detail::EnumName<PageKind> kPageNames[] = {{PageKind::normal, "normal pages"},
    {PageKind::transparent_huge, "transparent huge pages (madvise)"},
    {PageKind::huge_tlb, "huge pages (MAP_HUGETLB)"}};
}  // namespace

const char* to_string(PageKind kind) noexcept { return detail::name_of(kPageNames, kind); }

MappedRegion::MappedRegion(std::size_t bytes, bool huge_pages) {
  if (bytes == 0) throw Error(Errc::invalid_argument, "map anonymous region: size 0");
  constexpr int kProt = PROT_READ | PROT_WRITE;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (!huge_pages) {
    size_ = round_up(bytes, tickrail::page_size());
    void* p = mmap(nullptr, size_, kProt, kFlags, -1, 0);
    if (p == MAP_FAILED) throw_errno(errno, "mmap " + std::to_string(size_) + " bytes anonymous");
    data_ = p;
    page_ = tickrail::page_size();
    kind_ = PageKind::normal;
    return;
  }

  const std::size_t huge = huge_page_size();
  const std::size_t huge_size = round_up(bytes, huge);
  void* p = mmap(nullptr, huge_size, kProt, kFlags | MAP_HUGETLB, -1, 0);
  if (p != MAP_FAILED) {
    data_ = p;
    size_ = huge_size;
    page_ = huge;
    kind_ = PageKind::huge_tlb;
    return;
  }
  fallback_reason_ = "MAP_HUGETLB of " + bytes_text(huge_size) + " failed: " +
                     std::strerror(errno) + " (reserve pages: sysctl vm.nr_hugepages=" +
                     std::to_string(huge_size / huge) + ")";

  // Transparent huge pages need 2 MiB-aligned ranges: over-map, then trim both ends.
  size_ = round_up(bytes, kTwoMiB);
  void* raw = mmap(nullptr, size_ + kTwoMiB, kProt, kFlags, -1, 0);
  if (raw == MAP_FAILED) {
    throw_errno(errno, "mmap " + std::to_string(size_ + kTwoMiB) + " bytes anonymous");
  }
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(base, kTwoMiB);
  if (aligned > base) munmap(raw, aligned - base);
  const std::uintptr_t tail = aligned + size_;
  const std::uintptr_t raw_end = base + size_ + kTwoMiB;
  if (raw_end > tail) munmap(reinterpret_cast<void*>(tail), raw_end - tail);
  data_ = reinterpret_cast<void*>(aligned);
  page_ = tickrail::page_size();
  if (thp_disabled()) {
    fallback_reason_ += "; transparent huge pages are disabled (/sys/kernel/mm/transparent_hugepage/enabled)";
    kind_ = PageKind::normal;
  } else if (madvise(data_, size_, MADV_HUGEPAGE) == 0) {
    kind_ = PageKind::transparent_huge;
  } else {
    fallback_reason_ += std::string("; madvise(MADV_HUGEPAGE) failed: ") + std::strerror(errno);
    kind_ = PageKind::normal;
  }
}

MappedRegion::~MappedRegion() { release(); }

MappedRegion::MappedRegion(MappedRegion&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      page_(std::exchange(other.page_, 0)),
      kind_(other.kind_),
      fallback_reason_(std::move(other.fallback_reason_)) {}

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    page_ = std::exchange(other.page_, 0);
    kind_ = other.kind_;
    fallback_reason_ = std::move(other.fallback_reason_);
  }
  return *this;
}

void MappedRegion::release() noexcept {
  if (data_ != nullptr) {
    munmap(data_, size_);  // only fails for a bad range, which we never hand it
    data_ = nullptr;
    size_ = 0;
  }
}

}  // namespace tickrail
