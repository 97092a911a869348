// tickrail-stat and tickrail-doctor as programs: JSON of a live pair and of a killed process,
// the refreshing view, the doctor's exit status.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "../docs_check.hpp"
#include "ops_test_util.hpp"
#include "tickrail/failover.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/tools/stats_reader.hpp"
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

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
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

  // Every key of the JSON is in docs/apps.md.
  require_json_documented(all, "### JSON of tickrail-stat");

  // Text, once and refreshing. Into a pipe: plain snapshots, one per refresh, no escape codes.
  const Run once = run(tool("TICKRAIL_STAT_TOOL") + " --once --dir " + d.stat.path());
  CHECK(once.status == 0);
  CHECK(once.out.find("pid " + std::to_string(::getpid())) != std::string::npos);
  CHECK(once.out.find("publisher shm '" + ch + "' open") != std::string::npos);
  CHECK(once.out.find("received 10") != std::string::npos);
  const std::string refresh = tool("TICKRAIL_STAT_TOOL") + " --count 2 --interval 0.05 --dir " + d.stat.path();
  const Run piped = run(refresh);
  INFO(piped.out);
  CHECK(piped.status == 0);
  CHECK(piped.out.find('\033') == std::string::npos);
  CHECK(count_of(piped.out, "tickrail-stat ") == 2);
  CHECK(count_of(piped.out, "received 10") == 2);
  // On a terminal (script(1) gives it one): the top-like view redraws the screen each time.
  const Run top = run("script -qec '" + refresh + "' /dev/null");
  INFO(top.out);
  CHECK(top.status == 0);
  CHECK(count_of(top.out, "\033[H\033[2J") == 2);
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

namespace {

// A strict reader of the Prometheus text exposition format (0.0.4): fails the test on any line
// node exporter's parser would reject, and on what the format forbids across lines (a family's
// samples split, TYPE after a sample, a duplicate series, a counter not named *_total).
struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
struct PromText {
  std::map<std::string, std::string> type, help;
  std::vector<PromSample> samples;

  [[nodiscard]] std::vector<const PromSample*> find(const std::string& name,
                                                    const std::map<std::string, std::string>& with) const {
    std::vector<const PromSample*> out;
    for (const PromSample& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : with) match = match && s.labels.count(k) != 0 && s.labels.at(k) == v;
      if (match) out.push_back(&s);
    }
    return out;
  }
};

bool metric_name(const std::string& n) {
  return std::regex_match(n, std::regex("[a-zA-Z_:][a-zA-Z0-9_:]*"));
}

PromText parse_prometheus(const std::string& text) {
  PromText p;
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  std::set<std::string> closed;  // families whose samples are over
  std::set<std::string> series;
  std::string current;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    INFO("line: " << line);
    REQUIRE(!line.empty());
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      REQUIRE(sp != std::string::npos);
      const std::string name = rest.substr(0, sp);
      const std::string arg = rest.substr(sp + 1);
      REQUIRE(metric_name(name));
      REQUIRE(closed.count(name) == 0);
      REQUIRE(name != current);  // HELP and TYPE come before the family's samples
      if (line[2] == 'H') {
        REQUIRE(p.help.count(name) == 0);
        for (std::size_t i = 0; i < arg.size(); ++i) {
          if (arg[i] == '\\') REQUIRE((i + 1 < arg.size() && (arg[i + 1] == '\\' || arg[i + 1] == 'n')));
          if (arg[i] == '\\') ++i;
        }
        p.help[name] = arg;
      } else {
        REQUIRE(p.type.count(name) == 0);
        REQUIRE((arg == "counter" || arg == "gauge"));
        if (arg == "counter") REQUIRE(name.size() > 6);
        if (arg == "counter") REQUIRE(name.substr(name.size() - 6) == "_total");
        p.type[name] = arg;
      }
      continue;
    }
    REQUIRE(line[0] != '#');
    PromSample s;
    std::size_t i = line.find_first_of("{ ");
    REQUIRE(i != std::string::npos);
    s.name = line.substr(0, i);
    REQUIRE(metric_name(s.name));
    REQUIRE(p.type.count(s.name) == 1);
    REQUIRE(p.help.count(s.name) == 1);
    if (line[i] == '{') {
      ++i;
      while (line.at(i) != '}') {
        const std::size_t eq = line.find("=\"", i);
        REQUIRE(eq != std::string::npos);
        const std::string key = line.substr(i, eq - i);
        REQUIRE(std::regex_match(key, std::regex("[a-zA-Z_][a-zA-Z0-9_]*")));
        std::string value;
        for (i = eq + 2; line.at(i) != '"'; ++i) {
          if (line[i] == '\\') {
            const char e = line.at(++i);
            REQUIRE((e == '\\' || e == '"' || e == 'n'));
            value += e == 'n' ? '\n' : e;
          } else {
            value += line[i];
          }
        }
        REQUIRE(s.labels.emplace(key, value).second);
        ++i;
        if (line.at(i) == ',') ++i;
      }
      ++i;
    }
    REQUIRE(line.at(i) == ' ');
    const std::string number = line.substr(i + 1);
    std::size_t used = 0;
    s.value = std::stod(number, &used);
    REQUIRE(used == number.size());
    if (s.name != current) {
      if (!current.empty()) closed.insert(current);
      REQUIRE(closed.count(s.name) == 0);
      current = s.name;
    }
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
    REQUIRE(series.insert(key).second);
    p.samples.push_back(std::move(s));
  }
  return p;
}

