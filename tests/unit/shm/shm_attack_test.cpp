// A process that shares a host with a channel and means harm: every attack of a hostile
// subscriber or squatter, as the same user (through whatever it can get from the publisher) and
// as another user (shm_peer run as 'nobody'). The publisher and honest subscribers must keep
// running and deliver exactly; the attack gets a clear error or no effect.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "shm_test_util.hpp"
#include "tickrail/error.hpp"
#include "transport/shm/segment.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;
namespace shm = tickrail::shm;

namespace {

constexpr std::uint32_t kNobody = 65534;

PublisherConfig pub_config(const std::string& channel, std::uint32_t subscribers = 4) {
  PublisherConfig c;
  c.channel = channel;
  c.ring_capacity = 64;
  c.max_subscribers = subscribers;
  c.conductor_period = 1ms;
  return c;
}

SubscriberConfig sub_config(const std::string& channel) {
  SubscriberConfig c;
  c.channel = channel;
  c.attach_timeout = 2s;
  return c;
}

// A subscriber that speaks the handshake itself and keeps whatever the publisher hands over.
struct RawClient {
  shm::Fd sock;
  shm::Reply reply{};
  std::vector<shm::Fd> fds;

  explicit RawClient(const std::string& channel, std::uint32_t policy = 0) {
    shm::PeerCred pc;
    const auto me = shm::Allow::resolve({}, {}, static_cast<std::uint32_t>(::geteuid()), "", "");
    sock = shm::connect_channel("/dev/shm", channel, 2s, me, pc);
    shm::Request r{shm::kMagic, shm::kVersion, policy, 1'000'000'000, 0};
    REQUIRE(shm::send_message(sock.get(), &r, sizeof r, nullptr, 0));
    receive();
  }
  void receive() {
    pollfd p{sock.get(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    REQUIRE(shm::receive_message(sock.get(), &reply, sizeof reply, fds, 3) == sizeof reply);
  }
  [[nodiscard]] bool ok() const { return reply.code == 0 && fds.size() == 3; }
  shm::Control* control() {
    void* p = ::mmap(nullptr, shm::control_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fds[2].get(), 0);
    REQUIRE(p != MAP_FAILED);
    return static_cast<shm::Control*>(p);
  }
};

// Publishes `n` ticks to `pub` while `sub` drains; true when `sub` got all of them in order.
bool deliver_exactly(Publisher& pub, Subscriber& sub, std::uint64_t n) {
  std::uint64_t sent = 0;
  std::uint64_t got = 0;
  std::uint64_t expect = pub.next_sequence();
  bool in_order = true;
  const auto drain = [&] {
    got += sub.poll([&](const Tick& t) {
      in_order = in_order && t.seq == expect && payload_ok(t);
      expect = t.seq + 1;
    });
  };
  // Bounded by time, not by a count of sleeps: a busy 2-core host stretches everything.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (got < n && std::chrono::steady_clock::now() < deadline) {
    if (sent < n) sent += pub.publish(payload(sent)).published;
    drain();
  }
  const bool done = got == n;
  return done && in_order;
}

// Runs shm_peer with `args` (as `uid` when not -1) and returns its exit status and output.
struct PeerResult {
  int status = -1;
  std::string out;
};
PeerResult run_peer(std::vector<std::string> args, int uid = -1) {
  const char* exe = std::getenv("TICKRAIL_SHM_PEER");
  REQUIRE(exe != nullptr);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    if (uid >= 0) ::setenv("TICKRAIL_PEER_UID", std::to_string(uid).c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(exe)};
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(exe, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  PeerResult r;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

bool root() { return ::geteuid() == 0; }

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

}  // namespace

TEST_CASE("aSubscriberCanWriteNeitherItsRingNorTheStatusLine") {
  const auto ch = unique_channel("ro");
  Publisher pub(pub_config(ch));
  RawClient c(ch);
  REQUIRE(c.ok());
  for (int i : {0, 1}) {
    const int fd = c.fds[i].get();
    const std::size_t n = i == 0 ? shm::ring_bytes(64) : shm::status_bytes();
    INFO("descriptor " << i);
    CHECK(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    void* ro = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(ro != MAP_FAILED);
    CHECK(::mprotect(ro, n, PROT_READ | PROT_WRITE) != 0);
    ::munmap(ro, n);
    // Reopening the same memory read-write through /proc does not help: it is sealed.
    const shm::Fd rw(::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR));
    if (rw.get() >= 0) {
      CHECK(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, rw.get(), 0) == MAP_FAILED);
      const char b = 1;
      CHECK(::pwrite(rw.get(), &b, 1, 0) != 1);
      CHECK(::ftruncate(rw.get(), 0) != 0);
      CHECK(::fallocate(rw.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) != 0);
    }
  }
  // Its own control line is writable, but cannot be shrunk under the publisher.
  CHECK(::ftruncate(c.fds[2].get(), 0) != 0);
  (void)pub.publish(payload(1));
}

TEST_CASE("aLyingSubscriberHurtsOnlyItself") {
  const auto ch = unique_channel("liar");
  Publisher pub(pub_config(ch));
  Subscriber honest(sub_config(ch));
  RawClient liar(ch);
  REQUIRE(liar.ok());
  REQUIRE(wait_for_subscribers(pub, 2));
  shm::Control* ctl = liar.control();
  // Every word it can write, rewritten all the time: credits far ahead, states, counters.
  std::atomic<bool> stop{false};
  std::thread scribbler([&] {
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      ctl->credit.store(i % 2 ? ~0ULL : (1ULL << 40) + i, std::memory_order_relaxed);
      ctl->state.store(static_cast<std::uint32_t>(i), std::memory_order_relaxed);
      ctl->start_seq.store(i * 977, std::memory_order_relaxed);
      ctl->back_pressure.store(~i, std::memory_order_relaxed);
    }
  });
  const bool exact = deliver_exactly(pub, honest, 20000);
  stop = true;
  scribbler.join();
  REQUIRE(exact);
  REQUIRE(pub.subscriber_count() == 2);
  for (const SubscriberStatus& s : pub.subscribers()) REQUIRE(s.position <= pub.next_sequence());
  ::munmap(ctl, shm::control_bytes());
}

TEST_CASE("eachSubscriberGetsControlOfItsOwnOnly") {
  const auto ch = unique_channel("own");
  Publisher pub(pub_config(ch));
  RawClient a(ch);
  RawClient b(ch);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a.reply.index != b.reply.index);
  struct stat sa {}, sb {};
  REQUIRE(::fstat(a.fds[2].get(), &sa) == 0);
  REQUIRE(::fstat(b.fds[2].get(), &sb) == 0);
  REQUIRE(sa.st_ino != sb.st_ino);  // two memories: nothing of b's is in a's reach
  REQUIRE(::fstat(a.fds[0].get(), &sa) == 0);
  REQUIRE(::fstat(b.fds[0].get(), &sb) == 0);
  REQUIRE(sa.st_ino != sb.st_ino);
}

TEST_CASE("forgedRequestsCannotOverflowThePublisher") {
  const auto ch = unique_channel("flood");
  Publisher pub(pub_config(ch, 64));
  Subscriber honest(sub_config(ch));
  REQUIRE(wait_for_subscribers(pub, 1));
  std::vector<std::unique_ptr<RawClient>> clients;
  std::uint32_t seated = 0;
  std::uint32_t refused = 0;
  for (int i = 0; i < 100; ++i) {
    clients.push_back(std::make_unique<RawClient>(ch, static_cast<std::uint32_t>(i % 3)));
    if (clients.back()->ok()) {
      ++seated;
    } else {
      REQUIRE(clients.back()->reply.code == static_cast<std::uint32_t>(shm::ReplyCode::no_capacity));
      ++refused;
    }
  }
  REQUIRE(seated == 63);
  REQUIRE(refused == 37);
  // Malformed requests: wrong size, unknown policy, descriptors pushed at the publisher.
  shm::PeerCred pc;
  const auto me = shm::Allow::resolve({}, {}, static_cast<std::uint32_t>(::geteuid()), "", "");
  for (int kind = 0; kind < 3; ++kind) {
    shm::Fd s = shm::connect_channel("/dev/shm", ch, 1s, me, pc);
    shm::Request r{shm::kMagic, shm::kVersion, kind == 1 ? 99U : 0U, 0, 0};
    const int stuffed[2] = {0, 1};
    REQUIRE(shm::send_message(s.get(), &r, kind == 0 ? 5 : sizeof r, kind == 2 ? stuffed : nullptr,
                              kind == 2 ? 2 : 0));
    pollfd p{s.get(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
  }
  clients.clear();  // all gone without a goodbye: every seat comes back
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(eventually([&] {
    pub.service();
    return pub.subscribers().size() == 1;
  }));
  REQUIRE(deliver_exactly(pub, honest, 5000));
}

TEST_CASE("aSubscriberThatDiesBeforeItIsServedGivesItsSeatBack") {
  const auto ch = unique_channel("claim");
  Publisher pub(pub_config(ch, 1));
  {
    // Seated, never activated (nobody published), then gone.
    RawClient c(ch);
    REQUIRE(c.ok());
  }
  // A connection that never says who it is holds no seat either.
  shm::PeerCred pc;
  const auto me = shm::Allow::resolve({}, {}, static_cast<std::uint32_t>(::geteuid()), "", "");
  shm::Fd silent = shm::connect_channel("/dev/shm", ch, 1s, me, pc);
  auto cfg = sub_config(ch);
  std::unique_ptr<Subscriber> sub;
  REQUIRE(eventually([&] {
    pub.service();
    try {
      sub = std::make_unique<Subscriber>(cfg);
      return true;
    } catch (const Error& e) {
      REQUIRE(e.code() == Errc::no_capacity);
      return false;
    }
  }));
  REQUIRE(wait_for_subscribers(pub, 1));
  REQUIRE(pub.counters().reclaimed == 1);
  REQUIRE(deliver_exactly(pub, *sub, 1000));
}

TEST_CASE("publishersRacingForOneChannelEndWithOneWinner") {
  for (int round = 0; round < 100; ++round) {
    const auto ch = unique_channel("race");
    constexpr int kRacers = 4;
    std::barrier start(kRacers);
    std::atomic<int> won{0};
    std::atomic<int> refused{0};
    std::vector<std::unique_ptr<Publisher>> winners(kRacers);
    std::vector<std::thread> t;
    for (int i = 0; i < kRacers; ++i) {
      t.emplace_back([&, i] {
        start.arrive_and_wait();
        try {
          winners[i] = std::make_unique<Publisher>(pub_config(ch));
          ++won;
        } catch (const Error& e) {
          if (e.code() == Errc::rejected && std::string(e.what()).find("already published") != std::string::npos) {
            ++refused;
          }
        }
      });
    }
    for (auto& th : t) th.join();
    INFO("round " << round);
    REQUIRE(won == 1);
    REQUIRE(refused == kRacers - 1);
    // The winner is the channel: a subscriber reaches it.
    Subscriber s(sub_config(ch));
  }
}

TEST_CASE("somethingElseAtTheChannelPathIsRefusedWithoutHanging") {
  const auto ch = unique_channel("squat");
  const std::string path = "/dev/shm/tickrail." + ch;
  struct Case {
    const char* kind;
    std::function<void()> make;
  };
  const std::vector<Case> cases{
      {"FIFO", [&] { REQUIRE(::mkfifo(path.c_str(), 0666) == 0); }},
      {"symbolic link", [&] { REQUIRE(::symlink("/etc/passwd", path.c_str()) == 0); }},
      {"regular file", [&] { REQUIRE(::close(::open(path.c_str(), O_CREAT | O_WRONLY, 0666)) == 0); }},
  };
  for (const Case& c : cases) {
    INFO(c.kind);
    c.make();
    try {
      Publisher p(pub_config(ch));
      FAIL("published over a " << c.kind);
    } catch (const Error& e) {
      REQUIRE(e.code() == Errc::bad_magic);
      REQUIRE_THAT(e.what(), Catch::Contains(c.kind) && Catch::Contains(path));
    }
    try {
      Subscriber s(sub_config(ch));
      FAIL("attached to a " << c.kind);
    } catch (const Error& e) {
      REQUIRE(e.code() == Errc::bad_magic);
      REQUIRE_THAT(e.what(), Catch::Contains(c.kind));
    }
    REQUIRE(::unlink(path.c_str()) == 0);
  }
}

TEST_CASE("aChannelOfAnotherUserIsNotTrusted") {
  if (!root()) {
    WARN("skipped: creating a process of another uid needs root");
    return;
  }
  const auto ch = unique_channel("foreign");
  // 'nobody' publishes (or squats) the channel name; we trust our own uid and root only.
  const char* exe = std::getenv("TICKRAIL_SHM_PEER");
  REQUIRE(exe != nullptr);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::setenv("TICKRAIL_PEER_UID", std::to_string(kNobody).c_str(), 1);
    ::execl(exe, exe, "pub", ch.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[6] = {};
  REQUIRE(::read(fds[0], buf, 6) == 6);
  REQUIRE(std::string(buf, 5) == "ready");
  try {
    Subscriber s(sub_config(ch));
    FAIL("trusted a channel of uid 65534");
  } catch (const Error& e) {
    REQUIRE(e.code() == Errc::rejected);
    REQUIRE_THAT(e.what(), Catch::Contains("65534") && Catch::Contains("not an allowed publisher"));
  }
  // Unless we say we trust that user.
  auto cfg = sub_config(ch);
  cfg.publisher_users = {std::to_string(kNobody)};
  Subscriber s(cfg);
  REQUIRE(s.wait_active(5s));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(fds[0]);
  ::unlink(shm::channel_path("/dev/shm", ch).c_str());  // a killed publisher leaves its name
  remove_counters_file(pid);                           // and its counters
}

TEST_CASE("anotherUserMaySubscribeOnlyWhenAllowed") {
  if (!root()) {
    WARN("skipped: creating a process of another uid needs root");
    return;
  }
  const auto ch = unique_channel("allow");
  {
    Publisher pub(pub_config(ch));
    const PeerResult r = run_peer({"count", ch, "10"}, kNobody);
    REQUIRE(r.status == 1);
    REQUIRE_THAT(r.out, Catch::Contains("65534") && Catch::Contains("may not subscribe") &&
                            Catch::Contains("allow_users"));
    REQUIRE(pub.subscriber_count() == 0);
  }
  auto cfg = pub_config(ch);
  cfg.allow_users = {"nobody"};
  cfg.ring_capacity = 8192;  // policy drop (nobody may not block): the whole run fits
  Publisher pub(cfg);
  std::thread feeder([&] {
    if (!wait_for_subscribers(pub, 1)) return;  // the peer's output says why
    for (std::uint64_t sent = 0; sent < 5000;) {
      sent += pub.publish(payload(sent)).published;
    }
  });
  const PeerResult r = run_peer({"count", ch, "5000", "drop"}, kNobody);
  feeder.join();
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.out, Catch::Contains("got 5000 in order"));
}

// A subscriber that may read the channel must not be able to stop it: with policy block (or
// disconnect, up to an hour) it would hold the publisher and every other subscriber back.
TEST_CASE("anAllowedUserMayHoldThePublisherBackOnlyWhenTrustedTo") {
  if (!root()) {
    WARN("skipped: creating a process of another uid needs root");
    return;
  }
  const auto ch = unique_channel("waitfor");
  auto cfg = pub_config(ch);
  cfg.allow_users = {"nobody"};
  {
    Publisher pub(cfg);
    for (const char* policy : {"block", "disconnect"}) {
      const PeerResult r = run_peer({"sub", ch, policy}, kNobody);
      INFO(r.out);
      REQUIRE(r.status == 1);
      REQUIRE_THAT(r.out, Catch::Contains("65534") && Catch::Contains("may not hold channel") &&
                              Catch::Contains(std::string("policy ") + policy) &&
                              Catch::Contains("wait_for_users") && Catch::Contains("drop or conflate"));
      REQUIRE(pub.subscriber_count() == 0);
    }
  }
  cfg.wait_for_groups = {"nogroup"};  // nobody's own group
  Publisher pub(cfg);
  std::thread feeder([&] {
    if (!wait_for_subscribers(pub, 1)) return;  // the peer's output says why
    // 4x the ring: a drop subscriber would lose some, a blocking one holds the publisher back.
    const std::uint64_t n = 4 * cfg.ring_capacity;
    for (std::uint64_t sent = 0; sent < n;) sent += pub.publish(payload(sent)).published;
  });
  const PeerResult r = run_peer({"count", ch, std::to_string(4 * cfg.ring_capacity), "block"}, kNobody);
  feeder.join();
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.out, Catch::Contains("got " + std::to_string(4 * cfg.ring_capacity) + " in order"));
}

TEST_CASE("aTrustedGroupThatDoesNotExistIsAnErrorAtStart") {
  auto cfg = pub_config(unique_channel("waitforbad"));
  cfg.wait_for_groups = {"no-such-group-here"};
  REQUIRE_THROWS_WITH(Publisher(cfg), Catch::Contains("publisher.wait_for_groups") &&
                                          Catch::Contains("no-such-group-here"));
}

TEST_CASE("aFailedStartLeavesNothingBehind") {
  if (!root()) {
    WARN("skipped: RLIMIT_MEMLOCK binds only a process of another uid");
    return;
  }
  if (kSanitized) {
    WARN("skipped: the sanitizers' runtime turns mlock into a no-op that succeeds");
    return;
  }
  const std::string dir = "/dev/shm/tickrail-test-" + std::to_string(::getpid());
  std::filesystem::create_directory(dir);
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  const PeerResult r = run_peer({"pub-locked", "locked", dir}, kNobody);
  const bool empty = std::filesystem::is_empty(dir);
  std::filesystem::remove_all(dir);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.out, Catch::Contains("lock") && Catch::Contains("lock_memory"));
  REQUIRE(empty);
}

TEST_CASE("memoryThatCannotBeReservedIsAnErrorAtStartWithTheSizes") {
  const std::string dir = "/dev/shm";
  const auto ch = unique_channel("big");
  const PeerResult r = run_peer({"pub-big", ch, dir});
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.out, Catch::Contains("reserve") && Catch::Contains("4194304 bytes"));
  REQUIRE(!std::filesystem::exists(dir + "/tickrail." + ch));
}

