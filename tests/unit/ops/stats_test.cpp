// The counters file: layout, a live publisher/subscriber pair read back through the reader API,
// the file's lifetime, dead and foreign files, fork safety.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "core/process_identity.hpp"
#include "tickrail/tools/stats_reader.hpp"
#include "ops_test_util.hpp"
#include "tickrail/error.hpp"
#include "tickrail/failover.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

// Every test gets its own stat directory (and shm directory for channels), set before any
// endpoint exists so that the process's file lands there.
struct Dirs {
  TempDir stat{"stat"};
  TempDir shm{"shm"};
  Dirs() {
    ::setenv("TICKRAIL_STAT_DIR", stat.path().c_str(), 1);
    ::unsetenv("TICKRAIL_STATS");
  }
};

PublisherConfig pub_config(const Dirs& d, const std::string& channel) {
  PublisherConfig c;
  c.channel = channel;
  c.shm_dir = d.shm.path();
  c.ring_capacity = 64;
  c.max_subscribers = 4;
  c.conductor_period = 1ms;
  return c;
}

SubscriberConfig sub_config(const Dirs& d, const std::string& channel) {
  SubscriberConfig c;
  c.channel = channel;
  c.shm_dir = d.shm.path();
  return c;
}

const stats::ProcessSnapshot* find_pid(const std::vector<stats::ProcessSnapshot>& ps, int pid) {
  for (const auto& p : ps) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}

const stats::BlockSnapshot* find_kind(const stats::ProcessSnapshot& p, stats::BlockKind k) {
  for (const auto& b : p.blocks) {
    if (b.kind == k) return &b;
  }
  return nullptr;
}

std::vector<stats::ProcessSnapshot> scan_dir(const Dirs& d, bool remove = true) {
  stats::ScanOptions o;
  o.dir = d.stat.path();
  o.remove_dead = remove;
  return stats::scan(o);
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

// A file with the given header, as a process of another time or program could have left it.
void write_fake_file(const std::string& path, std::uint64_t magic, std::uint32_t version, int pid,
                     std::uint64_t start_time, std::size_t size = stats::kFileSize) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
  if (size >= sizeof(stats::FileHeader)) {
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(m != MAP_FAILED);
    auto* h = static_cast<stats::FileHeader*>(m);
    h->version = version;
    h->header_size = sizeof(stats::FileHeader);
    h->block_size = sizeof(stats::Block);
    h->block_count = stats::kMaxBlocks;
    h->row_count = stats::kMaxRows;
    h->pid = pid;
    h->start_time = start_time;
    std::strcpy(h->program, "fake");
    h->magic.store(magic, std::memory_order_release);
    ::munmap(m, size);
  }
  ::close(fd);
}

FailoverConfig failover_config(const Dirs& d, const std::string& a, const std::string& b) {
  FailoverConfig c;
  for (int i = 0; i < 2; ++i) {
    c.line[i] = sub_config(d, i == 0 ? a : b);
    c.line[i].attach_timeout = 10s;
    c.line[i].publisher_timeout = 200ms;
  }
  c.reattach_every = 10ms;
  return c;
}

// This process's failover block, as tickrail-stat reads it.
std::optional<stats::BlockSnapshot> failover_block(const Dirs& d) {
  const auto ps = scan_dir(d);
  const auto* me = find_pid(ps, ::getpid());
  if (me == nullptr) return std::nullopt;
  const auto* b = find_kind(*me, stats::BlockKind::failover);
  return b != nullptr ? std::optional<stats::BlockSnapshot>(*b) : std::nullopt;
}

// The block says what counters() says (a line's time down aside while it is down: it goes on).
void check_matches(const stats::BlockSnapshot& b, const FailoverCounters& c) {
  CHECK(b.get(stats::FoCounter::delivered) == c.delivered);
  CHECK(b.get(stats::FoCounter::gaps) == c.gaps);
  CHECK(b.get(stats::FoCounter::skipped) == c.skipped);
  for (int i = 0; i < 2; ++i) {
    INFO("line " << (i == 0 ? 'A' : 'B'));
    const auto& l = b.lines[static_cast<std::size_t>(i)];
    CHECK(l.first == c.line[i].first);
    CHECK(l.duplicates == c.line[i].duplicates);
    CHECK(l.downs == c.line[i].downs);
    CHECK(l.up == c.line[i].up);
    CHECK((l.down_since_ns == 0) == l.up);
    if (l.up) CHECK(l.down_ns == c.line[i].down_ns);
  }
}

void publish_n(Publisher& pub, int n) {
  for (int i = 0; i < n; ++i) REQUIRE(pub.publish(Tick{}).ok());
}

}  // namespace

