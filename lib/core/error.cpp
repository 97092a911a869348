#include "tickrail/error.hpp"

namespace tickrail {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tickrail"; }
  std::string message(int ev) const override {
    switch (static_cast<Errc>(ev)) {
      case Errc::ok: return "ok";
      case Errc::invalid_argument: return "invalid argument";
      case Errc::config_error: return "configuration error";
      case Errc::not_found: return "not found";
      case Errc::bad_magic: return "not a tickrail object (bad magic)";
      case Errc::version_mismatch: return "protocol version mismatch";
      case Errc::truncated: return "truncated";
      case Errc::geometry_mismatch: return "ring geometry mismatch";
      case Errc::no_capacity: return "no free subscriber entry";
      case Errc::locked_memory: return "not enough locked memory";
      case Errc::rejected: return "rejected by peer";
      case Errc::timed_out: return "timed out";
      case Errc::peer_gone: return "peer gone";
      case Errc::evicted: return "evicted by publisher";
      case Errc::closed: return "closed";
      case Errc::parse_error: return "parse error";
      case Errc::unsupported: return "unsupported";
      case Errc::no_device: return "no RDMA device";
    }
    return "unknown tickrail error";
  }
};

}  // namespace

const std::error_category& tickrail_category() noexcept {
  static const Category c;
  return c;
}

void throw_errno(int err, const std::string& what) {
  throw Error(std::error_code(err, std::generic_category()), what);
}

}  // namespace tickrail
