// The doctor's checks against fake /sys and /proc trees: healthy, broken and missing files.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "ops_test_util.hpp"
#include "tickrail/tools/doctor.hpp"
#include "tickrail/error.hpp"

using namespace tickrail;
using namespace tickrail::doctor;
using tickrail::test::TempDir;

namespace {

constexpr const char* kPort = "sys/class/infiniband/mlx5_0/ports/1/";

std::string stat_text(std::uint64_t cpu3_user, std::uint64_t cpu3_idle) {
  return "cpu  100 0 100 1000 0 0 0 0 0 0\n"
         "cpu0 10 0 10 100 0 0 0 0 0 0\n"
         "cpu1 10 0 10 100 0 0 0 0 0 0\n"
         "cpu2 10 0 10 100 0 0 0 0 0 0\n"
         "cpu3 " + std::to_string(cpu3_user) + " 0 0 " + std::to_string(cpu3_idle) +
         " 0 0 0 0 0 0\n"
         "intr 0\n";
}

// A host that does everything right: one RoCE NIC (mlx5_0 on eth0, 192.168.100.1), cpus 0-3
// with 2-3 isolated, no SMT, one NUMA node, invariant TSC, THP madvise, unlimited memlock.
void healthy_host(const TempDir& t) {
  t.write(std::string(kPort) + "state", "4: ACTIVE\n");
  t.write(std::string(kPort) + "phys_state", "5: LinkUp\n");
  t.write(std::string(kPort) + "link_layer", "Ethernet\n");
  t.write(std::string(kPort) + "gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3456\n");
  t.write(std::string(kPort) + "gid_attrs/types/0", "IB/RoCE v1\n");
  t.write(std::string(kPort) + "gid_attrs/ndevs/0", "eth0\n");
  t.write(std::string(kPort) + "gids/1", "fe80:0000:0000:0000:5054:00ff:fe12:3456\n");
  t.write(std::string(kPort) + "gid_attrs/types/1", "RoCE v2\n");
  t.write(std::string(kPort) + "gid_attrs/ndevs/1", "eth0\n");
  t.write(std::string(kPort) + "gids/2", "0000:0000:0000:0000:0000:ffff:c0a8:6401\n");
  t.write(std::string(kPort) + "gid_attrs/types/2", "IB/RoCE v1\n");
  t.write(std::string(kPort) + "gid_attrs/ndevs/2", "eth0\n");
  t.write(std::string(kPort) + "gids/3", "0000:0000:0000:0000:0000:ffff:c0a8:6401\n");
  t.write(std::string(kPort) + "gid_attrs/types/3", "RoCE v2\n");
  t.write(std::string(kPort) + "gid_attrs/ndevs/3", "eth0\n");
  t.write(std::string(kPort) + "gids/4", "0000:0000:0000:0000:0000:0000:0000:0000\n");
  t.write("sys/class/infiniband/mlx5_0/node_type", "1: CA\n");
  t.write("sys/class/infiniband/mlx5_0/fw_ver", "16.35.1012\n");
  t.write("sys/class/infiniband/mlx5_0/device/numa_node", "0\n");
  t.symlink("../../../bus/pci/drivers/mlx5_core", "sys/class/infiniband/mlx5_0/device/driver");
  t.write("sys/class/infiniband_verbs/uverbs0/ibdev", "mlx5_0\n");
  t.write("sys/class/net/eth0/mtu", "1500\n");
  t.write("sys/module/ib_core/refcnt", "3\n");

  t.write("sys/devices/system/cpu/online", "0-3\n");
  t.write("sys/devices/system/cpu/isolated", "2-3\n");
  t.write("sys/devices/system/cpu/nohz_full", "2-3\n");
  for (int c = 0; c < 4; ++c) {
    const std::string d = "sys/devices/system/cpu/cpu" + std::to_string(c) + "/";
    t.write(d + "topology/thread_siblings_list", std::to_string(c) + "\n");
    t.write(d + "cpufreq/scaling_governor", "performance\n");
  }
  t.write("sys/devices/system/node/node0/cpulist", "0-3\n");
  t.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=2-3 nohz_full=2-3 rcu_nocbs=2-3\n");
  t.write("proc/stat", stat_text(10, 100));
  t.write("proc/self/limits",
          "Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max open files            1024                 4096                 files     \n"
          "Max locked memory         unlimited            unlimited            bytes     \n");
  t.write("proc/self/status", "Name:\tdoctor\nCapEff:\t0000000000000000\n");
  t.write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu tsc msr constant_tsc nonstop_tsc sse2\n");
  t.write("proc/1/comm", "systemd\n");
  t.write("proc/meminfo",
          "MemTotal:       16000000 kB\nHugePages_Total:     512\nHugePages_Free:      500\n"
          "Hugepagesize:       2048 kB\n");
  t.write("proc/sys/vm/max_map_count", "65530\n");
  t.write("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
}

VerbsView verbs(const std::string& state = "ACTIVE", int active_mtu = 1024) {
  VerbsView v;
  v.queried = true;
  VerbsDevice d;
  d.name = "mlx5_0";
  d.ports.push_back({1, state, active_mtu, 4096, "Ethernet"});
  v.devices.push_back(d);
  return v;
}

Options options(const TempDir& t) {
  Options o;
  o.root = t.path();
  o.verbs = [] { return verbs(); };
  o.between_samples = [] {};
  return o;
}

std::vector<Finding> with_check(const std::vector<Finding>& fs, const std::string& check) {
  std::vector<Finding> out;
  std::copy_if(fs.begin(), fs.end(), std::back_inserter(out),
               [&](const Finding& f) { return f.check == check; });
  return out;
}

// By value: callers pass the temporary vector a check returns.
Finding only(const std::vector<Finding>& fs, const std::string& check,
             const std::string& subject = "") {
  const Finding* hit = nullptr;
  int n = 0;
  for (const Finding& f : fs) {
    if (f.check == check && (subject.empty() || f.subject == subject)) {
      hit = &f;
      ++n;
    }
  }
  INFO("check " << check << " subject '" << subject << "'");
  REQUIRE(n == 1);
  return *hit;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("aHealthyHostPassesEveryCheck") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  o.cpus = {2, 3};
  o.address = "192.168.100.1";
  const Report r = run(o);
  for (const Finding& f : r.findings) {
    INFO(to_string(f.level) << " " << f.check << " " << f.subject << ": " << f.message);
    CHECK((f.level == Level::ok || f.level == Level::info));
  }
  CHECK(r.passed());
  CHECK(only(r.findings, "rdma.port").level == Level::ok);
  CHECK(contains(only(r.findings, "rdma.port").message, "ACTIVE"));
  CHECK(contains(only(r.findings, "rdma.devices").message, "mlx5_core"));
  CHECK(contains(only(r.findings, "rdma.gid").message, "index 3 is RoCE v2"));
  CHECK(only(r.findings, "rdma.mtu").level == Level::ok);
  CHECK(only(r.findings, "cpu.isolated", "cpu 2").level == Level::ok);
  CHECK(only(r.findings, "cpu.smt", "cpu 3").message == "no SMT sibling");
  CHECK(only(r.findings, "cpu.numa", "cpu 2").message == "single NUMA node");
  CHECK(only(r.findings, "tsc").level == Level::ok);
  CHECK(only(r.findings, "thp").level == Level::ok);
  CHECK(only(r.findings, "hugepages").level == Level::ok);
  CHECK(only(r.findings, "vm.max_map_count").level == Level::ok);
  CHECK(only(r.findings, "irqbalance").level == Level::ok);
  CHECK(only(r.findings, "memlock").level == Level::ok);

  const auto j = nlohmann::json::parse(format_json(r));
  CHECK(j["passed"] == true);
  CHECK(j["summary"]["fail"] == 0);
  CHECK(j["findings"].size() == r.findings.size());
  CHECK(contains(format_text(r), "OK   rdma.port"));
}

TEST_CASE("aHostWithNoRdmaSaysSoAndWhatWouldBeNeeded") {
  TempDir t("doctor");
  t.mkdir("sys");
  t.mkdir("proc");
  Options o = options(t);
  o.verbs = nullptr;  // a fake root: libibverbs is not asked
  auto f = check_rdma_devices(o);
  const Finding d = with_check(f, "rdma.devices").at(0);
  CHECK(d.level == Level::warn);  // shm still works
  CHECK(contains(d.message, "no RDMA device"));
  CHECK(contains(d.fix, "rdma link add rxe0 type rxe"));
  CHECK(contains(with_check(f, "rdma.devices").at(1).fix, "modprobe ib_core"));
  // The other RDMA checks have nothing to say, rather than failing.
  CHECK(check_rdma_ports(o).empty());
  CHECK(check_gids(o).empty());
  CHECK(check_mtu(o).empty());

  // A configuration that asks for rc cannot run here.
  o.subscriber = SubscriberConfig{};
  o.subscriber->transport = TransportKind::rc;
  CHECK(check_rdma_devices(o).at(0).level == Level::fail);
  CHECK_FALSE(run(o, std::vector<std::string>{"rdma"}).passed());
}

TEST_CASE("devicesWithoutUverbsOrProviderFail") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  SECTION("no uverbs character device") {
    std::filesystem::remove_all(t / "sys/class/infiniband_verbs");
    const Finding& f = only(check_rdma_devices(o), "rdma.devices");
    CHECK(f.level == Level::fail);
    CHECK(f.fix == "modprobe ib_uverbs");
  }
  SECTION("libibverbs does not list it: provider missing") {
    o.verbs = [] {
      VerbsView v;
      v.queried = true;
      return v;
    };
    const Finding& f = only(check_rdma_devices(o), "rdma.devices");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.fix, "ibverbs-providers"));
  }
  SECTION("a device that cannot be opened") {
    o.verbs = [] {
      VerbsView v = verbs();
      v.devices[0].error = "ibv_open_device: Permission denied";
      return v;
    };
    const Finding& f = only(check_rdma_devices(o), "rdma.devices");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.message, "Permission denied"));
  }
  SECTION("a device named that does not exist") {
    o.device = "rxe9";
    const Finding& f = only(check_rdma_devices(o), "rdma.devices");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.message, "present: mlx5_0"));
  }
}