TEST_CASE("counterFileLayoutIsFixed") {
  // The layout is the contract with readers of other builds: pin it.
  STATIC_REQUIRE(sizeof(stats::FileHeader) == 128);
  STATIC_REQUIRE(sizeof(stats::Row) == 128);
  STATIC_REQUIRE(stats::kVersion == 2);
  STATIC_REQUIRE(offsetof(stats::Block, transport_b) == 128);
  STATIC_REQUIRE(offsetof(stats::Block, counters) == 256);
  STATIC_REQUIRE(offsetof(stats::Block, rows_seq) == 384);
  STATIC_REQUIRE(offsetof(stats::Block, rows) == 512);
  STATIC_REQUIRE(sizeof(stats::Block) == 512 + 128 * stats::kMaxRows);
  STATIC_REQUIRE(stats::fo_word(stats::FoCounter::delivered) == 0);
  STATIC_REQUIRE(stats::fo_word(0, stats::FoLineCounter::first) == 3);
  STATIC_REQUIRE(stats::fo_word(1, stats::FoLineCounter::down_since_ns) == 14);
  STATIC_REQUIRE(offsetof(stats::FileHeader, start_time) == 32);
  STATIC_REQUIRE(offsetof(stats::FileHeader, program) == 56);
  STATIC_REQUIRE(alignof(stats::Block) == 128);
  STATIC_REQUIRE(stats::kFileSize == 128 + stats::kMaxBlocks * sizeof(stats::Block));
  // Hot counters of a block never share a line pair with its identity or its rows.
  STATIC_REQUIRE(offsetof(stats::Block, counters) + sizeof(stats::Block::counters) <=
                 offsetof(stats::Block, rows_seq));
  CHECK(std::string(stats::counter_name(stats::BlockKind::publisher, 0)) == "published");
  CHECK(std::string(stats::counter_name(stats::BlockKind::subscriber,
                                        static_cast<std::uint32_t>(
                                            stats::SubCounter::max_poll_gap_cycles))) ==
        "max_poll_gap_cycles");
  CHECK(stats::counter_name(stats::BlockKind::publisher, stats::kCounters - 1) == nullptr);
}

TEST_CASE("publisherAndSubscriberCountersAreReadBackThroughTheReader") {
  Dirs d;
  const std::string ch = "statpair" + std::to_string(::getpid());
  Publisher pub(pub_config(d, ch));
  Subscriber sub(sub_config(d, ch));
  REQUIRE(pub.stats_enabled());
  REQUIRE(sub.stats_enabled());
  REQUIRE(stats::current_stat_path() == stats::stat_path(d.stat.path(), ::getpid()));

  REQUIRE(eventually([&] {
    pub.service();
    return pub.subscriber_count() == 1;
  }));
  REQUIRE(sub.wait_active(5s));
  const std::uint64_t first = pub.next_sequence();
  std::uint64_t got = 0;
  for (int i = 0; i < 100; ++i) {
    Tick t{};
    REQUIRE(pub.publish(t).ok());
    got += sub.poll([](const Tick&) {});
  }
  while (sub.poll([](const Tick&) {}) != 0) {
  }
  REQUIRE(sub.counters().received == 100);

  const auto ps = scan_dir(d);
  const auto* me = find_pid(ps, ::getpid());
  REQUIRE(me != nullptr);
  CHECK(me->status == stats::ProcessStatus::alive);
  CHECK(me->program == std::string(program_invocation_short_name).substr(0, 63));
  CHECK_FALSE(me->removed);
  REQUIRE(me->blocks.size() == 2);
  const auto* p = find_kind(*me, stats::BlockKind::publisher);
  const auto* s = find_kind(*me, stats::BlockKind::subscriber);
  REQUIRE(p != nullptr);
  REQUIRE(s != nullptr);
  CHECK(p->label == ch);
  CHECK(p->transport == "shm");
  CHECK(p->state == stats::EndpointState::open);
  CHECK(p->get(stats::PubCounter::published) == pub.counters().published);
  CHECK(p->get(stats::PubCounter::published) >= 100);
  CHECK(p->get(stats::PubCounter::back_pressured) == pub.counters().back_pressured);
  CHECK(s->label == ch);
  CHECK(s->state == stats::EndpointState::active);
  CHECK(s->get(stats::SubCounter::received) == 100);
  CHECK(s->get(stats::SubCounter::lost) == 0);
  CHECK(s->get(stats::SubCounter::position) == first + 100);
  // Many polls happened: the longest interval between two of them is known and non-zero.
  CHECK(s->get(stats::SubCounter::max_poll_gap_cycles) > 0);

  // The stats thread fills the publisher's per-subscriber row within a few refresh periods.
  REQUIRE(eventually([&] {
    const auto again = scan_dir(d);
    const auto* m = find_pid(again, ::getpid());
    if (m == nullptr) return false;
    const auto* pb = find_kind(*m, stats::BlockKind::publisher);
    return pb != nullptr && pb->rows.size() == 1 && pb->rows[0].position == first + 100;
  }));
  const auto later = scan_dir(d);
  const auto* row = &find_kind(*find_pid(later, ::getpid()), stats::BlockKind::publisher)->rows[0];
  CHECK(row->pid == ::getpid());
  CHECK(row->policy == "block");
  CHECK(row->state == "active");
  CHECK(row->lag == 0);
  CHECK(find_kind(*find_pid(later, ::getpid()), stats::BlockKind::publisher)->rows_consistent);

  // The JSON rendering names every counter.
  const std::string json = stats::format_json(later);
  CHECK(json.find("\"published\"") != std::string::npos);
  CHECK(json.find("\"max_poll_gap_ns\"") != std::string::npos);
  CHECK(json.find("\"" + ch + "\"") != std::string::npos);

  sub.close();
  (void)sub.state();
  const auto closed = scan_dir(d);
  CHECK(find_kind(*find_pid(closed, ::getpid()), stats::BlockKind::subscriber)->state ==
        stats::EndpointState::closed);
}

