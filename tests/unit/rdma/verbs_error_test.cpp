// Error translation of the verbs/rdma_cm wrappers: needs no RDMA device.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <cerrno>
#include <string>

#include "tickrail/error.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/verbs.hpp"
#include "transport/rdma/verbs_error.hpp"

using namespace tickrail;
using namespace tickrail::rdma;
using Catch::Matchers::Contains;

namespace {

// Runs f, which must throw tickrail::Error, and returns it.
template <typename F>
Error caught(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no tickrail::Error thrown");
  return Error(Errc::ok, "unreachable");
}

}  // namespace

TEST_CASE("nullWithErrnoBecomesErrnoErrorNamingCallAndObject") {
  int dummy = 0;
  REQUIRE(check_ptr(&dummy, "ibv_alloc_pd", "device rxe0") == &dummy);
  Error e = caught([] {
    errno = EINVAL;
    (void)check_ptr(static_cast<int*>(nullptr), "ibv_alloc_pd", "device rxe9");
  });
  REQUIRE(e.code() == std::errc::invalid_argument);
  REQUIRE_THAT(e.what(), Contains("ibv_alloc_pd on device rxe9") && Contains("Invalid argument"));
}

TEST_CASE("returnedErrnoBecomesErrnoErrorInEveryProviderSpelling") {
  REQUIRE_NOTHROW(check_ret(0, "ibv_modify_qp", "QP 7"));
  REQUIRE(caught([] { check_ret(ENOMEM, "ibv_modify_qp", "QP 7"); }).code() ==
          std::errc::not_enough_memory);
  REQUIRE(caught([] { check_ret(-EAGAIN, "ibv_post_send", "QP 7"); }).code() ==
          std::errc::resource_unavailable_try_again);
  Error e = caught([] {
    errno = EBUSY;
    check_ret(-1, "ibv_dealloc_pd", "PD of device rxe0");
  });
  REQUIRE(e.code() == std::errc::device_or_resource_busy);
  REQUIRE_THAT(e.what(), Contains("ibv_dealloc_pd on PD of device rxe0"));
}

TEST_CASE("minusOneWithErrnoBecomesErrnoErrorAndPassesCountsThrough") {
  REQUIRE(check_minus1(5, "poll", "fd") == 5);
  Error e = caught([] {
    errno = EADDRINUSE;
    (void)check_minus1(-1, "rdma_bind_addr", "10.77.0.1:7471");
  });
  REQUIRE(e.code() == std::errc::address_in_use);
  REQUIRE_THAT(e.what(), Contains("rdma_bind_addr on 10.77.0.1:7471"));
}

TEST_CASE("negativePollCountBecomesIoErrorNamingTheCount") {
  REQUIRE(check_poll(3, "ibv_poll_cq", "CQ") == 3);
  REQUIRE(check_poll(0, "ibv_poll_cq", "CQ") == 0);
  Error e = caught([] { (void)check_poll(-2, "ibv_poll_cq", "CQ of device rxe0"); });
  REQUIRE(e.code() == std::errc::io_error);
  REQUIRE_THAT(e.what(), Contains("ibv_poll_cq on CQ of device rxe0 returned -2"));
}

TEST_CASE("registrationOutOfLockedMemoryNamesSizeLimitAndFixes") {
  rlimit lim{};
  REQUIRE(getrlimit(RLIMIT_MEMLOCK, &lim) == 0);
  const std::string limit =
      lim.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(lim.rlim_cur);
  for (int err : {ENOMEM, EPERM}) {
    Error e = registration_error(err, 3u << 20, "device rxe0");
    REQUIRE(e.code() == Errc::locked_memory);
    const std::string what = e.what();
    REQUIRE_THAT(what, Contains("ibv_reg_mr on device rxe0 (3 MiB)"));
    REQUIRE_THAT(what, Contains("ulimit -l unlimited"));
    REQUIRE_THAT(what, Contains("LimitMEMLOCK="));
    REQUIRE_THAT(what, Contains("/etc/security/limits.conf"));
    // The limit itself, in whichever unit it reads best.
    if (lim.rlim_cur == RLIM_INFINITY) {
      REQUIRE_THAT(what, Contains("is unlimited"));
    } else {
      REQUIRE_THAT(what, Contains("RLIMIT_MEMLOCK) of this process is "));
    }
  }
  Error other = registration_error(EINVAL, 4096, "device rxe0");
  REQUIRE(other.code() == std::errc::invalid_argument);
  REQUIRE_THAT(other.what(), Contains("4 KiB"));
}

TEST_CASE("lockedMemoryAdviceShowsTheCurrentLimit") {
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_MEMLOCK, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = 64 * 1024;
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < low.rlim_cur) low.rlim_cur = saved.rlim_max;
  REQUIRE(setrlimit(RLIMIT_MEMLOCK, &low) == 0);
  const std::string advice = locked_memory_advice(1 << 20);
  REQUIRE(setrlimit(RLIMIT_MEMLOCK, &saved) == 0);
  if (low.rlim_cur == 64 * 1024) REQUIRE_THAT(advice, Contains("is 64 KiB"));
  REQUIRE_THAT(advice, Contains("registering 1 MiB"));
}

TEST_CASE("openingAnUnknownDeviceIsNotFoundNamingIt") {
  Error e = caught([] { (void)Context::open("tickrail_no_such_dev0"); });
  REQUIRE(e.code() == Errc::not_found);
  REQUIRE_THAT(e.what(), Contains("'tickrail_no_such_dev0'") && Contains("devices present:"));
  REQUIRE(caught([] { (void)Context::open(""); }).code() == Errc::invalid_argument);
}

TEST_CASE("deviceListIsEmptyRatherThanAnErrorWithoutKernelSupport") {
  // On a host without RDMA this is empty; with devices, every name is non-empty.
  for (const auto& name : device_names()) REQUIRE_FALSE(name.empty());
  if (device_names().empty()) {
    REQUIRE(caught([] { (void)Context::open_first(); }).code() == Errc::not_found);
  }
}

TEST_CASE("addressesPrintAsHostAndPort") {
  REQUIRE(Address::parse("10.77.0.1", 7471).str() == "10.77.0.1:7471");
  REQUIRE(Address::parse("10.77.0.1", 7471).port() == 7471);
  REQUIRE(Address::parse("::1", 1).str() == "[::1]:1");
}

TEST_CASE("rejectReasonsReadAsWords") {
  REQUIRE_THAT(reject_reason(8), Contains("no listener"));
  REQUIRE_THAT(reject_reason(28), Contains("refused by the peer application"));
  REQUIRE(reject_reason(99) == "reason 99");
}