TEST_CASE("portStateAndLinkLayerAreChecked") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  SECTION("ethernet port down") {
    t.write(std::string(kPort) + "state", "1: DOWN\n");
    t.write(std::string(kPort) + "phys_state", "3: Disabled\n");
    const Finding& f = only(check_rdma_ports(o), "rdma.port");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.message, "state DOWN, physical state Disabled"));
    CHECK(f.fix == "ip link set dev eth0 up");
  }
  SECTION("ethernet port polling: no link") {
    t.write(std::string(kPort) + "state", "1: DOWN\n");
    t.write(std::string(kPort) + "phys_state", "2: Polling\n");
    const Finding& f = only(check_rdma_ports(o), "rdma.port");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.fix, "ip link set dev eth0 up"));
  }
  SECTION("infiniband port in INIT: no subnet manager") {
    t.write(std::string(kPort) + "state", "2: INIT\n");
    t.write(std::string(kPort) + "link_layer", "InfiniBand\n");
    const auto fs = check_rdma_ports(o);
    CHECK(only(fs, "rdma.port").level == Level::fail);
    CHECK(contains(only(fs, "rdma.port").fix, "opensm"));
    CHECK(only(fs, "rdma.link_layer").message == "InfiniBand");
  }
  SECTION("state file missing") {
    std::filesystem::remove(t / (std::string(kPort) + "state"));
    const Finding& f = only(check_rdma_ports(o), "rdma.port");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.message, "cannot read"));
  }
  SECTION("link layer file missing") {
    std::filesystem::remove(t / (std::string(kPort) + "link_layer"));
    CHECK(only(check_rdma_ports(o), "rdma.link_layer").level == Level::warn);
  }
  SECTION("healthy") {
    const auto fs = check_rdma_ports(o);
    CHECK(only(fs, "rdma.port").level == Level::ok);
    CHECK(only(fs, "rdma.link_layer").message == "Ethernet (RoCE) on eth0");
  }
}

