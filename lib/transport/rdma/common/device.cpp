#include "transport/rdma/common/device.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "transport/rdma/cm.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma {

DeviceList::DeviceList() {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    // ENOSYS: the kernel has no RDMA support at all; that is "no devices".
    if (errno == ENOSYS || errno == ENOENT || errno == 0) return;
    throw_call_error(errno, "ibv_get_device_list", "this host");
  }
  list_.reset(list);
  count_ = count > 0 ? static_cast<std::size_t>(count) : 0;
}

std::vector<std::string> DeviceList::names() const {
  std::vector<std::string> out;
  for (ibv_device* d : devices()) out.emplace_back(ibv_get_device_name(d));
  return out;
}

std::vector<std::string> device_names() { return DeviceList().names(); }

std::string joined(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void require_device(std::string_view configured, std::string_view transport) {
  const std::vector<std::string> present = device_names();
  const char* missing = nullptr;
  if (present.empty()) {
    missing = "/sys/class/infiniband";
  } else if (::access("/dev/infiniband/rdma_cm", F_OK) != 0) {
    missing = "/dev/infiniband/rdma_cm";
  }
  if (missing != nullptr) {
    throw Error(Errc::no_device, std::string("no RDMA device found (") + missing +
                                     " missing): this host cannot use transport " +
                                     std::string(transport) + "; run tickrail-doctor");
  }
  if (configured.empty()) return;
  for (const std::string& n : present) {
    if (n == configured) return;
  }
  throw Error(Errc::not_found, "rdma.device = '" + std::string(configured) +
                                   "': no such RDMA device (devices present: " + joined(present) +
                                   "); run tickrail-doctor");
}

void check_bound_device(const CmId& id, std::string_view configured, std::string_view subject,
                        Errc mismatch) {
  if (id.verbs() == nullptr) {
    throw Error(Errc::not_found, std::string(subject) +
                                     " is not on an RDMA device (is rxe/RoCE set up on its "
                                     "interface?)");
  }
  if (configured.empty()) return;
  const std::string actual = device_name(id.verbs());
  if (actual != configured) {
    throw Error(mismatch, std::string(subject) + " is reached through RDMA device " + actual +
                              ", not the configured rdma.device = '" + std::string(configured) +
                              "'");
  }
}

std::string device_name(const ibv_context* ctx) {
  if (ctx == nullptr || ctx->device == nullptr) return "?";
  return ibv_get_device_name(ctx->device);
}

ibv_device_attr query_device(ibv_context* ctx) {
  ibv_device_attr attr{};
  check_ret(ibv_query_device(ctx, &attr), "ibv_query_device", "device " + device_name(ctx));
  return attr;
}

}  // namespace tickrail::rdma
