// Errors: one category for tickrail's own conditions; system errors keep their errno category.
//
// Control-plane calls (create, attach, connect, load) throw tickrail::Error, whose what() names
// the operation and the object ("attach channel 'md': segment /dev/shm/tickrail.md: ..."). The
// publish and poll paths never throw: they return status values (publisher.hpp, subscriber.hpp).
#pragma once

#include <string>
#include <system_error>
#include "tickrail/export.hpp"

namespace tickrail {

enum class Errc {
  ok = 0,
  invalid_argument,     // a value that can never work (absurd size, empty name)
  config_error,         // a config file or key that does not parse or validate
  not_found,            // channel, device, file or peer that does not exist
  bad_magic,            // a segment or datagram that is not tickrail's
  version_mismatch,     // a tickrail peer or segment of another protocol version
  truncated,            // a file or segment shorter than its header says
  geometry_mismatch,    // slot size or capacity that disagree between peers
  no_capacity,          // every subscriber entry of a channel is taken
  locked_memory,        // mlock / ibv_reg_mr failed against RLIMIT_MEMLOCK
  rejected,             // a peer refused us, with a reason
  timed_out,            // a bounded wait ran out
  peer_gone,            // the other side died or disconnected
  evicted,              // the publisher evicted this subscriber (slow consumer)
  closed,               // the object was closed
  parse_error,          // input data that does not decode
  unsupported,          // the device or host cannot do what was asked
  no_device,            // rc or ud asked for on a host without an RDMA device (tickrail-doctor)
};

[[nodiscard]] TICKRAIL_API const std::error_category& tickrail_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), tickrail_category()};
}

class TICKRAIL_API Error : public std::system_error {
 public:
  Error(Errc e, const std::string& what) : std::system_error(make_error_code(e), what) {}
  Error(std::error_code ec, const std::string& what) : std::system_error(ec, what) {}
};

// Throws Error with the errno text and what was being attempted.
[[noreturn]] void throw_errno(int err, const std::string& what);

}  // namespace tickrail

template <>
struct std::is_error_code_enum<tickrail::Errc> : std::true_type {};
