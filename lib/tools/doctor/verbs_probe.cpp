// The doctor's one use of libibverbs: device list and port attributes (active MTU is not in
// sysfs). Plain C API with RAII guards; no dependency on the transports' wrappers
// (transport/rdma/common/device.hpp): those throw at the first failure, where the doctor notes a
// failed query on one device and goes on to the next, and they are the transport library's
// internals, not the tools'.
#include "tickrail/build_config.hpp"
#include "tickrail/tools/doctor.hpp"

#if TICKRAIL_HAVE_RDMA
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>
#endif

namespace tickrail::doctor {

#if !TICKRAIL_HAVE_RDMA
VerbsView query_verbs() {
  VerbsView v;
  v.queried = true;
  v.error = "this tickrail is built without RDMA (meson -Drdma=disabled): shared memory only";
  return v;
}
#else

namespace {
int mtu_bytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}
}  // namespace

VerbsView query_verbs() {
  VerbsView v;
  v.queried = true;
  int n = 0;
  errno = 0;
  std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> list(ibv_get_device_list(&n),
                                                                     ibv_free_device_list);
  if (!list) {
    v.error = std::string("ibv_get_device_list: ") + std::strerror(errno != 0 ? errno : ENOSYS);
    return v;
  }
  for (int i = 0; i < n; ++i) {
    VerbsDevice d;
    d.name = ibv_get_device_name(list.get()[i]);
    std::unique_ptr<ibv_context, decltype(&ibv_close_device)> ctx(ibv_open_device(list.get()[i]),
                                                                  ibv_close_device);
    if (!ctx) {
      d.error = std::string("ibv_open_device: ") + std::strerror(errno);
      v.devices.push_back(std::move(d));
      continue;
    }
    ibv_device_attr attr{};
    if (const int e = ibv_query_device(ctx.get(), &attr); e != 0) {
      d.error = std::string("ibv_query_device: ") + std::strerror(e);
      v.devices.push_back(std::move(d));
      continue;
    }
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (const int e = ibv_query_port(ctx.get(), static_cast<std::uint8_t>(p), &pa); e != 0) {
        d.error = "ibv_query_port " + std::to_string(p) + ": " + std::strerror(e);
        continue;
      }
      VerbsPort vp;
      vp.port = p;
      vp.state = ibv_port_state_str(pa.state);
      vp.active_mtu = mtu_bytes(pa.active_mtu);
      vp.max_mtu = mtu_bytes(pa.max_mtu);
      vp.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
      d.ports.push_back(vp);
    }
    v.devices.push_back(std::move(d));
  }
  return v;
}

#endif

}  // namespace tickrail::doctor
