#include "rig_env.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdlib>
#include <fstream>
#include <memory>

#include "tickrail/error.hpp"
#include "transport/rdma/verbs.hpp"

namespace tickrail::rdma::test {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// The netdev behind GID entries of port 1 (RoCE and rxe list it per GID index).
std::string netdev_of(const std::string& dev) {
  for (int i = 0; i < 16; ++i) {
    std::ifstream f("/sys/class/infiniband/" + dev + "/ports/1/gid_attrs/ndevs/" +
                    std::to_string(i));
    std::string name;
    if (f && std::getline(f, name) && !name.empty()) return name;
  }
  return "";
}

std::string ipv4_of(const std::string& netdev) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(list, freeifaddrs);
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || netdev != a->ifa_name) {
      continue;
    }
    char buf[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) != nullptr) return buf;
  }
  return "";
}

}  // namespace

std::string device() {
  const std::vector<std::string> names = device_names();
  if (names.empty()) {
    throw Error(Errc::not_found,
                std::string(kNoDevice) +
                    " (this host lists no RDMA device; the rig runs this suite in a QEMU guest "
                    "with Soft-RoCE, or natively with scripts/rig --native where rxe can be "
                    "created)");
  }
  std::string dev = env("TICKRAIL_RDMA_DEV");
  return dev.empty() ? names.front() : dev;
}

std::string address(const std::string& dev) {
  std::string addr = env("TICKRAIL_RDMA_ADDR");
  if (!addr.empty()) return addr;
  const std::string netdev = netdev_of(dev);
  addr = netdev.empty() ? "" : ipv4_of(netdev);
  if (addr.empty()) {
    throw Error(Errc::not_found, "no IPv4 address for RDMA device " + dev + " (netdev '" +
                                     netdev + "'): set TICKRAIL_RDMA_ADDR");
  }
  return addr;
}

std::string peer_address() {
  std::string addr = env("TICKRAIL_RDMA_PEER_ADDR");
  if (addr.empty()) {
    throw Error(Errc::not_found,
                "no peer host: this test needs the two-guest rig: run scripts/rig --two-guests");
  }
  return addr;
}

}  // namespace tickrail::rdma::test