TEST_CASE("fileIsRemovedWhenTheLastEndpointOfTheProcessGoes") {
  Dirs d;
  const std::string ch = "statlife" + std::to_string(::getpid());
  const std::string path = stats::stat_path(d.stat.path(), ::getpid());
  {
    Publisher pub(pub_config(d, ch));
    REQUIRE(file_exists(path));
    {
      Subscriber sub(sub_config(d, ch));
      REQUIRE(scan_dir(d).at(0).blocks.size() == 2);
    }
    REQUIRE(file_exists(path));
    REQUIRE(scan_dir(d).at(0).blocks.size() == 1);
    // A moved publisher keeps its block; the moved-from one releases nothing.
    Publisher moved(std::move(pub));
    REQUIRE(moved.stats_enabled());
    REQUIRE(scan_dir(d).at(0).blocks.size() == 1);
  }
  CHECK_FALSE(file_exists(path));
  CHECK(stats::current_stat_path().empty());
  CHECK(scan_dir(d).empty());
}

// Its counters exist before it attaches: once attached, the publisher may count it and publish,
// and making the process's counters file then would come between the first tick and the first
// poll. A subscriber waiting for its channel shows as connecting, and leaves nothing if it gives up.
TEST_CASE("aSubscriberWaitingForItsChannelIsShownConnectingAndLeavesNothingWhenItGivesUp") {
  Dirs d;
  const std::string ch = "statwait" + std::to_string(::getpid());
  const std::string path = stats::stat_path(d.stat.path(), ::getpid());
  SubscriberConfig c = sub_config(d, ch);
  c.attach_timeout = 300ms;
  bool seen = false;
  const std::function<void()> between = [&] {
    if (seen || !file_exists(path)) return;
    const auto ps = scan_dir(d, false);
    const auto* me = find_pid(ps, ::getpid());
    const auto* s = me != nullptr ? find_kind(*me, stats::BlockKind::subscriber) : nullptr;
    seen = s != nullptr && s->label == ch && s->state == stats::EndpointState::connecting;
  };
  CHECK_THROWS_AS([&] { Subscriber s(c, between); }(), Error);
  CHECK(seen);
  CHECK_FALSE(file_exists(path));
}

TEST_CASE("countersAreOffByConfigAndByEnvironment") {
  Dirs d;
  const std::string ch = "statoff" + std::to_string(::getpid());
  {
    PublisherConfig pc = pub_config(d, ch);
    pc.stats = false;
    Publisher pub(pc);
    CHECK_FALSE(pub.stats_enabled());
    SubscriberConfig sc = sub_config(d, ch);
    sc.stats = false;
    Subscriber sub(sc);
    CHECK_FALSE(sub.stats_enabled());
    CHECK(scan_dir(d).empty());
  }
  ::setenv("TICKRAIL_STATS", "0", 1);
  {
    Publisher pub(pub_config(d, ch));
    CHECK_FALSE(pub.stats_enabled());
    CHECK(scan_dir(d).empty());
  }
  ::unsetenv("TICKRAIL_STATS");
  CHECK(stats::enabled_by_environment());
}

TEST_CASE("blocksRunOutGracefullyAndAreReused") {
  Dirs d;
  std::vector<stats::Registration> regs;
  for (std::uint32_t i = 0; i < stats::kMaxBlocks; ++i) {
    regs.push_back(stats::register_endpoint(stats::BlockKind::subscriber, TransportKind::shm,
                                            "b" + std::to_string(i)));
    REQUIRE(regs.back());
  }
  stats::Registration extra =
      stats::register_endpoint(stats::BlockKind::subscriber, TransportKind::shm, "extra");
  CHECK_FALSE(extra);  // no counters, no failure
  regs[7].reset();
  stats::Registration again =
      stats::register_endpoint(stats::BlockKind::subscriber, TransportKind::ud, "again");
  REQUIRE(again);
  CHECK(again.block() == regs[8].block() - 1);  // block 7 reused, its counters zeroed
  const auto ps = scan_dir(d);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].blocks.size() == stats::kMaxBlocks);
  bool found = false;
  for (const auto& b : ps[0].blocks) {
    if (b.label == "again") {
      found = true;
      CHECK(b.transport == "ud");
      CHECK(b.index == 7);
    }
  }
  CHECK(found);
}

