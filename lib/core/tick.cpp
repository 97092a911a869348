#include "tickrail/tick.hpp"

namespace tickrail {

const char* to_string(TickKind k) noexcept {
  switch (k) {
    case TickKind::None: return "none";
    case TickKind::Add: return "add";
    case TickKind::Modify: return "modify";
    case TickKind::Cancel: return "cancel";
    case TickKind::Delete: return "delete";
    case TickKind::Execute: return "execute";
    case TickKind::Trade: return "trade";
    case TickKind::Quote: return "quote";
    case TickKind::Status: return "status";
    case TickKind::Heartbeat: return "heartbeat";
  }
  return "unknown";
}

const char* to_string(Side s) noexcept {
  switch (s) {
    case Side::None: return "none";
    case Side::Buy: return "buy";
    case Side::Sell: return "sell";
  }
  return "unknown";
}

}  // namespace tickrail