TEST_CASE("gidTableHoldsRoceV2GidOfTheConfiguredAddress") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  SECTION("address from the publisher's config, present as RoCE v2") {
    o.publisher = PublisherConfig{};
    o.publisher->transport = TransportKind::rc;
    o.publisher->rdma.address = "192.168.100.1";
    const Finding& f = only(check_gids(o), "rdma.gid");
    CHECK(f.level == Level::ok);
    CHECK(contains(f.message, "index 3"));
  }
  SECTION("only a RoCE v1 GID for the address") {
    t.write(std::string(kPort) + "gid_attrs/types/3", "IB/RoCE v1\n");
    o.address = "192.168.100.1";
    const Finding& f = only(check_gids(o), "rdma.gid");
    CHECK(f.level == Level::warn);
    CHECK(contains(f.message, "RoCE v1"));
  }
  SECTION("address not on the device") {
    o.address = "10.0.0.7";
    const Finding& f = only(check_gids(o), "rdma.gid");
    CHECK(f.level == Level::fail);
    CHECK(f.fix.rfind("ip addr add 10.0.0.7/24 dev eth0", 0) == 0);
  }
  SECTION("no address: lists the RoCE v2 GIDs of IP addresses") {
    const Finding& f = only(check_gids(o), "rdma.gid");
    CHECK(f.level == Level::ok);
    CHECK(contains(f.message, "3=192.168.100.1"));
    CHECK_FALSE(contains(f.message, "fe80"));
  }
  SECTION("no address and only link-local GIDs") {
    std::filesystem::remove(t / (std::string(kPort) + "gids/2"));
    std::filesystem::remove(t / (std::string(kPort) + "gids/3"));
    const Finding& f = only(check_gids(o), "rdma.gid");
    CHECK(f.level == Level::warn);
    CHECK(contains(f.fix, "dev eth0"));
  }
  SECTION("broken entries are skipped: garbage GID, unreadable type") {
    t.write(std::string(kPort) + "gids/5", "not-a-gid\n");
    std::filesystem::remove(t / (std::string(kPort) + "gid_attrs/types/3"));
    o.address = "192.168.100.1";
    const Finding& f = only(check_gids(o), "rdma.gid");
    CHECK(f.level == Level::warn);  // index 3 lost its type: only the v1 entry remains sure
  }
  SECTION("a host name cannot be checked") {
    o.address = "md-publisher.example";
    CHECK(check_gids(o).at(0).level == Level::warn);
  }
}

