// RDMA checks: devices, ports, GID table, MTU, and the RoCE PFC/ECN settings (information).
#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

#include "tools/doctor/host_fs.hpp"

namespace tickrail::doctor {

using detail::finding;
using detail::HostFs;
using detail::PortRef;

namespace {

constexpr const char* kNoDeviceFix =
    "for a RoCE or InfiniBand NIC: load its driver (mlx5_ib, irdma, bnxt_re, ...) and install "
    "rdma-core (`apt-get install rdma-core ibverbs-providers`); to try without one, Soft-RoCE: "
    "`modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`";

const VerbsDevice* find_device(const VerbsView& v, const std::string& name) {
  for (const VerbsDevice& d : v.devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const VerbsPort* find_port(const VerbsView& v, const PortRef& p) {
  const VerbsDevice* d = find_device(v, p.device);
  if (d == nullptr) return nullptr;
  for (const VerbsPort& vp : d->ports) {
    if (vp.port == p.port) return &vp;
  }
  return nullptr;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The uverbs character device of `dev` (sys/class/infiniband_verbs/uverbsN/ibdev names it).
std::string uverbs_of(const HostFs& fs, const std::string& dev) {
  for (const std::string& u : fs.list("sys/class/infiniband_verbs")) {
    if (fs.line("sys/class/infiniband_verbs/" + u + "/ibdev").value_or("") == dev) return u;
  }
  return "";
}

// The GID for a local address: IPv4 as IPv4-mapped IPv6 (RoCE v2), IPv6 as is.
std::optional<std::array<unsigned char, 16>> gid_of_address(const std::string& addr) {
  std::array<unsigned char, 16> g{};
  in_addr v4{};
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    g[10] = 0xff;
    g[11] = 0xff;
    std::memcpy(g.data() + 12, &v4, 4);
    return g;
  }
  if (inet_pton(AF_INET6, addr.c_str(), g.data()) == 1) return g;
  return std::nullopt;
}

std::optional<std::array<unsigned char, 16>> parse_gid(const std::string& text) {
  std::array<unsigned char, 16> g{};
  if (inet_pton(AF_INET6, text.c_str(), g.data()) != 1) return std::nullopt;
  return g;
}

std::string gid_to_text(const std::array<unsigned char, 16>& g) {
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char buf[INET6_ADDRSTRLEN] = {};
  if (std::memcmp(g.data(), kMapped, 12) == 0) {
    inet_ntop(AF_INET, g.data() + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, g.data(), buf, sizeof buf);
  }
  return buf;
}

bool is_zero(const std::array<unsigned char, 16>& g) {
  return std::all_of(g.begin(), g.end(), [](unsigned char c) { return c == 0; });
}
bool is_link_local(const std::array<unsigned char, 16>& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

struct Gid {
  int index = 0;
  std::array<unsigned char, 16> raw{};
  std::string type;  // "RoCE v2", "IB/RoCE v1", "" when unreadable
  std::string ndev;
};

std::vector<Gid> read_gids(const HostFs& fs, const PortRef& p) {
  std::vector<Gid> out;
  for (const std::string& i : fs.list(p.dir() + "/gids")) {
    const auto text = fs.line(p.dir() + "/gids/" + i);
    if (!text) continue;
    const auto raw = parse_gid(*text);
    if (!raw || is_zero(*raw)) continue;
    Gid g;
    g.index = std::atoi(i.c_str());
    g.raw = *raw;
    g.type = fs.line(p.dir() + "/gid_attrs/types/" + i).value_or("");
    g.ndev = fs.line(p.dir() + "/gid_attrs/ndevs/" + i).value_or("");
    out.push_back(std::move(g));
  }
  return out;
}

// The local address whose GID must be present: --address, else the publisher's listen address.
std::string local_address(const Options& o) {
  if (!o.address.empty()) return o.address;
  if (o.publisher && o.publisher->transport != TransportKind::shm &&
      o.publisher->rdma.address != "0.0.0.0" && o.publisher->rdma.address != "::") {
    return o.publisher->rdma.address;
  }
  return "";
}

// The largest IB MTU a RoCE port can use on a netdev MTU: the frame also carries the RoCE v2
// headers (the kernel subtracts up to 96 bytes: GRH/IP, UDP, BTH, extended headers, ICRC).
int roce_mtu_for(int netdev_mtu) {
  int best = 0;
  for (int m : {256, 512, 1024, 2048, 4096}) {
    if (m + 96 <= netdev_mtu) best = m;
  }
  return best;
}

std::string run_tool(const std::string& cmd) {
  std::unique_ptr<FILE, decltype(&pclose)> p(popen(("timeout 5 " + cmd + " 2>&1").c_str(), "r"), pclose);
  if (!p) return "";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p.get()) != nullptr && out.size() < 4096) out += buf;
  return out;
}

bool have_tool(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

std::string first_lines(const std::string& text, int n) {
  std::istringstream in(text);
  std::string line, out;
  for (int i = 0; i < n && std::getline(in, line); ++i) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (line.empty()) {
      --i;
      continue;
    }
    out += (out.empty() ? "" : " | ") + line;
  }
  return out;
}

}  // namespace

std::vector<Finding> check_rdma_devices(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const std::vector<std::string> all = detail::rdma_devices(fs, "");
  const std::vector<std::string> devs = detail::rdma_devices(fs, o.device);
  const bool needed = detail::wants_rdma(o);
  if (all.empty()) {
    out.push_back(finding(
        "rdma.devices", "host", needed ? Level::fail : Level::warn,
        std::string("no RDMA device (") + fs.path("sys/class/infiniband") + " is empty or absent): " +
            (needed ? "the configured rc/ud transport cannot run"
                    : "the shm transport works on this host; rc and ud need a device"),
        kNoDeviceFix));
    if (!fs.exists("sys/module/ib_core")) {
      out.push_back(finding("rdma.devices", "host", Level::info,
                            "the RDMA core module (ib_core) is not loaded",
                            "modprobe ib_core ib_uverbs rdma_ucm"));
    }
    return out;
  }
  if (devs.empty()) {
    out.push_back(finding("rdma.devices", o.device, Level::fail,
                          "device '" + o.device + "' not found; present: " + join(all),
                          "pick one of them (--device, rdma.device in the config)"));
    return out;
  }
  const VerbsView v = detail::verbs_view(o, fs);
  if (v.queried && !v.error.empty()) {
    out.push_back(finding("rdma.devices", "libibverbs", Level::fail, v.error,
                          "apt-get install libibverbs1 ibverbs-providers"));
  }
  for (const std::string& dev : devs) {
    const std::string base = "sys/class/infiniband/" + dev;
    std::string driver = fs.link_name(base + "/device/driver");
    if (driver.empty() && fs.exists(base + "/parent")) driver = "rxe (Soft-RoCE)";
    std::string what = dev + ": driver " + (driver.empty() ? "unknown" : driver);
    if (const auto node = fs.line(base + "/node_type")) what += ", node type " + detail::state_word(*node);
    if (const auto fw = fs.line(base + "/fw_ver"); fw && !fw->empty()) what += ", firmware " + *fw;
    const std::string uverbs = uverbs_of(fs, dev);
    if (uverbs.empty()) {
      out.push_back(finding("rdma.devices", dev, Level::fail,
                            what + "; no uverbs device: user space cannot open it",
                            "modprobe ib_uverbs"));
      continue;
    }
    what += ", /dev/infiniband/" + uverbs;
    if (fs.real() && !fs.exists("dev/infiniband/" + uverbs)) {
      out.push_back(finding("rdma.devices", dev, Level::fail,
                            what + " is missing (no udev rule created it)",
                            "apt-get install rdma-core (its udev rules create /dev/infiniband/*)"));
      continue;
    }
    if (v.queried) {
      const VerbsDevice* vd = find_device(v, dev);
      if (vd == nullptr) {
        out.push_back(finding("rdma.devices", dev, Level::fail,
                              what + "; libibverbs does not list it: its user-space provider "
                                     "library is missing",
                              "apt-get install ibverbs-providers"));
        continue;
      }
      if (!vd->error.empty()) {
        out.push_back(finding("rdma.devices", dev, Level::fail, what + "; " + vd->error,
                              "check permissions of /dev/infiniband/" + uverbs +
                                  " (udev rule or `chmod 666`), and `ulimit -l`"));
        continue;
      }
      what += "; opened through libibverbs";
    }
    out.push_back(finding("rdma.devices", dev, Level::ok, what));
  }
  return out;
}

std::vector<Finding> check_rdma_ports(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const VerbsView v = detail::verbs_view(o, fs);
  for (const PortRef& p : detail::rdma_ports(fs, o.device)) {
    const auto state = fs.line(p.dir() + "/state");
    const auto phys = fs.line(p.dir() + "/phys_state");
    const std::string ll = fs.line(p.dir() + "/link_layer").value_or("");
    const bool eth = ll == "Ethernet";
    const std::string ndev = eth ? detail::netdev_of(fs, p) : "";
    if (!state) {
      out.push_back(finding("rdma.port", p.subject(), Level::fail,
                            "cannot read " + fs.path(p.dir() + "/state")));
    } else {
      const std::string s = detail::state_word(*state);
      const std::string ps = phys ? detail::state_word(*phys) : "unknown";
      std::string msg = "state " + s + ", physical state " + ps;
      if (const VerbsPort* vp = find_port(v, p)) msg += " (libibverbs: " + vp->state + ")";
      if (s == "ACTIVE") {
        out.push_back(finding("rdma.port", p.subject(), Level::ok, msg));
      } else if (s == "INIT" && !eth) {
        out.push_back(finding("rdma.port", p.subject(), Level::fail,
                              msg + ": the link is up but no subnet manager has configured it",
                              "run a subnet manager on the fabric: `systemctl start opensm`"));
      } else if (ps == "Disabled") {
        out.push_back(finding("rdma.port", p.subject(), Level::fail, msg + ": the port is disabled",
                              eth && !ndev.empty() ? "ip link set dev " + ndev + " up"
                                                   : "ibportstate <lid> " + std::to_string(p.port) +
                                                         " enable"));
      } else {
        out.push_back(finding(
            "rdma.port", p.subject(), Level::fail, msg + ": no usable link",
            eth ? (ndev.empty() ? std::string("bring the port's network interface up")
                                : "ip link set dev " + ndev + " up; then check its cable or virtual link (`ip link show " + ndev + "`)")
                : std::string("check the cable and the switch port (`ibstat`)")));
      }
    }
    if (ll.empty()) {
      out.push_back(finding("rdma.link_layer", p.subject(), Level::warn,
                            "cannot read " + fs.path(p.dir() + "/link_layer")));
    } else {
      out.push_back(finding("rdma.link_layer", p.subject(), Level::info,
                            eth ? "Ethernet (RoCE)" + (ndev.empty() ? std::string() : " on " + ndev)
                                : ll));
    }
  }
  return out;
}

std::vector<Finding> check_gids(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const std::string addr = local_address(o);
  const auto want = addr.empty() ? std::nullopt : gid_of_address(addr);
  if (!addr.empty() && !want) {
    out.push_back(finding("rdma.gid", addr, Level::warn,
                          "address '" + addr + "' is not a numeric IPv4/IPv6 address: its GID "
                          "cannot be checked",
                          "give the numeric address (--address, rdma.address)"));
  }
  for (const PortRef& p : detail::rdma_ports(fs, o.device)) {
    if (fs.line(p.dir() + "/link_layer").value_or("") != "Ethernet") {
      out.push_back(finding("rdma.gid", p.subject(), Level::info,
                            "InfiniBand: GIDs come from the subnet prefix and port GUID"));
      continue;
    }
    const std::vector<Gid> gids = read_gids(fs, p);
    const std::string ndev = detail::netdev_of(fs, p);
    if (want) {
      const Gid* v2 = nullptr;
      const Gid* v1 = nullptr;
      for (const Gid& g : gids) {
        if (g.raw != *want) continue;
        if (g.type == "RoCE v2") v2 = v2 != nullptr ? v2 : &g;
        else v1 = v1 != nullptr ? v1 : &g;
      }
      if (v2 != nullptr) {
        out.push_back(finding("rdma.gid", p.subject(), Level::ok,
                              "GID index " + std::to_string(v2->index) + " is RoCE v2 for " + addr +
                                  (v2->ndev.empty() ? "" : " on " + v2->ndev)));
      } else if (v1 != nullptr) {
        out.push_back(finding(
            "rdma.gid", p.subject(), Level::warn,
            addr + " has only a " + (v1->type.empty() ? "GID of unknown type" : v1->type + " GID") +
                " (index " + std::to_string(v1->index) + "): RoCE v2 (routable, UDP) is expected",
            "check that the NIC and kernel enable RoCE v2; rdma_cm picks it by default "
            "(/sys/kernel/config/rdma_cm/" + p.device + "/ports/" + std::to_string(p.port) +
                "/default_roce_mode)"));
      } else {
        out.push_back(finding("rdma.gid", p.subject(), Level::fail,
                              "no GID for " + addr + " in the GID table (" +
                                  std::to_string(gids.size()) + " entries)" +
                                  (ndev.empty() ? "" : ": the address is not on " + ndev),
                              "ip addr add " + addr + "/24 dev " + (ndev.empty() ? "<interface>" : ndev) +
                                  "  (or use the address the device already has)"));
      }
      continue;
    }
    std::vector<std::string> v2;
    for (const Gid& g : gids) {
      if (g.type == "RoCE v2" && !is_link_local(g.raw)) {
        v2.push_back(std::to_string(g.index) + "=" + gid_to_text(g.raw));
      }
    }
    if (!v2.empty()) {
      out.push_back(finding("rdma.gid", p.subject(), Level::ok, "RoCE v2 GIDs: " + join(v2)));
    } else {
      out.push_back(finding("rdma.gid", p.subject(), Level::warn,
                            "no RoCE v2 GID for an IP address (" + std::to_string(gids.size()) +
                                " entries): rdma_cm cannot reach this port by address",
                            "ip addr add <address>/24 dev " + (ndev.empty() ? "<interface>" : ndev)));
    }
  }
  return out;
}

std::vector<Finding> check_mtu(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  const VerbsView v = detail::verbs_view(o, fs);
  for (const PortRef& p : detail::rdma_ports(fs, o.device)) {
    const bool eth = fs.line(p.dir() + "/link_layer").value_or("") == "Ethernet";
    const VerbsPort* vp = find_port(v, p);
    const std::string ndev = eth ? detail::netdev_of(fs, p) : "";
    std::optional<int> nmtu;
    if (!ndev.empty()) {
      if (const auto m = fs.line("sys/class/net/" + ndev + "/mtu")) {
        try {
          nmtu = std::stoi(*m);
        } catch (...) {
        }
      }
    }
    if (vp == nullptr || vp->active_mtu == 0) {
      std::string msg = "active MTU unknown (" +
                        std::string(v.queried ? "libibverbs did not report this port"
                                              : "libibverbs not asked for this root") + ")";
      if (nmtu) msg += "; " + ndev + " MTU " + std::to_string(*nmtu);
      out.push_back(finding("rdma.mtu", p.subject(), Level::info, msg,
                            v.queried ? "" : "ibv_devinfo -d " + p.device));
      continue;
    }
    std::string msg = "active MTU " + std::to_string(vp->active_mtu) + " (max " +
                      std::to_string(vp->max_mtu) + ")";
    Level level = Level::ok;
    std::string fix;
    if (eth) {
      if (ndev.empty() || !nmtu) {
        msg += "; the netdev's MTU is unreadable";
        level = Level::warn;
      } else {
        const int fits = roce_mtu_for(*nmtu);
        msg += ", " + ndev + " MTU " + std::to_string(*nmtu);
        if (vp->active_mtu > fits) {
          level = Level::fail;
          msg += ": RoCE frames of " + std::to_string(vp->active_mtu) +
                 " bytes plus headers do not fit the interface";
          fix = "ip link set dev " + ndev + " mtu " + std::to_string(vp->active_mtu + 96) +
                "  (on both hosts and every switch port between)";
        } else if (vp->active_mtu < fits && vp->active_mtu < vp->max_mtu) {
          level = Level::info;
          msg += ": the interface would carry " + std::to_string(fits) +
                 " (the port's MTU follows the netdev's when the link is created)";
        }
      }
    }
    // A UD datagram (64-byte header + ticks) must fit one MTU.
    for (const auto* rdma : {o.publisher && o.publisher->transport == TransportKind::ud
                                 ? &o.publisher->rdma : nullptr,
                             o.subscriber && o.subscriber->transport == TransportKind::ud
                                 ? &o.subscriber->rdma : nullptr}) {
      if (rdma == nullptr) continue;
      const std::uint64_t bytes = 64 + 64ULL * rdma->max_ticks_per_datagram;
      if (bytes > static_cast<std::uint64_t>(vp->active_mtu)) {
        level = Level::fail;
        msg += "; ud datagrams of max_ticks_per_datagram = " +
               std::to_string(rdma->max_ticks_per_datagram) + " need " + std::to_string(bytes) +
               " bytes";
        fix = "set rdma.max_ticks_per_datagram <= " +
              std::to_string((vp->active_mtu - 64) / 64) + ", or raise the MTU";
        break;
      }
    }
    out.push_back(finding("rdma.mtu", p.subject(), level, msg, fix));
  }
  return out;
}

std::vector<Finding> check_roce_qos(const Options& o) {
  const HostFs fs(o.root);
  std::vector<Finding> out;
  std::vector<std::string> seen;
  for (const PortRef& p : detail::rdma_ports(fs, o.device)) {
    if (fs.line(p.dir() + "/link_layer").value_or("") != "Ethernet") continue;
    const std::string ndev = detail::netdev_of(fs, p);
    if (ndev.empty() || std::find(seen.begin(), seen.end(), ndev) != seen.end()) continue;
    seen.push_back(ndev);
    const std::string ecn = "sys/class/net/" + ndev + "/ecn";
    std::vector<std::string> parts;
    for (const char* role : {"roce_np", "roce_rp"}) {
      const std::string dir = ecn + "/" + role + "/enable";
      if (!fs.exists(dir)) continue;
      std::vector<std::string> on;
      for (const std::string& prio : fs.list(dir)) {
        if (fs.line(dir + "/" + prio).value_or("0") == "1") on.push_back(prio);
      }
      parts.push_back(std::string(role == std::string("roce_np") ? "ECN notification point"
                                                                  : "ECN reaction point") +
                      " on priorities " + (on.empty() ? std::string("none") : join(on, ",")));
    }
    if (!parts.empty()) {
      out.push_back(finding("roce.pfc_ecn", ndev, Level::info, join(parts, "; ")));
    } else {
      out.push_back(finding("roce.pfc_ecn", ndev, Level::info,
                            "no ECN settings in " + fs.path(ecn) +
                                (fs.exists("sys/class/infiniband/" + p.device + "/parent")
                                     ? " (Soft-RoCE has none: lossy Ethernet, loss is repaired by "
                                       "retransmission)"
                                     : "")));
    }
    // Interface names reach a shell below: only plain ones.
    const bool plain = std::all_of(ndev.begin(), ndev.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
    });
    if (!(fs.real() && o.run_tools && plain)) continue;
    if (have_tool("dcb")) {
      const std::string t = first_lines(run_tool("dcb pfc show dev " + ndev), 3);
      if (!t.empty()) out.push_back(finding("roce.pfc_ecn", ndev, Level::info, "dcb pfc: " + t));
    }
    if (have_tool("mlnx_qos")) {
      const std::string t = first_lines(run_tool("mlnx_qos -i " + ndev), 6);
      if (!t.empty()) out.push_back(finding("roce.pfc_ecn", ndev, Level::info, "mlnx_qos: " + t));
    }
    if (have_tool("ethtool")) {
      const std::string t = first_lines(run_tool("ethtool -a " + ndev), 4);
      if (!t.empty()) out.push_back(finding("roce.pfc_ecn", ndev, Level::info, "ethtool -a: " + t));
    }
  }
  return out;
}

}  // namespace tickrail::doctor
