// SymbolDirectory: stock locate -> 8-character symbol, learned from ITCH Stock Directory (R)
// messages. Locates are 16-bit and assigned from 1 each day, so a flat table indexed by locate is
// the fastest map (512 KiB, allocated once at construction; set() and symbol() never allocate).
// The table is an anonymous mapping: zero pages, committed only for the locates in use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace tickrail::feed {

class SymbolDirectory {
 public:
  static constexpr std::size_t kLocates = 65536;
  static constexpr std::size_t kSymbolLength = 8;

  SymbolDirectory();

  // Records the symbol of a locate (8 bytes, space padded as on the wire). Returns false when the
  // locate already had a different symbol (a second directory entry for it: kept, last wins).
  bool set(std::uint16_t locate, std::string_view symbol8) noexcept;

  // The symbol without its trailing spaces; empty when the directory has no entry for it.
  [[nodiscard]] std::string_view symbol(std::uint32_t locate) const noexcept;
  [[nodiscard]] bool known(std::uint32_t locate) const noexcept { return !symbol(locate).empty(); }
  // The locate of a symbol (space padding optional); 0 when unknown. Linear: not for hot paths.
  [[nodiscard]] std::uint16_t find(std::string_view symbol) const noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  using Entry = std::array<char, kSymbolLength>;
  struct Unmap {
    void operator()(Entry* p) const noexcept;
  };
  std::unique_ptr<Entry[], Unmap> table_;
  std::size_t size_ = 0;
};

}  // namespace tickrail::feed