TEST_CASE("longLabelsAreTruncatedNotOverflowed") {
  Dirs d;
  const std::string longname(200, 'x');
  stats::Registration r =
      stats::register_endpoint(stats::BlockKind::publisher, TransportKind::rc, longname);
  REQUIRE(r);
  const auto ps = scan_dir(d);
  REQUIRE(ps.at(0).blocks.size() == 1);
  CHECK(ps[0].blocks[0].label == std::string(63, 'x'));
  CHECK(ps[0].blocks[0].transport == "rc");
}

TEST_CASE("aDeadProcessFileIsReportedDeadAndRemoved") {
  Dirs d;
  const std::string ch = "statdead" + std::to_string(::getpid());
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child publishes, then dies without any cleanup.
    ::close(pipefd[0]);
    int ok = 0;
    try {
      Publisher pub(pub_config(d, ch));
      Tick t{};
      for (int i = 0; i < 5; ++i) (void)pub.publish(t);
      ok = pub.stats_enabled() ? 1 : 2;
      (void)::write(pipefd[1], &ok, sizeof ok);
      ::pause();  // killed by the parent
    } catch (...) {
      ok = 3;
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
  REQUIRE(file_exists(path));

  // Alive first: its counters are there.
  auto ps = scan_dir(d);
  const auto* c = find_pid(ps, child);
  REQUIRE(c != nullptr);
  CHECK(c->status == stats::ProcessStatus::alive);
  REQUIRE(c->blocks.size() == 1);
  CHECK(c->blocks[0].get(stats::PubCounter::published) == 5);
  CHECK(c->blocks[0].get(stats::PubCounter::unheard) == 5);

  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  guard.pid = -1;
  REQUIRE(file_exists(path));  // nobody cleaned up

  // A read that does not clean up leaves it; the default scan reports it dead and removes it.
  ps = scan_dir(d, false);
  REQUIRE(find_pid(ps, child)->status == stats::ProcessStatus::dead);
  CHECK_FALSE(find_pid(ps, child)->removed);
  REQUIRE(file_exists(path));
  ps = scan_dir(d);
  c = find_pid(ps, child);
  REQUIRE(c != nullptr);
  CHECK(c->status == stats::ProcessStatus::dead);
  CHECK(c->removed);
  CHECK(c->note.find("gone") != std::string::npos);
  REQUIRE(c->blocks.size() == 1);  // its last values are still reported
  CHECK(c->blocks[0].get(stats::PubCounter::published) == 5);
  CHECK_FALSE(file_exists(path));
}

TEST_CASE("aReusedPidIsToldApartByItsStartTime") {
  Dirs d;
  // This process exists; a file claiming its pid with another start time is a dead process's.
  const auto real = detail::process_start_time(::getpid());
  REQUIRE(real.has_value());
  const std::string path = stats::stat_path(d.stat.path(), ::getpid());
  write_fake_file(path, stats::kMagic, stats::kVersion, ::getpid(), *real + 12345);
  auto ps = scan_dir(d);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].status == stats::ProcessStatus::dead);
  CHECK(ps[0].note.find("another process") != std::string::npos);
  CHECK(ps[0].removed);
  CHECK_FALSE(file_exists(path));

  // The same file with the right start time is alive (and kept).
  write_fake_file(path, stats::kMagic, stats::kVersion, ::getpid(), *real);
  ps = scan_dir(d);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].status == stats::ProcessStatus::alive);
  CHECK(ps[0].program == "fake");
  CHECK(ps[0].blocks.empty());
  CHECK(file_exists(path));
}

