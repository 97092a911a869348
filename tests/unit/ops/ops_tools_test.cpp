// tickrail-stat and tickrail-doctor as programs: JSON of a live pair and of a killed process,
// the refreshing view, the doctor's exit status.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "ops_test_util.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/stats.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

std::string tool(const char* env) {
  const char* p = std::getenv(env);
  if (p == nullptr || *p == '\0') {
    throw std::runtime_error(std::string(env) + " is not set (run through meson test)");
  }
  return p;
}

struct Run {
  int status = -1;
  std::string out;
};

// Runs a command line (stderr folded into stdout); the programs end by themselves.
Run run(const std::string& cmd) {
  Run r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const nlohmann::json* find_pid(const nlohmann::json& all, int pid) {
  for (const auto& p : all) {
    if (p["pid"] == pid) return &p;
  }
  return nullptr;
}

// Kills and reaps a forked child when a failed REQUIRE leaves the test early.
struct ChildGuard {
  pid_t pid;
  explicit ChildGuard(pid_t p) : pid(p) {}
  ~ChildGuard() {
    if (pid > 0 && ::kill(pid, SIGKILL) == 0) (void)::waitpid(pid, nullptr, 0);
  }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
};

struct Dirs {
  TempDir stat{"stat"};
  TempDir shm{"shm"};
  Dirs() { ::setenv("TICKRAIL_STAT_DIR", stat.path().c_str(), 1); }
};

PublisherConfig pub_config(const Dirs& d, const std::string& ch) {
  PublisherConfig c;
  c.channel = ch;
  c.shm_dir = d.shm.path();
  c.ring_capacity = 64;
  c.max_subscribers = 2;
  c.conductor_period = 1ms;
  return c;
}

}  // namespace

TEST_CASE("statJsonShowsTheCountersOfALivePair") {
  Dirs d;
  const std::string ch = "toolpair" + std::to_string(::getpid());
  Publisher pub(pub_config(d, ch));
  SubscriberConfig sc;
  sc.channel = ch;
  sc.shm_dir = d.shm.path();
  Subscriber sub(sc);
  REQUIRE(eventually([&] {
    pub.service();
    return pub.subscriber_count() == 1;
  }));
  REQUIRE(sub.wait_active(5s));
  for (int i = 0; i < 10; ++i) {
    REQUIRE(pub.publish(Tick{}).ok());
  }
  std::size_t got = 0;
  REQUIRE(eventually([&] {
    got += sub.poll([](const Tick&) {});
    return got == 10;
  }));

  const Run r = run(tool("TICKRAIL_STAT_TOOL") + " --json --dir " + d.stat.path());
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto all = nlohmann::json::parse(r.out);
  const auto* me = find_pid(all, ::getpid());
  REQUIRE(me != nullptr);
  CHECK((*me)["status"] == "alive");
  CHECK((*me)["removed"] == false);
  REQUIRE((*me)["endpoints"].size() == 2);
  for (const auto& e : (*me)["endpoints"]) {
    CHECK(e["channel"] == ch);
    CHECK(e["transport"] == "shm");
    if (e["kind"] == "publisher") {
      CHECK(e["counters"]["published"].get<std::uint64_t>() == pub.counters().published);
      CHECK(e["state"] == "open");
      CHECK(e.contains("subscribers"));
    } else {
      CHECK(e["kind"] == "subscriber");
      CHECK(e["counters"]["received"] == 10);
      CHECK(e["counters"]["lost"] == 0);
      CHECK(e["state"] == "active");
    }
  }

  // Text, once and refreshing: the top-like view redraws the screen each time.
  const Run once = run(tool("TICKRAIL_STAT_TOOL") + " --once --dir " + d.stat.path());
  CHECK(once.status == 0);
  CHECK(once.out.find("pid " + std::to_string(::getpid())) != std::string::npos);
  CHECK(once.out.find("publisher shm '" + ch + "' open") != std::string::npos);
  CHECK(once.out.find("received 10") != std::string::npos);
  const Run top = run(tool("TICKRAIL_STAT_TOOL") + " --count 2 --interval 0.05 --dir " + d.stat.path());
  CHECK(top.status == 0);
  std::size_t clears = 0;
  for (std::size_t at = top.out.find("\033[H\033[2J"); at != std::string::npos;
       at = top.out.find("\033[H\033[2J", at + 1)) {
    ++clears;
  }
  CHECK(clears == 2);
}

