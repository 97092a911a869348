// Which RDMA device and addresses the rdma suites use.
//
// scripts/rig sets TICKRAIL_RDMA_DEV, TICKRAIL_RDMA_ADDR (this host's address on that device)
// and, in two-guest mode, TICKRAIL_RDMA_PEER_ADDR and TICKRAIL_RIG_PEER_DIR. Run natively
// (meson test --suite rdma) the device defaults to the first one and the address to the IPv4
// address of its port's netdev. Without any device every rdma test fails, naming the fix: a
// suite that passes silently on a host without RDMA would prove nothing.
#pragma once

#include <string>

namespace tickrail::rdma::test {

inline constexpr const char* kNoDevice = "no RDMA device: run scripts/rig";

// The device to test. Throws tickrail::Error (not_found) starting with kNoDevice when the host
// has none.
[[nodiscard]] std::string device();

// This host's IPv4 address on `dev`. Throws tickrail::Error (not_found) naming the variable to
// set when it cannot be found.
[[nodiscard]] std::string address(const std::string& dev);

// The other guest's address; throws (not_found) outside the two-guest rig.
[[nodiscard]] std::string peer_address();

}  // namespace tickrail::rdma::test