TEST_CASE("foreignAndIncompatibleFilesAreReportedAndNeverRemovedWhileTheirPidLives") {
  Dirs d;
  const auto real = detail::process_start_time(1);
  REQUIRE(real.has_value());
  const std::string path = stats::stat_path(d.stat.path(), 1);

  write_fake_file(path, 0x1234, stats::kVersion, 1, *real);
  auto ps = scan_dir(d);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].status == stats::ProcessStatus::incompatible);
  CHECK(ps[0].note.find("magic") != std::string::npos);
  CHECK(file_exists(path));

  // Another layout is refused, naming the file and whether its tickrail is older or newer.
  write_fake_file(path, stats::kMagic, stats::kVersion + 1, 1, *real);
  ps = scan_dir(d);
  CHECK(ps.at(0).status == stats::ProcessStatus::incompatible);
  CHECK(ps[0].note.find("version") != std::string::npos);
  if (::geteuid() == 0) {  // else the note is that the file is not pid 1's (root's)
    CHECK(ps[0].note.find(path) != std::string::npos);
    CHECK(ps[0].note.find("newer") != std::string::npos);
  }
  CHECK(file_exists(path));
  write_fake_file(path, stats::kMagic, stats::kVersion - 1, 1, *real);
  ps = scan_dir(d);
  CHECK(ps.at(0).status == stats::ProcessStatus::incompatible);
  if (::geteuid() == 0) {
    CHECK(ps[0].note.find(path) != std::string::npos);
    CHECK(ps[0].note.find("older") != std::string::npos);
  }
  CHECK(file_exists(path));

  write_fake_file(path, stats::kMagic, stats::kVersion, 1, *real, sizeof(stats::FileHeader) + 64);
  ps = scan_dir(d);
  CHECK(ps.at(0).status == stats::ProcessStatus::incompatible);
  CHECK(file_exists(path));

  write_fake_file(path, 0, stats::kVersion, 1, 0, 16);
  ps = scan_dir(d);
  CHECK(ps.at(0).status == stats::ProcessStatus::incompatible);
  CHECK(ps[0].note.find("truncated") != std::string::npos);

  write_fake_file(path, 0, 0, 0, 0, stats::kFileSize);  // sized, no magic yet: being created
  ps = scan_dir(d);
  CHECK(ps.at(0).status == stats::ProcessStatus::starting);
  CHECK(file_exists(path));

  // Names that are not ours are ignored.
  d.stat.write("tickrail-stat.abc", "x");
  d.stat.write("other-file", "x");
  CHECK(scan_dir(d).size() == 1);
}

TEST_CASE("aForkedChildGetsItsOwnFileAndLeavesTheParentsAlone") {
  Dirs d;
  const std::string ch = "statfork" + std::to_string(::getpid());
  Publisher pub(pub_config(d, ch));
  REQUIRE(pub.stats_enabled());
  stats::Registration extra =
      stats::register_endpoint(stats::BlockKind::subscriber, TransportKind::shm, "extra");
  REQUIRE(extra);
  const std::string parent_path = stats::current_stat_path();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    try {
      stats::Registration r =
          stats::register_endpoint(stats::BlockKind::subscriber, TransportKind::shm, "child");
      const std::string mine = stats::current_stat_path();
      if (!r) code = 10;
      else if (mine != stats::stat_path(d.stat.path(), ::getpid())) code = 11;
      else if (!file_exists(mine)) code = 12;
      r.reset();
      if (file_exists(mine)) code = 13;
      // Releasing a registration inherited from the parent must not touch the parent's file.
      extra.reset();
    } catch (...) {
      code = 20;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(file_exists(parent_path));
  const auto ps = scan_dir(d);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].pid == ::getpid());
  REQUIRE(ps[0].blocks.size() == 2);
  CHECK(ps[0].blocks[0].label == ch);
  CHECK(ps[0].blocks[1].label == "extra");
}

TEST_CASE("everyCounterOfALappedSubscriberReachesTheLiveCounters") {
  Dirs d;
  const std::string ch = "statlap" + std::to_string(::getpid());
  PublisherConfig pc = pub_config(d, ch);
  pc.ring_capacity = 16;
  Publisher pub(pc);
  SubscriberConfig sc = sub_config(d, ch);
  sc.policy = SlowConsumerPolicy::drop;
  Subscriber sub(sc);
  REQUIRE(eventually([&] {
    pub.service();
    return pub.subscriber_count() == 1;
  }));
  REQUIRE(sub.wait_active(5s));
  // Lapped several times over without a poll, then read one tick at a time: each poll resumes
  // after a run of lost ticks (a skip) while the publisher keeps lapping it.
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 40; ++i) REQUIRE(pub.publish(Tick{}).status != PublishStatus::closed);
    (void)sub.poll([](const Tick&) {}, 1);
  }
  while (sub.poll([](const Tick&) {}) != 0) {
  }
  const SubscriberCounters c = sub.counters();
  REQUIRE(c.lost > 0);
  REQUIRE(c.laps > 0);
  REQUIRE(c.skips > 1);

  const auto ps = scan_dir(d);
  const auto* me = find_pid(ps, ::getpid());
  REQUIRE(me != nullptr);
  const auto* s = find_kind(*me, stats::BlockKind::subscriber);
  REQUIRE(s != nullptr);
  CHECK(s->get(stats::SubCounter::received) == c.received);
  CHECK(s->get(stats::SubCounter::lost) == c.lost);
  CHECK(s->get(stats::SubCounter::laps) == c.laps);
  CHECK(s->get(stats::SubCounter::skips) == c.skips);
  CHECK(s->get(stats::SubCounter::position) == sub.next_sequence());
  // And by name, as tickrail-stat shows it.
  const auto j = nlohmann::json::parse(stats::format_json(ps));
  bool found = false;
  for (const auto& e : j.at(0).at("endpoints")) {
    if (e.at("kind") != "subscriber") continue;
    found = true;
    CHECK(e.at("counters").at("skips") == c.skips);
  }
  CHECK(found);
}