// Every metric of a tickrail-stat --prometheus text is in docs/apps.md.
void check_metrics_documented(const PromText& p) {
  std::set<std::string> names;
  for (const auto& [n, t] : p.type) names.insert(n);
  const auto missing = undocumented(names, docs_section("### Prometheus metrics of tickrail-stat"));
  std::string list;
  for (const auto& n : missing) list += " " + n;
  INFO("metrics missing from docs/apps.md:" << list);
  CHECK(missing.empty());
}

}  // namespace

TEST_CASE("statPrometheusExposesEveryCounterWithItsLabels") {
  Dirs d;
  const std::string ch = "toolprom" + std::to_string(::getpid());
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
  for (int i = 0; i < 7; ++i) REQUIRE(pub.publish(Tick{}).ok());
  std::size_t got = 0;
  REQUIRE(eventually([&] {
    got += sub.poll([](const Tick&) {});
    return got == 7;
  }));
  // The publisher's rows are refreshed by its stats thread: wait until they show the subscriber.
  REQUIRE(eventually([&] {
    const auto ps = stats::scan({d.stat.path(), false, "/"});
    for (const auto& p : ps) {
      for (const auto& b : p.blocks) {
        if (b.kind == stats::BlockKind::publisher && b.rows.size() == 1 && b.rows[0].position == 8) return true;
      }
    }
    return false;
  }));

  const Run r = run(tool("TICKRAIL_STAT_TOOL") + " --prometheus --dir " + d.stat.path());
  INFO(r.out);
  REQUIRE(r.status == 0);
  const PromText p = parse_prometheus(r.out);
  const std::string me = std::to_string(::getpid());
  const std::map<std::string, std::string> pub_labels = {
      {"pid", me}, {"role", "publisher"}, {"transport", "shm"}, {"channel", ch}};
  const std::map<std::string, std::string> sub_labels = {
      {"pid", me}, {"role", "subscriber"}, {"transport", "shm"}, {"channel", ch}};
  const auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels) {
    const auto found = p.find(name, labels);
    INFO(name);
    REQUIRE(found.size() == 1);
    CHECK(found[0]->labels.count("endpoint") == 1);
    CHECK(found[0]->labels.count("program") == 1);
    return found[0]->value;
  };
  CHECK(p.type.at("tickrail_publisher_published_total") == "counter");
  CHECK(value("tickrail_publisher_published_total", pub_labels) == static_cast<double>(pub.counters().published));
  CHECK(value("tickrail_subscriber_received_total", sub_labels) == 7);
  CHECK(value("tickrail_subscriber_lost_total", sub_labels) == 0);
  CHECK(p.type.at("tickrail_subscriber_position") == "gauge");
  CHECK(value("tickrail_subscriber_position", sub_labels) == 8);
  CHECK(value("tickrail_publisher_subscribers", pub_labels) == 1);
  auto active = sub_labels;
  active["state"] = "active";
  CHECK(value("tickrail_endpoint_state", active) == 1);
  auto evicted = sub_labels;
  evicted["state"] = "evicted";
  CHECK(value("tickrail_endpoint_state", evicted) == 0);
  // The publisher's row of its subscriber (this process), with its policy.
  auto row = pub_labels;
  row["subscriber_pid"] = me;
  row["slot"] = "0";
  CHECK(value("tickrail_publisher_subscriber_position", row) == 8);
  CHECK(value("tickrail_publisher_subscriber_lag", row) == 0);
  CHECK(p.type.at("tickrail_publisher_subscriber_back_pressure_total") == "counter");
  CHECK(p.find("tickrail_publisher_subscriber_back_pressure_total", row).size() == 1);
  CHECK(p.find("tickrail_publisher_subscriber_lag", row)[0]->labels.count("policy") == 1);
  const auto up = p.find("tickrail_process_up", {{"pid", me}});
  REQUIRE(up.size() == 1);
  CHECK(up[0]->value == 1);
  // Every counter of both kinds is there.
  for (std::uint32_t i = 0; i < stats::counter_count(stats::BlockKind::publisher); ++i) {
    const std::string n = stats::counter_name(stats::BlockKind::publisher, i);
    CHECK(p.find("tickrail_publisher_" + n, pub_labels).size() + p.find("tickrail_publisher_" + n + "_total", pub_labels).size() == 1);
  }
  for (std::uint32_t i = 0; i < stats::counter_count(stats::BlockKind::subscriber); ++i) {
    const std::string n = stats::counter_name(stats::BlockKind::subscriber, i);
    CHECK(p.find("tickrail_subscriber_" + n, sub_labels).size() + p.find("tickrail_subscriber_" + n + "_total", sub_labels).size() == 1);
  }
  // Every metric is in docs/apps.md.
  check_metrics_documented(p);

  // To a file, replaced atomically: the same format, no temporary left behind; rewritten every
  // --interval while --count allows.
  TempDir out("prom");
  const std::string file = out / "tickrail.prom";
  const Run w = run(tool("TICKRAIL_STAT_TOOL") + " --prometheus " + file + " --interval 0.05 --count 3 --dir " +
                    d.stat.path());
  INFO(w.out);
  CHECK(w.status == 0);
  CHECK(w.out.empty());
  const PromText f = parse_prometheus(read_file(file));
  CHECK(f.find("tickrail_subscriber_received_total", sub_labels).size() == 1);
  std::size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(out.path())) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);

  // The file is replaced at each write: a FIFO or a device there is refused, not replaced or
  // waited on.
  const std::string fifo = out / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const Run f2 = run("timeout 20 " + tool("TICKRAIL_STAT_TOOL") + " --once --prometheus " + fifo + " --dir " + d.stat.path());
  CHECK(f2.status == 2);
  CHECK_THAT(f2.out, Catch::Contains("is not a regular file"));
  struct stat fs {};
  CHECK((::lstat(fifo.c_str(), &fs) == 0 && S_ISFIFO(fs.st_mode)));

  // promtool, when installed (Debian's prometheus package), agrees.
  if (run("command -v promtool").status == 0) {
    const Run lint = run("promtool check metrics < " + file);
    INFO(lint.out);
    CHECK(lint.status == 0);
  }
}