TEST_CASE("activeMtuIsCheckedAgainstTheNetdevAndDatagrams") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  SECTION("4096 on a 1500-byte interface fails") {
    o.verbs = [] { return verbs("ACTIVE", 4096); };
    const Finding& f = only(check_mtu(o), "rdma.mtu");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.fix, "ip link set dev eth0 mtu"));
  }
  SECTION("1024 on 1500 is right") {
    CHECK(only(check_mtu(o), "rdma.mtu").level == Level::ok);
  }
  SECTION("1024 on a jumbo interface is information") {
    t.write("sys/class/net/eth0/mtu", "9000\n");
    const Finding& f = only(check_mtu(o), "rdma.mtu");
    CHECK(f.level == Level::info);
    CHECK(contains(f.message, "would carry 4096"));
  }
  SECTION("netdev mtu unreadable") {
    t.write("sys/class/net/eth0/mtu", "garbage\n");
    CHECK(only(check_mtu(o), "rdma.mtu").level == Level::warn);
  }
  SECTION("no libibverbs answer") {
    o.verbs = nullptr;
    const Finding& f = only(check_mtu(o), "rdma.mtu");
    CHECK(f.level == Level::info);
    CHECK(contains(f.message, "eth0 MTU 1500"));
  }
  SECTION("ud batching that does not fit one datagram") {
    o.publisher = PublisherConfig{};
    o.publisher->transport = TransportKind::ud;
    o.publisher->rdma.max_ticks_per_datagram = 16;  // 64 + 1024 bytes > 1024
    const Finding& f = only(check_mtu(o), "rdma.mtu");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.fix, "max_ticks_per_datagram <= 15"));
  }
}

