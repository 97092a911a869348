// Names of enum values, each written once: a table of {value, name} pairs from which to_string
// and the parsers of config files and command lines are derived.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace tickrail::detail {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `e` in `names`, or "unknown" for a value the table does not hold (a number read
// from shared memory or the wire).
template <class E, std::size_t N>
[[nodiscard]] constexpr const char* name_of(const EnumName<E> (&names)[N], E e,
                                            const char* unknown = "unknown") noexcept {
  for (const EnumName<E>& n : names) {
    if (n.value == e) return n.name;
  }
  return unknown;
}

// The value named `s` in `names`, if any.
template <class E, std::size_t N>
[[nodiscard]] constexpr std::optional<E> value_of(const EnumName<E> (&names)[N],
                                                  std::string_view s) noexcept {
  for (const EnumName<E>& n : names) {
    if (s == n.name) return n.value;
  }
  return std::nullopt;
}

// Whether the table names every value of an enum numbered 0..N-1 once, in order.
template <class E, std::size_t N>
[[nodiscard]] constexpr bool names_every_value(const EnumName<E> (&names)[N]) noexcept {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(names[i].value) != i) return false;
  }
  return true;
}

}  // namespace tickrail::detail