TEST_CASE("statPrometheusEscapesLabelValuesReadFromTheCountersFile") {
  stats::ProcessSnapshot proc;
  proc.pid = 42;
  proc.program = "app \"quoted\"";
  proc.status = stats::ProcessStatus::dead;
  stats::BlockSnapshot b;
  b.kind = stats::BlockKind::subscriber;
  b.transport = "shm";
  b.label = std::string("we\"ird\\ch\nan\x1b[2J\xff");
  b.counters[static_cast<std::uint32_t>(stats::SubCounter::received)] = 5;
  proc.blocks.push_back(b);
  const std::string text = stats::format_prometheus(std::span<const stats::ProcessSnapshot>(&proc, 1));
  INFO(text);
  CHECK(text.find('\x1b') == std::string::npos);
  const PromText p = parse_prometheus(text);
  const auto found = p.find("tickrail_subscriber_received_total", {{"pid", "42"}});
  REQUIRE(found.size() == 1);
  CHECK(found[0]->labels.at("channel") == "we\"ird\\ch\nan?[2J?");
  CHECK(found[0]->labels.at("program") == "app \"quoted\"");
  CHECK(found[0]->value == 5);
  CHECK(p.find("tickrail_process_up", {{"pid", "42"}})[0]->value == 0);
}

TEST_CASE("statTextNeverCarriesControlCharactersFromTheCountersFile") {
  stats::ProcessSnapshot proc;
  proc.pid = 43;
  proc.status = stats::ProcessStatus::dead;
  stats::BlockSnapshot b;
  b.kind = stats::BlockKind::publisher;
  b.transport = "shm";
  b.label = "evil\x1b[2J\x07";
  proc.blocks.push_back(b);
  const std::string text = stats::format_text(std::span<const stats::ProcessSnapshot>(&proc, 1));
  INFO(text);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
  CHECK(text.find("'evil?[2J?'") != std::string::npos);
  // JSON escapes what it can and replaces bytes that are not UTF-8 instead of throwing.
  proc.blocks[0].label += "\xff";
  const auto j = nlohmann::json::parse(stats::format_json(std::span<const stats::ProcessSnapshot>(&proc, 1)));
  CHECK(j[0]["endpoints"][0]["channel"] == "evil\x1b[2J\x07\xef\xbf\xbd");
}