TEST_CASE("lockedMemoryLimitIsCheckedAgainstTheRings") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  const auto limit = [&](const std::string& soft) {
    t.write("proc/self/limits", "Max locked memory         " + soft + "                " + soft +
                                    "                bytes     \n");
  };
  SECTION("an rc subscriber's ring above the limit fails") {
    limit("65536");
    o.subscriber = SubscriberConfig{};
    o.subscriber->transport = TransportKind::rc;
    o.subscriber->ring_capacity = 16384;  // 1 MiB
    const Finding& f = only(check_locked_memory(o), "memlock");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.message, "1.0 MiB"));
    CHECK(contains(f.fix, "ulimit -l unlimited"));
    CHECK(locked_memory_needed(o, true).bytes == 16384 * 64);
  }
  SECTION("enough") {
    limit("8388608");
    o.subscriber = SubscriberConfig{};
    o.subscriber->transport = TransportKind::rc;
    CHECK(only(check_locked_memory(o), "memlock").level == Level::ok);
  }
  SECTION("shm without lock_memory needs nothing") {
    limit("65536");
    o.publisher = PublisherConfig{};
    CHECK(locked_memory_needed(o, true).bytes == 0);
    CHECK(only(check_locked_memory(o), "memlock").level == Level::ok);
  }
  SECTION("shm with lock_memory counts every ring of the segment") {
    o.publisher = PublisherConfig{};
    o.publisher->lock_memory = true;
    o.publisher->max_subscribers = 4;
    o.publisher->ring_capacity = 1024;
    CHECK(locked_memory_needed(o, false).bytes == 4 * 1024 * 64);
  }
  SECTION("no config on an RDMA host: a default rc pair, a warning only") {
    limit("65536");
    const Finding& f = only(check_locked_memory(o), "memlock");
    CHECK(f.level == Level::warn);
    CHECK(contains(f.message, "default rings"));
  }
  SECTION("CAP_IPC_LOCK is mentioned") {
    t.write("proc/self/status", "Name:\tdoctor\nCapEff:\t000001ffffffffff\n");
    const auto fs = check_locked_memory(o);
    REQUIRE(fs.size() == 2);
    CHECK(fs[1].level == Level::info);
    CHECK(contains(fs[1].message, "CAP_IPC_LOCK"));
  }
  SECTION("limits file missing or broken") {
    std::filesystem::remove(t / "proc/self/limits");
    CHECK(only(check_locked_memory(o), "memlock").level == Level::warn);
    t.write("proc/self/limits", "Max locked memory   lots   lots   bytes\n");
    CHECK(only(check_locked_memory(o), "memlock").level == Level::warn);
  }
}

TEST_CASE("hotCoresAreCheckedForIsolationTickRcuGovernorSmtAndNuma") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  o.cpus = {1};
  SECTION("a core that is not isolated warns three times with the boot fix") {
    const auto fs = check_cpus(o);
    CHECK(only(fs, "cpu.isolated", "cpu 1").level == Level::warn);
    CHECK(only(fs, "cpu.nohz_full", "cpu 1").level == Level::warn);
    CHECK(only(fs, "cpu.rcu_nocbs", "cpu 1").level == Level::warn);
    CHECK(contains(only(fs, "cpu.isolated", "cpu 1").fix, "isolcpus=1 nohz_full=1 rcu_nocbs=1"));
  }
  SECTION("nohz_full implies rcu_nocbs") {
    t.write("proc/cmdline", "root=/dev/sda1 nohz_full=1-3\n");
    t.write("sys/devices/system/cpu/nohz_full", "1-3\n");
    const auto fs = check_cpus(o);
    CHECK(only(fs, "cpu.rcu_nocbs", "cpu 1").level == Level::ok);
    CHECK(contains(only(fs, "cpu.rcu_nocbs", "cpu 1").message, "implied"));
  }
  SECTION("nohz_full reads (null) when none") {
    t.write("sys/devices/system/cpu/nohz_full", "(null)\n");
    o.cpus = {2};
    CHECK(only(check_cpus(o), "cpu.nohz_full", "cpu 2").level == Level::warn);
  }
  SECTION("an offline or missing core fails") {
    o.cpus = {7};
    const Finding& f = only(check_cpus(o), "cpu.online", "cpu 7");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.message, "no such cpu"));
  }
  SECTION("governor") {
    t.write("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave\n");
    const Finding& f = only(check_cpus(o), "cpu.governor", "cpu 1");
    CHECK(f.level == Level::warn);
    CHECK(f.fix == "cpupower -c 1 frequency-set -g performance");
    std::filesystem::remove_all(t / "sys/devices/system/cpu/cpu1/cpufreq");
    CHECK(only(check_cpus(o), "cpu.governor", "cpu 1").level == Level::info);
  }
  SECTION("busy SMT sibling warns, idle one informs") {
    o.cpus = {2};
    t.write("sys/devices/system/cpu/cpu2/topology/thread_siblings_list", "2-3\n");
    o.between_samples = [&] { t.write("proc/stat", stat_text(10 + 90, 100 + 10)); };
    const Finding& busy = only(check_cpus(o), "cpu.smt", "cpu 2");
    CHECK(busy.level == Level::warn);
    CHECK(contains(busy.message, "cpu 3 is busy (90%"));
    t.write("proc/stat", stat_text(10, 100));
    o.between_samples = [&] { t.write("proc/stat", stat_text(10 + 1, 100 + 99)); };
    const Finding& idle = only(check_cpus(o), "cpu.smt", "cpu 2");
    CHECK(idle.level == Level::info);
    CHECK(contains(idle.message, "idle (1% busy"));
    o.between_samples = [&] { std::filesystem::remove(t / "proc/stat"); };
    CHECK(contains(only(check_cpus(o), "cpu.smt", "cpu 2").message, "could not be measured"));
  }
  SECTION("two hot threads on SMT siblings") {
    o.cpus = {2, 3};
    t.write("sys/devices/system/cpu/cpu2/topology/thread_siblings_list", "2-3\n");
    CHECK(only(check_cpus(o), "cpu.smt", "cpu 2").level == Level::warn);
  }
  SECTION("numa node of the core against the NIC's") {
    t.write("sys/devices/system/node/node0/cpulist", "0-1\n");
    t.write("sys/devices/system/node/node1/cpulist", "2-3\n");
    t.write("sys/class/infiniband/mlx5_0/device/numa_node", "1\n");
    const Finding& far = only(check_cpus(o), "cpu.numa", "cpu 1");
    CHECK(far.level == Level::warn);
    CHECK(contains(far.fix, "node 1: 2-3"));
    o.cpus = {2};
    CHECK(only(check_cpus(o), "cpu.numa", "cpu 2").level == Level::ok);
    t.write("sys/class/infiniband/mlx5_0/device/numa_node", "-1\n");
    CHECK(only(check_cpus(o), "cpu.numa", "cpu 2").level == Level::info);
  }
  SECTION("no cores named: isolation summary") {
    o.cpus.clear();
    CHECK(only(check_cpus(o), "cpu.isolated").level == Level::info);
    std::filesystem::remove(t / "sys/devices/system/cpu/isolated");
    t.write("proc/cmdline", "root=/dev/sda1\n");
    const Finding& f = only(check_cpus(o), "cpu.isolated");
    CHECK(f.level == Level::warn);
    CHECK(contains(f.fix, "isolcpus=<cpus>"));
  }
}

