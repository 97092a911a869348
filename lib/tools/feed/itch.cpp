#include "tickrail/tools/feed/itch.hpp"

#include <cstdio>

#include "tools/feed/format.hpp"

namespace tickrail::feed {

std::string describe_byte(std::uint8_t b) {
  char s[16];
  if (b >= 0x20 && b < 0x7f) {
    std::snprintf(s, sizeof s, "0x%02x ('%c')", b, b);
  } else {
    std::snprintf(s, sizeof s, "0x%02x", b);
  }
  return s;
}

namespace itch {

const char* type_name(std::uint8_t type) noexcept {
  switch (type) {
    case 'S': return "system event";
    case 'R': return "stock directory";
    case 'H': return "stock trading action";
    case 'Y': return "Reg SHO restriction";
    case 'L': return "market participant position";
    case 'V': return "MWCB decline level";
    case 'W': return "MWCB status";
    case 'K': return "IPO quoting period update";
    case 'J': return "LULD auction collar";
    case 'h': return "operational halt";
    case 'A': return "add order";
    case 'F': return "add order with MPID";
    case 'E': return "order executed";
    case 'C': return "order executed with price";
    case 'X': return "order cancel";
    case 'D': return "order delete";
    case 'U': return "order replace";
    case 'P': return "trade";
    case 'Q': return "cross trade";
    case 'B': return "broken trade";
    case 'I': return "net order imbalance indicator";
    case 'N': return "retail price improvement indicator";
    case 'O': return "direct listing with capital raise";
    default: return "unknown";
  }
}

}  // namespace itch
}  // namespace tickrail::feed