TEST_CASE("statShowsBothLinesOfAFailoverSubscriber") {
  Dirs d;
  const std::string a = "toolfoa" + std::to_string(::getpid());
  const std::string b = "toolfob" + std::to_string(::getpid());
  Publisher pa(pub_config(d, a));
  auto pb = std::make_unique<Publisher>(pub_config(d, b));
  FailoverConfig fc;
  for (int i = 0; i < 2; ++i) {
    fc.line[i].channel = i == 0 ? a : b;
    fc.line[i].shm_dir = d.shm.path();
    fc.line[i].attach_timeout = 10s;
  }
  fc.reattach_every = 10ms;
  FailoverSubscriber fs(fc);
  REQUIRE(eventually([&] {
    pa.service();
    pb->service();
    return pa.subscriber_count() == 1 && pb->subscriber_count() == 1;
  }));
  // Line A brings all 8 ticks first, line B only copies; then B's publisher closes.
  std::uint64_t got = 0;
  auto app = [&](const Tick&) { ++got; };
  for (int i = 0; i < 8; ++i) REQUIRE(pa.publish(Tick{}).ok());
  REQUIRE(eventually([&] { (void)fs.poll(app); return got == 8; }));
  for (int i = 0; i < 8; ++i) REQUIRE(pb->publish(Tick{}).ok());
  REQUIRE(eventually([&] { (void)fs.poll(app); return fs.counters().line[1].duplicates == 8; }));
  pb.reset();
  REQUIRE(eventually([&] { (void)fs.poll(app); return !fs.line_up(1); }));

  const Run once = run(tool("TICKRAIL_STAT_TOOL") + " --once --dir " + d.stat.path());
  INFO(once.out);
  REQUIRE(once.status == 0);
  CHECK(once.out.find("failover '" + a + "' + '" + b + "' active") != std::string::npos);
  CHECK(once.out.find("delivered 8  gaps 0 (lost on both lines)  skipped 0 (given up)") != std::string::npos);
  CHECK(std::regex_search(once.out, std::regex("\\n +A +shm +'" + a + "' +up +8 \\(100\\.0%\\) +0 +0 +0 ns\\n")));
  CHECK(std::regex_search(once.out, std::regex("\\n +B +shm +'" + b + "' +down +0 \\(0\\.0%\\) +8 +1 +[0-9.]+ [num]?s\\n")));
  // Line A's own subscriber is still listed beside it.
  CHECK(once.out.find("subscriber shm '" + a + "' active") != std::string::npos);

  const Run js = run(tool("TICKRAIL_STAT_TOOL") + " --json --dir " + d.stat.path());
  INFO(js.out);
  REQUIRE(js.status == 0);
  const auto all = nlohmann::json::parse(js.out);
  const auto* me = find_pid(all, ::getpid());
  REQUIRE(me != nullptr);
  const nlohmann::json* f = nullptr;
  for (const auto& e : (*me)["endpoints"]) {
    if (e["kind"] == "failover") f = &e;
  }
  REQUIRE(f != nullptr);
  CHECK((*f)["state"] == "active");
  CHECK((*f)["counters"]["delivered"] == 8);
  CHECK((*f)["counters"]["gaps"] == 0);
  CHECK((*f)["counters"]["skipped"] == 0);
  const auto& la = (*f)["lines"].at(0);
  const auto& lb = (*f)["lines"].at(1);
  CHECK(la["line"] == "A");
  CHECK(la["channel"] == a);
  CHECK(la["transport"] == "shm");
  CHECK(la["up"] == true);
  CHECK(la["first"] == 8);
  CHECK(la["first_share"] == 1.0);
  CHECK(la["downs"] == 0);
  CHECK(lb["line"] == "B");
  CHECK(lb["channel"] == b);
  CHECK(lb["up"] == false);
  CHECK(lb["first"] == 0);
  CHECK(lb["duplicates"] == 8);
  CHECK(lb["downs"] == 1);
  CHECK(lb["down_since_ns"].get<std::uint64_t>() != 0);
  require_json_documented(all, "### JSON of tickrail-stat");

  // Prometheus: a series per line, labelled with its line, transport and channel; all documented.
  const Run pr = run(tool("TICKRAIL_STAT_TOOL") + " --prometheus --dir " + d.stat.path());
  INFO(pr.out);
  REQUIRE(pr.status == 0);
  const PromText p = parse_prometheus(pr.out);
  const std::string me_pid = std::to_string(::getpid());
  const auto one = [&](const std::string& name, const std::map<std::string, std::string>& labels) {
    const auto found = p.find(name, labels);
    INFO(name);
    REQUIRE(found.size() == 1);
    return found[0]->value;
  };
  CHECK(one("tickrail_failover_delivered_total", {{"pid", me_pid}, {"role", "failover"}}) == 8);
  CHECK(one("tickrail_failover_line_up", {{"line", "A"}, {"channel", a}, {"transport", "shm"}}) == 1);
  CHECK(one("tickrail_failover_line_up", {{"line", "B"}, {"channel", b}}) == 0);
  CHECK(one("tickrail_failover_line_duplicates_total", {{"line", "B"}}) == 8);
  CHECK(one("tickrail_failover_line_downs_total", {{"line", "B"}}) == 1);
  check_metrics_documented(p);
}
