#include "transport/rdma/common/table_region.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "tickrail/error.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma {

std::optional<detail::TableGeometry> granted_table(std::uint64_t addr, std::uint32_t capacity,
                                                   std::uint32_t classes, std::string& why) {
  const detail::TableGeometry g{capacity, classes};
  if (!g.valid()) {
    why = "a table of " + std::to_string(g.capacity) + " instruments and classes " +
          std::to_string(g.classes) + " (accepted: 1 to " + std::to_string(kMaxStateCapacity) +
          " instruments, classes 1 to 7)";
    return std::nullopt;
  }
  const std::uint64_t bytes = table_region_bytes(g);
  if (addr == 0 || addr % kCacheLine != 0 || addr > ~std::uint64_t{0} - bytes) {
    why = "a table at address " + std::to_string(addr) + " that is not a usable " +
          "cache-line-aligned range of " + std::to_string(bytes) + " bytes";
    return std::nullopt;
  }
  return g;
}

TableRegion::TableRegion(const StateConfig& state, bool lock_memory, const std::string& what) {
  const detail::TableGeometry g = detail::TableGeometry::of(state);
  if (!g.valid()) {
    throw Error(Errc::config_error, what + ": [state] keeps a table of " + std::to_string(g.capacity) +
                                        " instruments and no class, or too many instruments");
  }
  const std::size_t bytes = table_region_bytes(g);
  region_ = MappedRegion(bytes);
  region_.prefault();
  if (lock_memory && ::mlock(region_.data(), region_.size()) != 0) {
    throw Error(Errc::locked_memory, what + ": lock the " + std::to_string(bytes) +
                                         "-byte last-value table (" + std::to_string(g.capacity) +
                                         " instruments): " + std::strerror(errno) + "; " +
                                         locked_memory_advice(bytes));
  }
  auto* header = static_cast<TableHeader*>(region_.data());
  next_ = &header->table_next;
  std::atomic_ref<std::uint64_t>(*next_).store(1, std::memory_order_relaxed);
  writer_ = detail::LastValueWriter(reinterpret_cast<Slot*>(header + 1), g);
}

}  // namespace tickrail::rdma