TEST_CASE("aSmallTmpfsAsShmDirNoLongerBoundsTheRings") {
  if (!root()) {
    WARN("skipped: mounting a 64 MiB tmpfs needs root");
    return;
  }
  const std::string dir = "/tmp/tickrail-tmpfs-" + std::to_string(::getpid());
  std::filesystem::create_directory(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64m") != 0) {
    std::filesystem::remove(dir);
    WARN("skipped: cannot mount a tmpfs here");
    return;
  }
  {
    // Docker's default /dev/shm: rings of 2 x 32 MiB used to die of SIGBUS mid-stream there.
    auto pc = pub_config("small-tmpfs", 2);
    pc.shm_dir = dir;
    pc.ring_capacity = 1 << 19;
    Publisher pub(pc);
    auto sc = sub_config("small-tmpfs");
    sc.shm_dir = dir;
    Subscriber a(sc);
    Subscriber b(sc);
    REQUIRE(wait_for_subscribers(pub, 2));
    REQUIRE(deliver_exactly(pub, a, 20000));
    REQUIRE(b.poll([](const Tick&) {}, 1 << 20) == 20000);
  }
  REQUIRE(::umount(dir.c_str()) == 0);
  std::filesystem::remove(dir);
}

TEST_CASE("aFloodedConnectionQueueIsWaitedOnAndNamedNotTakenForAPublisher") {
  // A process filling the channel's queue of connections (any local user can connect): a
  // subscriber waits for room until its deadline, and then says so; it never reads the
  // credentials of a socket that is not connected (pid 0, uid -1) as the publisher's.
  const auto ch = unique_channel("flood");
  const shm::Listener l = shm::listen_channel("/dev/shm", ch);
  const sockaddr_un a = [&] {
    sockaddr_un s{};
    s.sun_family = AF_UNIX;
    std::strncpy(s.sun_path, l.path.c_str(), sizeof s.sun_path - 1);
    return s;
  }();
  std::vector<shm::Fd> flood;
  for (int i = 0; i < 1000; ++i) {
    shm::Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    REQUIRE(s.get() >= 0);
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      REQUIRE(errno == EAGAIN);
      break;
    }
    flood.push_back(std::move(s));
  }
  shm::PeerCred pc;
  const auto me = shm::Allow::resolve({}, {}, static_cast<std::uint32_t>(::geteuid()), "", "");
  try {
    (void)shm::connect_channel("/dev/shm", ch, 200ms, me, pc);
    FAIL("attached through a full queue");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::timed_out);
    CHECK_THAT(e.what(), Catch::Contains("queue of connections stayed full"));
  }
  // Room again: the next attach goes through.
  while (true) {
    shm::Fd taken(::accept4(l.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (taken.get() < 0) break;
  }
  shm::Fd s = shm::connect_channel("/dev/shm", ch, 1s, me, pc);
  CHECK(s.get() >= 0);
  CHECK(pc.uid == ::geteuid());
  shm::unlink_channel(l);
}
