// tickrail-doctor on a host with an RDMA device (the rig's guest: rxe0 over Soft-RoCE): it finds
// the device through sysfs and libibverbs, its port ACTIVE, the rig address's RoCE v2 GID and the
// port's active MTU.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "rig_env.hpp"

using namespace tickrail::rdma;

namespace {

struct Run {
  int status = -1;
  std::string out;
};

Run run(const std::string& cmd) {
  Run r;
  FILE* p = ::popen(cmd.c_str(), "r");  // stderr stays on the test's log
  if (p == nullptr) throw std::runtime_error("popen " + cmd);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string doctor() {
  const char* p = std::getenv("TICKRAIL_DOCTOR_TOOL");
  if (p == nullptr || *p == '\0') throw std::runtime_error("TICKRAIL_DOCTOR_TOOL is not set");
  return p;
}

const nlohmann::json* find(const nlohmann::json& findings, const std::string& check,
                           const std::string& subject) {
  for (const auto& f : findings) {
    if (f["check"] == check && f["subject"] == subject) return &f;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("doctorFindsTheRigDeviceActiveWithItsGidAndMtu") {
  const std::string dev = test::device();  // fails with "no RDMA device: run scripts/rig"
  const std::string addr = test::address(dev);
  const Run r = run(doctor() + " --json --only rdma --device " + dev + " --address " + addr);
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& fs = j["findings"];

  const auto* d = find(fs, "rdma.devices", dev);
  REQUIRE(d != nullptr);
  CHECK((*d)["level"] == "OK");
  CHECK((*d)["message"].get<std::string>().find("opened through libibverbs") != std::string::npos);

  const auto* port = find(fs, "rdma.port", dev + " port 1");
  REQUIRE(port != nullptr);
  CHECK((*port)["level"] == "OK");
  CHECK((*port)["message"].get<std::string>().find("state ACTIVE") != std::string::npos);
  // libibverbs agrees (ibv_port_state_str: "active" or "PORT_ACTIVE" by rdma-core version).
  std::string verbs_said = (*port)["message"].get<std::string>();
  for (char& c : verbs_said) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  CHECK(verbs_said.find("(libibverbs: ") != std::string::npos);
  CHECK(verbs_said.find("active)") != std::string::npos);

  const auto* gid = find(fs, "rdma.gid", dev + " port 1");
  REQUIRE(gid != nullptr);
  CHECK((*gid)["level"] == "OK");
  CHECK((*gid)["message"].get<std::string>().find("RoCE v2 for " + addr) != std::string::npos);

  const auto* mtu = find(fs, "rdma.mtu", dev + " port 1");
  REQUIRE(mtu != nullptr);
  CHECK(((*mtu)["level"] == "OK" || (*mtu)["level"] == "INFO"));
  CHECK((*mtu)["message"].get<std::string>().rfind("active MTU ", 0) == 0);

  // Every check runs on the guest without crashing; what the guest lacks (isolation...) is WARN.
  const Run all = run(doctor() + " --no-color --sample-ms 50");
  std::cout << all.out;
  CHECK((all.status == 0 || all.status == 1));
  CHECK(all.out.find("OK   rdma.port") != std::string::npos);
}
