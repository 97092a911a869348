// Memory that never page-faults on the hot path: mlockall, pre-faulting, huge-page regions.
// Control plane: call these at startup, before the loops that must not fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include "tickrail/export.hpp"

namespace tickrail {

struct TICKRAIL_API LockResult {
  bool ok = false;
  std::string message;  // when !ok: the errno text, RLIMIT_MEMLOCK and how to raise it
  explicit operator bool() const noexcept { return ok; }
};

// mlockall(MCL_CURRENT | MCL_FUTURE). Never throws. Note that with MCL_FUTURE every later
// mapping counts against RLIMIT_MEMLOCK too: once locked, a process without CAP_IPC_LOCK can
// fail to map more than its limit.
[[nodiscard]] TICKRAIL_API LockResult lock_all_memory();

// Soft RLIMIT_MEMLOCK in bytes; UINT64_MAX when unlimited.
[[nodiscard]] TICKRAIL_API std::uint64_t memlock_limit() noexcept;

// The message lock_all_memory() gives for a failed mlockall with errno `err` (exposed for tests).
[[nodiscard]] TICKRAIL_API std::string memlock_failure_message(int err);

[[nodiscard]] TICKRAIL_API std::size_t page_size() noexcept;

// Faults in every page of [addr, addr + len) for writing, without changing its contents
// (MADV_POPULATE_WRITE; on kernels before 5.14, a read and write-back of one byte per page, so
// call it before another thread or process writes the memory). The range must be writable.
TICKRAIL_API void prefault(void* addr, std::size_t len) noexcept;

enum class PageKind {
  normal,            // base pages
  transparent_huge,  // base-page mapping, 2 MiB aligned, madvise(MADV_HUGEPAGE) accepted
  huge_tlb,          // MAP_HUGETLB: reserved huge pages
};
[[nodiscard]] TICKRAIL_API const char* to_string(PageKind kind) noexcept;

// An anonymous private mapping, owned. With huge_pages it first tries MAP_HUGETLB (the size
// rounded up to the huge page size), then falls back to a 2 MiB-aligned normal mapping with
// madvise(MADV_HUGEPAGE); page_kind() says what it got and fallback_reason() why.
class TICKRAIL_API MappedRegion {
 public:
  MappedRegion() noexcept = default;
  // Throws Error naming the size when mmap fails.
  explicit MappedRegion(std::size_t bytes, bool huge_pages = false);
  ~MappedRegion();
  MappedRegion(MappedRegion&& other) noexcept;
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }  // mapped, >= requested
  [[nodiscard]] PageKind page_kind() const noexcept { return kind_; }
  [[nodiscard]] std::size_t page_size() const noexcept { return page_; }
  [[nodiscard]] const std::string& fallback_reason() const noexcept { return fallback_reason_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

  void prefault() noexcept { tickrail::prefault(data_, size_); }

 private:
  void release() noexcept;

  void* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t page_ = 0;
  PageKind kind_ = PageKind::normal;
  std::string fallback_reason_;
};

}  // namespace tickrail