TEST_CASE("theCounterTablesNameEveryLiveCounterOnce") {
  using stats::BlockKind;
  for (const BlockKind k : {BlockKind::publisher, BlockKind::subscriber}) {
    std::set<std::string> names;
    for (std::uint32_t i = 0; i < stats::counter_count(k); ++i) {
      const stats::CounterInfo* c = stats::counter_info(k, i);
      REQUIRE(c != nullptr);
      CHECK(std::string(c->name) == stats::counter_name(k, i));
      CHECK(std::string(c->help).size() > 10);
      names.insert(c->name);
    }
    CHECK(names.size() == stats::counter_count(k));
    CHECK(stats::counter_info(k, stats::counter_count(k)) == nullptr);
  }
  // The meaning of an index never changes within a layout version: rows are only appended.
  STATIC_REQUIRE(static_cast<int>(stats::SubCounter::position) == 3);
  STATIC_REQUIRE(static_cast<int>(stats::SubCounter::max_poll_gap_cycles) == 9);
  STATIC_REQUIRE(static_cast<int>(stats::SubCounter::skips) == 10);
  STATIC_REQUIRE(static_cast<int>(stats::PubCounter::completion_errors) == 5);
  CHECK(stats::counter_info(BlockKind::subscriber,
                            static_cast<std::uint32_t>(stats::SubCounter::position))->grows == false);
  CHECK(stats::counter_info(BlockKind::publisher, 0)->grows);
}

TEST_CASE("theLongestIntervalBetweenPollsIsRecorded") {
  Dirs d;
  const std::string ch = "statgap" + std::to_string(::getpid());
  Publisher pub(pub_config(d, ch));
  Subscriber sub(sub_config(d, ch));
  REQUIRE(eventually([&] {
    pub.service();
    return pub.subscriber_count() == 1;
  }));
  REQUIRE(sub.wait_active(5s));
  const auto gap_ns = [&] {
    const auto ps = scan_dir(d);
    const auto* me = find_pid(ps, ::getpid());
    REQUIRE(me != nullptr);
    REQUIRE(me->ns_per_cycle > 0);
    return me->cycles_to_ns(find_kind(*me, stats::BlockKind::subscriber)
                                ->get(stats::SubCounter::max_poll_gap_cycles));
  };
  // Spinning polls, then a pause of at least 30 ms between two empty polls: the pause shows up
  // within kStampEvery polls (the counter may overstate by a few empty polls, never understate).
  for (int i = 0; i < 100; ++i) (void)sub.poll([](const Tick&) {});
  std::this_thread::sleep_for(30ms);
  for (std::uint32_t i = 0; i < stats::PollProbe::kStampEvery; ++i) {
    (void)sub.poll([](const Tick&) {});
  }
  CHECK(gap_ns() >= 30e6);

  // A handler that takes longer than any gap so far: the poll right after the delivering one
  // is stamped, so the maximum reaches it at once.
  REQUIRE(pub.publish(Tick{}).ok());
  const auto want = std::chrono::nanoseconds(static_cast<std::int64_t>(gap_ns())) + 50ms;
  REQUIRE(eventually([&] {
    return sub.poll([&](const Tick&) { std::this_thread::sleep_for(want); }) == 1;
  }));
  (void)sub.poll([](const Tick&) {});
  CHECK(gap_ns() >= static_cast<double>(want.count()));
}