TEST_CASE("irqbalanceIsFlaggedUnlessItSparesTheHotCores") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  o.cpus = {2, 3};
  CHECK(only(check_irqbalance(o), "irqbalance").level == Level::ok);
  t.write("proc/812/comm", "irqbalance\n");
  const Finding& f = only(check_irqbalance(o), "irqbalance");
  CHECK(f.level == Level::warn);
  CHECK(contains(f.fix, "IRQBALANCE_BANNED_CPULIST=2-3"));
  t.write("etc/default/irqbalance", "#comment\nIRQBALANCE_BANNED_CPULIST=\"2-3\"\n");
  CHECK(only(check_irqbalance(o), "irqbalance").level == Level::ok);
  t.write("proc/812/comm", "");  // a process with an empty name is not irqbalance
  CHECK(contains(only(check_irqbalance(o), "irqbalance").message, "not running"));
}

TEST_CASE("tscInvarianceComesFromCpuFlags") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  CHECK(only(check_tsc(o), "tsc").level == Level::ok);
  t.write("proc/cpuinfo", "flags\t: fpu tsc constant_tsc\n");
  const Finding& f = only(check_tsc(o), "tsc");
  CHECK(f.level == Level::warn);
  CHECK(contains(f.message, "no nonstop_tsc"));
  CHECK(contains(f.fix, "+invtsc"));
  t.write("sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc\n");
  CHECK(contains(only(check_tsc(o), "tsc").message, "tens of ns per stamp"));
  t.write("sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet\n");
  CHECK(contains(only(check_tsc(o), "tsc").message, "clocksource hpet: every stamp is a system call"));
  std::filesystem::remove(t / "proc/cpuinfo");
  CHECK(only(check_tsc(o), "tsc").level == Level::warn);
}

