// The last-value table an RDMA publisher keeps (RC and UD alike): one region of its memory that
// subscribers read with RDMA READ and nothing else, granted at connect (RC: the accept; UD: the
// recovery connection's accept):
//
//   [ TableHeader: table_next | capacity x kStateClasses 64-byte entries ]
//
// table_next: every tick below it is in the table. The publisher stores the entries of a batch,
// then table_next (release), after the ticks themselves are where a subscriber rolls its copy
// forward from (its ring, or the UD history): what TableDelivery relies on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/last_value.hpp"
#include "tickrail/config.hpp"
#include "tickrail/memory.hpp"

namespace tickrail::rdma {

struct alignas(kCacheLine) TableHeader {
  std::uint64_t table_next;
  std::uint64_t pad[7];
};
static_assert(sizeof(TableHeader) == kCacheLine);

[[nodiscard]] inline std::size_t table_region_bytes(detail::TableGeometry g) noexcept {
  return sizeof(TableHeader) + g.bytes();
}

// A granted table is usable when its geometry is valid and its range a cache-line-aligned
// address range that does not wrap; otherwise nullopt, and `why` says what is wrong.
[[nodiscard]] std::optional<detail::TableGeometry> granted_table(std::uint64_t addr, std::uint32_t capacity,
                                                                 std::uint32_t classes, std::string& why);

class TableRegion {
 public:
  TableRegion() = default;
  // Zeroed, pre-faulted (no page fault on the publish path) and, with lock_memory, locked.
  // Throws Error (config_error, locked_memory) naming `what`.
  TableRegion(const StateConfig& state, bool lock_memory, const std::string& what);

  [[nodiscard]] bool on() const noexcept { return writer_.on(); }
  [[nodiscard]] detail::TableGeometry geometry() const noexcept { return writer_.geometry(); }
  [[nodiscard]] void* data() const noexcept { return region_.data(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return table_region_bytes(geometry()); }
  [[nodiscard]] const detail::LastValueWriter& writer() const noexcept { return writer_; }

  // Publishing thread: ticks[i] was published as first + i. Stores only.
  void keep(std::span<const Tick> ticks, std::uint64_t first, std::uint64_t stamp,
            PublisherCounters& c) noexcept {
    if (!writer_.on()) return;
    writer_.update(ticks, first, stamp, c);
    std::atomic_ref<std::uint64_t>(*next_).store(first + ticks.size(), std::memory_order_release);
  }

 private:
  MappedRegion region_;
  detail::LastValueWriter writer_;
  std::uint64_t* next_ = nullptr;
};

}  // namespace tickrail::rdma
