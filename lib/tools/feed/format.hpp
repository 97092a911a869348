// Small helpers the feed's error messages share (control path only: they allocate).
#pragma once

#include <cstdint>
#include <string>

namespace tickrail::feed {

// "0x41 ('A')", or "0x07" for a byte that is not printable.
[[nodiscard]] std::string describe_byte(std::uint8_t b);

}  // namespace tickrail::feed