TEST_CASE("hugePagesAndMapCount") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  t.write("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
  CHECK(only(check_huge_pages(o), "thp").level == Level::warn);
  t.write("sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n");
  CHECK(only(check_huge_pages(o), "thp").level == Level::info);
  std::filesystem::remove(t / "sys/kernel/mm/transparent_hugepage/enabled");
  CHECK(only(check_huge_pages(o), "thp").level == Level::info);
  CHECK(contains(only(check_huge_pages(o), "hugepages").message, "512 reserved huge pages of 2.0 MiB"));
  t.write("proc/meminfo", "HugePages_Total:       0\n");
  CHECK(contains(only(check_huge_pages(o), "hugepages").fix, "vm.nr_hugepages"));
  std::filesystem::remove(t / "proc/meminfo");
  CHECK(only(check_huge_pages(o), "hugepages").level == Level::info);

  t.write("proc/sys/vm/max_map_count", "1024\n");
  CHECK(only(check_max_map_count(o), "vm.max_map_count").level == Level::warn);
  t.write("proc/sys/vm/max_map_count", "junk\n");
  CHECK(contains(only(check_max_map_count(o), "vm.max_map_count").message, "cannot read"));
  t.write("proc/sys/vm/max_map_count", "262144\n");
  CHECK(only(check_max_map_count(o), "vm.max_map_count").level == Level::ok);
}

TEST_CASE("roceEcnSettingsAreReportedAsInformation") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  CHECK(contains(only(check_roce_qos(o), "roce.pfc_ecn").message, "no ECN settings"));
  for (int p = 0; p < 8; ++p) {
    t.write("sys/class/net/eth0/ecn/roce_np/enable/" + std::to_string(p), p == 3 ? "1\n" : "0\n");
    t.write("sys/class/net/eth0/ecn/roce_rp/enable/" + std::to_string(p), p >= 3 ? "1\n" : "0\n");
  }
  const Finding& f = only(check_roce_qos(o), "roce.pfc_ecn");
  CHECK(f.level == Level::info);
  CHECK(contains(f.message, "notification point on priorities 3"));
  CHECK(contains(f.message, "reaction point on priorities 3,4,5,6,7"));
}

TEST_CASE("configFileFeedsTheChecksAndItsErrorsFail") {
  TempDir t("doctor");
  healthy_host(t);
  Options o = options(t);
  t.write("app.toml",
          "transport = \"rc\"\nchannel = \"md\"\n[publisher]\nring_capacity = 4096\n"
          "[rdma]\naddress = \"192.168.100.1\"\n[jitter]\ncpu = 3\n[replay]\ncpu = 2\n");
  load_config(t / "app.toml", o);
  CHECK(o.config_errors.empty());
  REQUIRE(o.publisher.has_value());
  CHECK(o.publisher->transport == TransportKind::rc);
  CHECK(o.publisher->ring_capacity == 4096);
  CHECK(o.cpus == std::vector<int>{2, 3});
  CHECK(only(run(o, std::vector<std::string>{"config"}).findings, "config").level == Level::ok);
  CHECK(only(check_gids(o), "rdma.gid").level == Level::ok);  // the publisher's address

  Options bad = options(t);
  t.write("bad.toml", "transport = \"carrier-pigeon\"\n");
  load_config(t / "bad.toml", bad);
  CHECK_FALSE(bad.config_errors.empty());
  const Report r = run(bad, std::vector<std::string>{"config"});
  CHECK_FALSE(r.passed());
  CHECK(contains(r.findings.at(0).message, "carrier-pigeon"));

  Options missing = options(t);
  load_config(t / "nope.toml", missing);
  CHECK(missing.config_errors.size() == 1);

  CHECK_THROWS_AS(run(o, std::vector<std::string>{"no-such-check"}), Error);
}

TEST_CASE("cpuBusyIsTheNonIdleShareBetweenTwoSamples") {
  CHECK(cpu_busy(stat_text(10, 100), stat_text(60, 150), 3) == Approx(0.5));
  CHECK(cpu_busy(stat_text(10, 100), stat_text(10, 200), 3) == Approx(0.0));
  CHECK_FALSE(cpu_busy(stat_text(10, 100), stat_text(10, 100), 3).has_value());  // no time passed
  CHECK_FALSE(cpu_busy(stat_text(10, 100), stat_text(60, 150), 9).has_value());  // no such cpu
  CHECK_FALSE(cpu_busy("", "", 3).has_value());
}

