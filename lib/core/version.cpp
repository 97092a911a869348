#include "tickrail/version.hpp"

namespace tickrail {

const char* version() noexcept { return TICKRAIL_VERSION_STRING; }
int version_number() noexcept { return TICKRAIL_VERSION_NUMBER; }

}  // namespace tickrail
