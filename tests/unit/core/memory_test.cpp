#include <catch2/catch.hpp>

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/memory.hpp"

using namespace tickrail;

namespace {

// Number of resident pages of [p, p + len).
std::size_t resident_pages(void* p, std::size_t len) {
  const std::size_t page = page_size();
  std::vector<unsigned char> vec((len + page - 1) / page);
  REQUIRE(mincore(p, len, vec.data()) == 0);
  std::size_t n = 0;
  for (const unsigned char v : vec) n += v & 1U;
  return n;
}

}  // namespace

TEST_CASE("memlockLimitIsTheSoftRlimit") {
  rlimit rl{};
  REQUIRE(getrlimit(RLIMIT_MEMLOCK, &rl) == 0);
  const std::uint64_t expect = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
  REQUIRE(memlock_limit() == expect);
}

TEST_CASE("memlockFailureMessageNamesTheLimitAndTheFixes") {
  const std::string m = memlock_failure_message(ENOMEM);
  REQUIRE(m.find("mlockall") != std::string::npos);
  REQUIRE(m.find(std::strerror(ENOMEM)) != std::string::npos);
  REQUIRE(m.find("RLIMIT_MEMLOCK is ") != std::string::npos);
  REQUIRE(m.find("ulimit -l unlimited") != std::string::npos);
  REQUIRE(m.find("CAP_IPC_LOCK") != std::string::npos);
  REQUIRE(m.find("limits.conf") != std::string::npos);
}

// In a child without CAP_IPC_LOCK and with a 64 KiB limit, mlockall must fail and say why.
TEST_CASE("lockAllMemoryFailsCleanlyAgainstASmallLimit") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kAsan = true;
#elif defined(__has_feature)
  constexpr bool kAsan = __has_feature(address_sanitizer);
#else
  constexpr bool kAsan = false;
#endif
  if (kAsan) {
    WARN("ASan intercepts mlockall() as a no-op that succeeds: not testable in this build");
    return;
  }
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &hdr, data) != 0) _exit(10);
    data[0].effective &= ~(1U << CAP_IPC_LOCK);
    if (syscall(SYS_capset, &hdr, data) != 0) _exit(11);
    rlimit rl{};
    getrlimit(RLIMIT_MEMLOCK, &rl);
    rl.rlim_cur = 64 * 1024;
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) _exit(12);
    const LockResult r = lock_all_memory();
    const std::string msg = r.ok ? std::string("LOCKED") : r.message;
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(r.ok ? 13 : 0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n = 0;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("child message: " << msg);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(msg.find("RLIMIT_MEMLOCK is 64 KiB") != std::string::npos);
  REQUIRE(msg.find("ulimit -l unlimited") != std::string::npos);
}

TEST_CASE("lockAllMemoryReportsItsOutcome") {
  const LockResult r = lock_all_memory();
  if (r.ok) {
    REQUIRE(r.message.empty());
    munlockall();
  } else {
    REQUIRE(r.message.find("RLIMIT_MEMLOCK") != std::string::npos);
  }
}

TEST_CASE("prefaultMakesEveryPageResidentWithoutChangingContents") {
  const std::size_t len = 64 * page_size();
  MappedRegion region(len);
  REQUIRE(region.size() == len);
  REQUIRE(region.page_kind() == PageKind::normal);
  auto* bytes = static_cast<unsigned char*>(region.data());
  bytes[0] = 0xA5;
  bytes[5 * page_size() + 7] = 0x5A;
  REQUIRE(resident_pages(region.data(), len) == 2);
  region.prefault();
  REQUIRE(resident_pages(region.data(), len) == 64);
  REQUIRE(bytes[0] == 0xA5);
  REQUIRE(bytes[5 * page_size() + 7] == 0x5A);
  REQUIRE(bytes[63 * page_size()] == 0);

  // An unaligned sub-range faults exactly the pages it touches.
  MappedRegion other(16 * page_size());
  prefault(static_cast<unsigned char*>(other.data()) + page_size() + 100, 2 * page_size());
  REQUIRE(resident_pages(other.data(), other.size()) == 3);
}

TEST_CASE("mappedRegionWithHugePagesReportsWhatItGot") {
  MappedRegion r(3 * 1024 * 1024, true);
  INFO(to_string(r.page_kind()) << ": " << r.fallback_reason());
  REQUIRE(r);
  REQUIRE(r.size() >= 3u * 1024 * 1024);
  if (r.page_kind() == PageKind::huge_tlb) {
    REQUIRE(r.size() % r.page_size() == 0);
    REQUIRE(r.fallback_reason().empty());
  } else {
    REQUIRE(r.fallback_reason().find("MAP_HUGETLB") != std::string::npos);
    REQUIRE(reinterpret_cast<std::uintptr_t>(r.data()) % (2u * 1024 * 1024) == 0);
    REQUIRE(r.size() % (2u * 1024 * 1024) == 0);
  }
  r.prefault();
  std::memset(r.data(), 0x11, r.size());
  REQUIRE(static_cast<unsigned char*>(r.data())[r.size() - 1] == 0x11);
}

TEST_CASE("mappedRegionIsMoveOnlyAndUnmapsOnDestruction") {
  void* addr = nullptr;
  std::size_t len = 0;
  {
    MappedRegion a(10'000);
    REQUIRE(a.size() % page_size() == 0);
    addr = a.data();
    len = a.size();
    MappedRegion b(std::move(a));
    REQUIRE_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    REQUIRE(b.data() == addr);
    MappedRegion c;
    c = std::move(b);
    REQUIRE(c.data() == addr);
    REQUIRE(resident_pages(addr, len) == 0);
  }
  std::vector<unsigned char> vec(len / page_size());
  REQUIRE(mincore(addr, len, vec.data()) == -1);
  REQUIRE(errno == ENOMEM);  // no longer mapped
  REQUIRE_THROWS_AS(MappedRegion(0), Error);
}
