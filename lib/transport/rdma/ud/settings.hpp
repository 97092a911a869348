// The UD settings of both ends, checked before anything is opened, in one wording:
// Errc::config_error "UD publisher: rdma.<key>: <why>" (or "UD subscriber: ...").
#pragma once

#include <string_view>

#include "tickrail/config.hpp"

namespace tickrail::rdma::ud {

// Returns `c` when its UD settings hold.
[[nodiscard]] const PublisherConfig& validated(const PublisherConfig& c);
[[nodiscard]] const SubscriberConfig& validated(const SubscriberConfig& c);

// The config_error above, for a setting found wrong later (against what the device allows).
[[noreturn]] void bad_setting(std::string_view end, std::string_view key, std::string_view why);

}  // namespace tickrail::rdma::ud