TEST_CASE("aStatFileIsReadableByOwnerAndGroupOnly") {
  Dirs d;
  Publisher pub(pub_config(d, "statmode" + std::to_string(::getpid())));
  struct stat st {};
  REQUIRE(::stat(stats::stat_path(d.stat.path(), ::getpid()).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("aFifoOrSymlinkNamedLikeAStatFileIsReportedWithoutHanging") {
  Dirs d;
  const std::string fifo = stats::stat_path(d.stat.path(), 1);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::string link = stats::stat_path(d.stat.path(), 2);
  REQUIRE(::symlink("/etc/passwd", link.c_str()) == 0);
  const auto ps = scan_dir(d);  // opening the FIFO used to block here for ever
  REQUIRE(ps.size() == 2);
  for (const auto& p : ps) {
    CHECK(p.status == stats::ProcessStatus::incompatible);
    CHECK_FALSE(p.removed);
  }
  CHECK(ps[0].note.find("not a regular file") != std::string::npos);
  CHECK(file_exists(fifo));
  CHECK(::access(link.c_str(), F_OK) == 0);
}

namespace {

// A counters file claiming this process, with block 0 in use by a publisher on channel `label`.
void write_fake_file_with_block(const std::string& path, const std::string& label) {
  const auto real = detail::process_start_time(::getpid());
  REQUIRE(real.has_value());
  write_fake_file(path, stats::kMagic, stats::kVersion, ::getpid(), *real);
  const auto b = std::make_unique<stats::Block>();
  b->identity_seq.store(2);
  b->in_use.store(1);
  b->kind.store(static_cast<std::uint64_t>(stats::BlockKind::publisher));
  b->transport.store(static_cast<std::uint64_t>(TransportKind::shm));
  std::uint64_t words[stats::kNameWords] = {};
  std::memcpy(words, label.data(), std::min(label.size(), sizeof words - 1));
  for (std::size_t i = 0; i < stats::kNameWords; ++i) b->label[i].store(words[i]);
  b->counters[0].store(7);
  const int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, b.get(), sizeof *b, sizeof(stats::FileHeader)) ==
          static_cast<ssize_t>(sizeof *b));
  ::close(fd);
}

}  // namespace

TEST_CASE("aCountersFileTruncatedWhileItIsReadIsReportedIncompleteNotAFault") {
  Dirs d;
  TempDir proc{"proc"};
  const std::string path = stats::stat_path(d.stat.path(), ::getpid());
  write_fake_file_with_block(path, "shrinking");
  REQUIRE(stats::read_stat_file(path).blocks.size() == 1);

  // The reader looks up the process's start time between sizing the file and reading its
  // blocks: a FIFO in a fake /proc holds it there while the file is cut to its header. Reading
  // a mapping of the cut file used to raise SIGBUS.
  const std::string stat_file = proc / ("proc/" + std::to_string(::getpid()) + "/stat");
  proc.mkdir("proc/" + std::to_string(::getpid()));
  REQUIRE(::mkfifo(stat_file.c_str(), 0600) == 0);
  const auto real = detail::process_start_time(::getpid());
  std::thread cutter([&] {
    const int fifo = ::open(stat_file.c_str(), O_WRONLY);  // waits for the reader
    if (fifo < 0) return;
    (void)::truncate(path.c_str(), sizeof(stats::FileHeader));
    std::string line = std::to_string(::getpid()) + " (x) S";
    for (int field = 4; field <= 21; ++field) line += " 0";
    line += " " + std::to_string(real.value_or(0)) + "\n";
    (void)::write(fifo, line.data(), line.size());
    ::close(fifo);
  });
  const stats::ProcessSnapshot p = stats::read_stat_file(path, proc.path());
  cutter.join();
  CHECK(p.status == stats::ProcessStatus::incompatible);
  CHECK(p.note.find("incomplete") != std::string::npos);
  CHECK(p.blocks.empty());
  CHECK(stats::format_text(std::vector{p}).find("incomplete") != std::string::npos);
}

TEST_CASE("aCountersFileCutAndRegrownInALoopNeverFaultsItsReader") {
  Dirs d;
  const std::string path = stats::stat_path(d.stat.path(), ::getpid());
  write_fake_file_with_block(path, "flapping");
  std::atomic<bool> stop{false};
  std::thread cutter([&] {
    while (!stop.load()) {
      write_fake_file_with_block(path, "flapping");
      (void)::truncate(path.c_str(), sizeof(stats::FileHeader) + 100);
    }
  });
  int complete = 0;
  int incomplete = 0;
  for (int i = 0; i < 2000; ++i) {
    auto ps = scan_dir(d, false);
    REQUIRE(ps.size() == 1);
    const auto& p = ps[0];
    if (p.status == stats::ProcessStatus::alive) {
      ++complete;
      CHECK(p.blocks.size() <= 1);
    } else if (p.status != stats::ProcessStatus::starting) {  // cut to 0 and not yet rewritten
      ++incomplete;
      CHECK(p.status == stats::ProcessStatus::incompatible);
      const bool explained = p.note.find("incomplete") != std::string::npos ||
                             p.note.find("truncated") != std::string::npos ||
                             p.note.find("layout") != std::string::npos;
      CHECK(explained);
    }
  }
  stop = true;
  cutter.join();
}

TEST_CASE("aCountersFileOwnedByAnotherUserThanItsProcessIsNotTrusted") {
  if (::geteuid() != 0) {
    WARN("needs root to give a file away; skipped");
    return;
  }
  Dirs d;
  const std::string path = stats::stat_path(d.stat.path(), ::getpid());
  write_fake_file_with_block(path, "spoofed");
  REQUIRE(stats::read_stat_file(path).status == stats::ProcessStatus::alive);
  REQUIRE(::chown(path.c_str(), 54321, 54321) == 0);
  const stats::ProcessSnapshot p = stats::read_stat_file(path);
  CHECK(p.status == stats::ProcessStatus::incompatible);
  CHECK(p.note.find("owned by uid 54321") != std::string::npos);
  CHECK(p.blocks.empty());
  CHECK(p.owner_uid == 54321);
}

TEST_CASE("failoverCountersShowBothLinesAsCountersSaysThem") {
  Dirs d;
  const std::string a = "statfoa" + std::to_string(::getpid());
  const std::string b = "statfob" + std::to_string(::getpid());
  auto pa = std::make_unique<Publisher>(pub_config(d, a));
  auto pb = std::make_unique<Publisher>(pub_config(d, b));
  FailoverSubscriber fs(failover_config(d, a, b));
  REQUIRE(eventually([&] {
    pa->service();
    pb->service();
    return pa->subscriber_count() == 1 && pb->subscriber_count() == 1;
  }));
  std::uint64_t got = 0;
  auto app = [&](const Tick&) { ++got; };
  const auto dups = [&] { return fs.counters().line[0].duplicates + fs.counters().line[1].duplicates; };

  // Sequences 1-10 come first on B, 11-20 first on A: each line brings 10 first, 10 copies late.
  publish_n(*pb, 10);
  REQUIRE(eventually([&] { (void)fs.poll(app); return got == 10; }));
  publish_n(*pa, 20);
  REQUIRE(eventually([&] { (void)fs.poll(app); return got == 20 && dups() == 10; }));
  publish_n(*pb, 10);
  REQUIRE(eventually([&] { (void)fs.poll(app); return dups() == 20; }));
  (void)fs.poll(app);  // the empty poll after copies stores the counts
  auto blk = failover_block(d);
  REQUIRE(blk.has_value());
  CHECK(blk->state == stats::EndpointState::active);
  CHECK(blk->lines[0].label == a);
  CHECK(blk->lines[1].label == b);
  CHECK(blk->lines[0].transport == "shm");
  CHECK(blk->lines[1].transport == "shm");
  CHECK(blk->lines[0].first == 10);
  CHECK(blk->lines[1].first == 10);
  CHECK(blk->lines[1].duplicates == 10);
  check_matches(*blk, fs.counters());

  // Line B's publisher closes: B is down, A goes on alone.
  pb.reset();
  REQUIRE(eventually([&] { (void)fs.poll(app); return !fs.line_up(1); }));
  publish_n(*pa, 10);
  REQUIRE(eventually([&] { (void)fs.poll(app); return got == 30; }));
  (void)fs.poll(app);  // the empty poll after copies stores the counts
  blk = failover_block(d);
  REQUIRE(blk.has_value());
  CHECK(blk->state == stats::EndpointState::active);
  CHECK_FALSE(blk->lines[1].up);
  CHECK(blk->lines[1].downs == 1);
  CHECK(blk->lines[1].down_since_ns >= blk->registered_ns);
  CHECK(blk->lines[0].first == 20);
  check_matches(*blk, fs.counters());

  // B is back: up again, its time down kept.
  pb = std::make_unique<Publisher>(pub_config(d, b));
  REQUIRE(eventually([&] {
    (void)fs.poll(app);
    pb->service();
    return fs.line_up(1) && pb->subscriber_count() == 1;
  }));
  (void)fs.poll(app);  // the empty poll after copies stores the counts
  blk = failover_block(d);
  REQUIRE(blk.has_value());
  CHECK(blk->lines[1].up);
  CHECK(blk->lines[1].down_ns > 0);
  check_matches(*blk, fs.counters());

  // Both down: the failover has no publisher left.
  pb.reset();
  pa.reset();
  REQUIRE(eventually([&] { (void)fs.poll(app); return !fs.line_up(0) && !fs.line_up(1); }));
  (void)fs.poll(app);  // the empty poll after copies stores the counts
  blk = failover_block(d);
  REQUIRE(blk.has_value());
  CHECK(blk->state == stats::EndpointState::publisher_gone);
  CHECK(blk->lines[0].downs == 1);
  check_matches(*blk, fs.counters());
}

TEST_CASE("aFailoverWhoseLinesSayStatsFalseHasNoBlock") {
  Dirs d;
  const std::string a = "statfonoa" + std::to_string(::getpid());
  const std::string b = "statfonob" + std::to_string(::getpid());
  Publisher pa(pub_config(d, a));
  Publisher pb(pub_config(d, b));
  FailoverConfig c = failover_config(d, a, b);
  c.line[0].stats = false;
  c.line[1].stats = false;
  FailoverSubscriber fs(c);
  const auto ps = scan_dir(d);
  const auto* me = find_pid(ps, ::getpid());
  REQUIRE(me != nullptr);
  CHECK(me->blocks.size() == 2);  // the publishers
  CHECK(find_kind(*me, stats::BlockKind::failover) == nullptr);
}
