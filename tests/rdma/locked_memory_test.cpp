// ibv_reg_mr beyond RLIMIT_MEMLOCK, on a real device: the error is Errc::locked_memory and names
// the size, the limit and the fixes.
#include <catch2/catch.hpp>

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "transport/rdma/verbs.hpp"

using namespace tickrail;
using namespace tickrail::rdma;
using Catch::Matchers::Contains;

namespace {

// Root (as in the rig's guest) has CAP_IPC_LOCK, which lifts the limit: drop it from the
// effective set for the test's lifetime (it stays permitted, so it can be raised again).
class WithoutIpcLock {
 public:
  WithoutIpcLock() {
    REQUIRE(syscall(SYS_capget, &hdr_, data_) == 0);
    saved_ = data_[0].effective;
    data_[0].effective &= ~(1u << CAP_IPC_LOCK);
    REQUIRE(syscall(SYS_capset, &hdr_, data_) == 0);
  }
  ~WithoutIpcLock() {
    data_[0].effective = saved_;
    (void)syscall(SYS_capset, &hdr_, data_);
  }
  WithoutIpcLock(const WithoutIpcLock&) = delete;
  WithoutIpcLock& operator=(const WithoutIpcLock&) = delete;

 private:
  __user_cap_header_struct hdr_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data_[2]{};
  std::uint32_t saved_ = 0;
};

class WithMemlockLimit {
 public:
  explicit WithMemlockLimit(rlim_t bytes) {
    REQUIRE(getrlimit(RLIMIT_MEMLOCK, &saved_) == 0);
    rlimit low = saved_;
    low.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_MEMLOCK, &low) == 0);
  }
  ~WithMemlockLimit() { (void)setrlimit(RLIMIT_MEMLOCK, &saved_); }
  WithMemlockLimit(const WithMemlockLimit&) = delete;
  WithMemlockLimit& operator=(const WithMemlockLimit&) = delete;

 private:
  rlimit saved_{};
};

}  // namespace

TEST_CASE("registeringMoreThanTheLockedMemoryLimitNamesLimitAndFixes") {
  Context ctx = Context::open(test::device());
  ProtectionDomain pd(ctx);
  std::vector<std::uint8_t> buf(4u << 20, 1);

  // Within the limit, registration works (the limit below is what makes it fail).
  { MemoryRegion ok(pd, buf.data(), 4096, IBV_ACCESS_LOCAL_WRITE); }

  WithoutIpcLock no_cap;
  WithMemlockLimit limit(64 * 1024);
  try {
    MemoryRegion mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    FAIL("registering 4 MiB under a 64 KiB RLIMIT_MEMLOCK succeeded");
  } catch (const Error& e) {
    INFO(e.what());
    REQUIRE(e.code() == Errc::locked_memory);
    REQUIRE_THAT(e.what(), Contains("4 MiB") && Contains("is 64 KiB") &&
                               Contains("ulimit -l") && Contains("LimitMEMLOCK=") &&
                               Contains("/etc/security/limits.conf") && Contains(ctx.name()));
  }
}
