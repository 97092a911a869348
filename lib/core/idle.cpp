#include "tickrail/idle.hpp"

#include <time.h>

#include <string>

#include "core/enum_names.hpp"
#include "tickrail/error.hpp"

namespace tickrail {

Backoff::Backoff(const BackoffConfig& config) : config_(config), park_ns_(config.min_park_ns) {
  if (config.min_park_ns == 0 || config.min_park_ns > config.max_park_ns) {
    throw Error(Errc::invalid_argument,
                "backoff idle strategy: min_park_ns " + std::to_string(config.min_park_ns) +
                    " must be > 0 and <= max_park_ns " + std::to_string(config.max_park_ns));
  }
}

void Backoff::park() const noexcept {
  timespec ts{static_cast<time_t>(park_ns_ / 1'000'000'000ULL),
              static_cast<long>(park_ns_ % 1'000'000'000ULL)};
  // A signal cutting the sleep short only shortens one idle period: no retry.
  nanosleep(&ts, nullptr);
}

namespace {
constexpr detail::EnumName<IdleKind> kKindNames[] = {
    {IdleKind::busy_spin, "busy_spin"}, {IdleKind::yield, "yield"}, {IdleKind::backoff, "backoff"}};
}  // namespace

IdleKind parse_idle_kind(std::string_view name) {
  if (name == "busy-spin" || name == "spin") return IdleKind::busy_spin;  // accepted aliases
  if (const auto k = detail::value_of(kKindNames, name)) return *k;
  throw Error(Errc::config_error, "idle strategy '" + std::string(name) +
                                      "' is not one of busy_spin, yield, backoff");
}

const char* to_string(IdleKind kind) noexcept { return detail::name_of(kKindNames, kind); }

}  // namespace tickrail
