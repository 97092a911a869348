#include "tickrail/tools/feed/symbol_directory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tickrail/error.hpp"

namespace tickrail::feed {

namespace {
constexpr std::size_t kTableBytes = SymbolDirectory::kLocates * SymbolDirectory::kSymbolLength;
}  // namespace

void SymbolDirectory::Unmap::operator()(Entry* p) const noexcept { ::munmap(p, kTableBytes); }

SymbolDirectory::SymbolDirectory() {
  void* m = ::mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw_errno(errno, "symbol directory: mmap of 512 KiB");
  table_.reset(static_cast<Entry*>(m));
}

bool SymbolDirectory::set(std::uint16_t locate, std::string_view symbol8) noexcept {
  Entry e{};
  std::memcpy(e.data(), symbol8.data(), std::min(symbol8.size(), kSymbolLength));
  Entry& slot = table_[locate];
  const bool was_empty = slot[0] == '\0';
  const bool same = slot == e;
  if (was_empty) ++size_;
  slot = e;
  return was_empty || same;
}

std::string_view SymbolDirectory::symbol(std::uint32_t locate) const noexcept {
  if (locate >= kLocates) return {};
  const Entry& e = table_[locate];
  std::size_t n = kSymbolLength;
  while (n > 0 && (e[n - 1] == ' ' || e[n - 1] == '\0')) --n;
  return {e.data(), n};
}

std::uint16_t SymbolDirectory::find(std::string_view sym) const noexcept {
  while (!sym.empty() && sym.back() == ' ') sym.remove_suffix(1);
  if (sym.empty() || sym.size() > kSymbolLength) return 0;
  for (std::size_t i = 1; i < kLocates; ++i) {
    if (symbol(static_cast<std::uint32_t>(i)) == sym) return static_cast<std::uint16_t>(i);
  }
  return 0;
}

}  // namespace tickrail::feed
