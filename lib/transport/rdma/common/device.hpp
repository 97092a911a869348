// Which RDMA device a transport runs on, checked the same way by every transport: is there a
// device at all, is the configured one present, is the device rdma_cm bound an id to the
// configured one, and what the device allows.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tickrail/error.hpp"

namespace tickrail::rdma {

class CmId;

// ibv_get_device_list's result, freed when destroyed. Empty, without an error, when the host has
// no device, including on a kernel without RDMA support.
class DeviceList {
 public:
  DeviceList();
  [[nodiscard]] std::span<ibv_device* const> devices() const noexcept { return {list_.get(), count_}; }
  [[nodiscard]] std::vector<std::string> names() const;

 private:
  struct Free {
    void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
  };
  std::unique_ptr<ibv_device*[], Free> list_;
  std::size_t count_ = 0;
};

// Names of the RDMA devices present; empty when there are none.
[[nodiscard]] std::vector<std::string> device_names();
// "rxe0, mlx5_0", or "none".
[[nodiscard]] std::string joined(const std::vector<std::string>& names);

// The one check before an RDMA transport touches verbs or rdma_cm: throws Error(no_device)
// "no RDMA device found (... missing): this host cannot use transport <transport>; run
// tickrail-doctor" when the host has no device (or no /dev/infiniband/rdma_cm), and
// Error(not_found) when `configured` (rdma.device, may be empty) is not one of its devices.
void require_device(std::string_view configured, std::string_view transport);

// After bind or address resolution: `subject` ("address 10.77.1.1", "group 239.1.1.1") must be
// on an RDMA device (Errc::not_found) and, when `configured` (rdma.device) is set, on that one
// (`mismatch`, naming both devices).
void check_bound_device(const CmId& id, std::string_view configured, std::string_view subject,
                        Errc mismatch = Errc::not_found);

// "rxe0" for a context made by us or by rdma_cm.
[[nodiscard]] std::string device_name(const ibv_context* ctx);

// The device's attributes (ibv_query_device), naming the device when the query fails.
[[nodiscard]] ibv_device_attr query_device(ibv_context* ctx);

}  // namespace tickrail::rdma