TEST_CASE("statJsonMarksAKilledProcessDeadAndCleansUp") {
  Dirs d;
  const std::string ch = "toolkill" + std::to_string(::getpid());
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipefd[0]);
    int ok = 0;
    try {
      Publisher pub(pub_config(d, ch));
      for (int i = 0; i < 3; ++i) (void)pub.publish(Tick{});
      ok = 1;
      (void)::write(pipefd[1], &ok, sizeof ok);
      ::pause();  // killed by the parent, the publisher still open
    } catch (...) {
      ok = 2;
      (void)::write(pipefd[1], &ok, sizeof ok);
    }
    ::_exit(1);
  }
  ChildGuard guard(child);
  ::close(pipefd[1]);
  int ok = 0;
  REQUIRE(::read(pipefd[0], &ok, sizeof ok) == sizeof ok);
  ::close(pipefd[0]);
  REQUIRE(ok == 1);
  const std::string path = stats::stat_path(d.stat.path(), child);

  const Run alive = run(tool("TICKRAIL_STAT_TOOL") + " --json --dir " + d.stat.path());
  INFO(alive.out);
  REQUIRE(alive.status == 0);
  const auto a = nlohmann::json::parse(alive.out);
  REQUIRE(find_pid(a, child) != nullptr);
  CHECK((*find_pid(a, child))["status"] == "alive");

  REQUIRE(::kill(child, SIGKILL) == 0);
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  guard.pid = -1;
  REQUIRE(file_exists(path));

  const Run dead = run(tool("TICKRAIL_STAT_TOOL") + " --json --dir " + d.stat.path());
  INFO(dead.out);
  REQUIRE(dead.status == 0);
  const auto j = nlohmann::json::parse(dead.out);
  const auto* c = find_pid(j, child);
  REQUIRE(c != nullptr);
  CHECK((*c)["status"] == "dead");
  CHECK((*c)["removed"] == true);
  REQUIRE((*c)["endpoints"].size() == 1);
  CHECK((*c)["endpoints"][0]["counters"]["published"] == 3);
  CHECK_FALSE(file_exists(path));

  // Once removed, it is gone from the next listing.
  const Run after = run(tool("TICKRAIL_STAT_TOOL") + " --json --dir " + d.stat.path());
  CHECK(find_pid(nlohmann::json::parse(after.out), child) == nullptr);
}

TEST_CASE("statReportsAnUnreadableDirectory") {
  const Run r = run(tool("TICKRAIL_STAT_TOOL") + " --json --dir /nonexistent/tickrail-stat-dir");
  CHECK(r.status == 1);
  CHECK(r.out.find("/nonexistent/tickrail-stat-dir") != std::string::npos);
}

TEST_CASE("doctorExitsZeroWithoutFailuresAndOneWithThem") {
  TempDir t("doctor-tool");
  t.mkdir("sys/class");
  t.write("proc/sys/vm/max_map_count", "65530\n");
  const std::string doctor = tool("TICKRAIL_DOCTOR_TOOL") + " --root " + t.path();

  // No RDMA and no config: a warning, not a failure.
  Run r = run(doctor + " --json --only rdma");
  INFO(r.out);
  CHECK(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["passed"] == true);
  CHECK(j["summary"]["warn"].get<int>() >= 1);
  CHECK(j["findings"][0]["check"] == "rdma.devices");

  // A config asking for rc on a host without a device fails.
  t.write("rc.toml", "transport = \"rc\"\n[rdma]\naddress = \"10.0.0.1\"\n");
  r = run(doctor + " --json --only rdma --config " + (t / "rc.toml"));
  CHECK(r.status == 1);
  CHECK(nlohmann::json::parse(r.out)["passed"] == false);

  r = run(doctor + " --only memory --no-color");
  CHECK(r.status == 0);
  CHECK(r.out.find("OK   vm.max_map_count") != std::string::npos);
  CHECK(r.out.find("0 fail") != std::string::npos);

  CHECK(run(doctor + " --only bogus").status == 2);
  const Run list = run(tool("TICKRAIL_DOCTOR_TOOL") + " --list");
  CHECK(list.status == 0);
  CHECK(list.out.find("memlock") != std::string::npos);
}