TEST_CASE("shmRingMemoryIsCheckedAgainstWhatTheHostHasAvailable") {
  TempDir t("doctor");
  t.write("proc/meminfo", "MemTotal:       1048576 kB\nMemAvailable:     65536 kB\n");
  std::filesystem::create_directories(t / "dev/shm");
  Options o;
  o.root = t.path();
  o.publisher = PublisherConfig{};
  o.publisher->max_subscribers = 8;
  SECTION("64 MiB available, 8 rings of 2^18 slots (128 MiB): fail at start") {
    o.publisher->ring_capacity = 1 << 18;
    const auto fs = check_shm_memory(o);
    const Finding& f = only(fs, "shm.memory");
    CHECK(f.level == Level::fail);
    CHECK(contains(f.message, "64.0 MiB"));
    CHECK(contains(f.fix, "ring_capacity"));
    CHECK(only(fs, "shm.dir").level == Level::ok);
  }
  SECTION("the default geometry fits") {
    CHECK(only(check_shm_memory(o), "shm.memory").level == Level::ok);
  }
  SECTION("a shm_dir that does not exist") {
    o.publisher->shm_dir = "/nowhere";
    CHECK(only(check_shm_memory(o), "shm.dir").level == Level::fail);
  }
}

TEST_CASE("threadsPlacementWarnsWhenBackgroundThreadsWouldShareAHotCore") {
  TempDir t("doctor");
  healthy_host(t);  // cpus 0-3
  const auto placement = [&](const std::string& toml, std::vector<int> cpus = {}) {
    Options o = options(t);
    o.cpus = std::move(cpus);
    t.write("app.toml", toml);
    load_config(t / "app.toml", o);
    INFO(toml);
    REQUIRE(o.config_errors.empty());
    return check_threads(o);
  };
  // housekeeping_cpus on the replay's hot cpu.
  std::vector<Finding> f = placement("[publisher]\nhousekeeping_cpus = \"1-2\"\n[replay]\ncpu = 2\n");
  const Finding& pub = only(f, "threads.placement", "publisher housekeeping_cpus");
  CHECK(pub.level == Level::warn);
  CHECK(contains(pub.message, "hot cpu 2"));
  CHECK(contains(pub.fix, "housekeeping_cpus = \"0-1,3\""));
  // Apart from it: fine.
  f = placement("[publisher]\nhousekeeping_cpus = \"0-1\"\n[replay]\ncpu = 2\n");
  CHECK(only(f, "threads.placement", "publisher housekeeping_cpus").level == Level::ok);
  // Not set, and every cpu hot: no room left.
  f = placement("[subscriber]\nchannel = \"md\"\n", {0, 1, 2, 3});
  const Finding& sub = only(f, "threads.placement", "subscriber housekeeping_cpus");
  CHECK(sub.level == Level::warn);
  CHECK(contains(sub.message, "every online cpu"));
  // A cpu the host does not have: creating the endpoint would fail.
  f = placement("housekeeping_cpus = \"7\"\n[subscriber]\nchannel = \"md\"\n");
  CHECK(only(f, "threads.placement", "subscriber housekeeping_cpus").level == Level::fail);
  // Not set, one hot cpu: the default keeps them off it.
  f = placement("[publisher]\nchannel = \"md\"\n[replay]\ncpu = 3\n");
  CHECK(only(f, "threads.placement", "publisher housekeeping_cpus").level == Level::ok);
  CHECK(contains(only(f, "threads.placement", "publisher housekeeping_cpus").message, "0-2"));
}

TEST_CASE("threadsPlacementWarnsOnAHostWithOneCpu") {
  TempDir t("doctor");
  healthy_host(t);
  t.write("sys/devices/system/cpu/online", "0\n");
  for (const std::string toml : {"[subscriber]\nchannel = \"md\"\n",
                                 "[subscriber]\nhousekeeping_cpus = \"0\"\n"}) {
    Options o = options(t);
    t.write("app.toml", toml);
    load_config(t / "app.toml", o);
    INFO(toml);
    REQUIRE(o.config_errors.empty());
    const Finding& f = only(check_threads(o), "threads.placement", "subscriber housekeeping_cpus");
    CHECK(f.level == Level::warn);
    CHECK(contains(f.message, "one online cpu"));
  }
}
