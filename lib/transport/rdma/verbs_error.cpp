#include "transport/rdma/verbs_error.hpp"

#include <sys/resource.h>

#include <spdlog/spdlog.h>

namespace tickrail::rdma {
namespace {

std::string describe_call(std::string_view call, std::string_view object) {
  std::string what(call);
  if (!object.empty()) {
    what += " on ";
    what += object;
  }
  return what;
}

std::string human_bytes(unsigned long long n) {
  static constexpr const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  while (u + 1 < std::size(units) && n >= 1024 && n % 1024 == 0) {
    n /= 1024;
    ++u;
  }
  return std::to_string(n) + " " + units[u];
}

}  // namespace

void throw_call_error(int err, std::string_view call, std::string_view object) {
  throw_errno(err, describe_call(call, object));
}

int returned_errno(int rc) noexcept {
  if (rc == 0) return 0;
  if (rc > 0) return rc;
  if (rc == -1 && errno != 0) return errno;
  return -rc;
}

void check_ret(int rc, std::string_view call, std::string_view object) {
  if (rc != 0) throw_call_error(returned_errno(rc), call, object);
}

int check_minus1(int rc, std::string_view call, std::string_view object) {
  if (rc < 0) throw_call_error(errno != 0 ? errno : EIO, call, object);
  return rc;
}

int check_poll(int n, std::string_view call, std::string_view object) {
  if (n < 0) {
    throw Error(std::make_error_code(std::errc::io_error),
                describe_call(call, object) + " returned " + std::to_string(n) +
                    " (the completion queue is in error)");
  }
  return n;
}

std::string locked_memory_advice(std::size_t length) {
  rlimit lim{};
  std::string limit = "unknown";
  if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0) {
    limit = lim.rlim_cur == RLIM_INFINITY ? "unlimited" : human_bytes(lim.rlim_cur);
  }
  return "registering " + human_bytes(length) +
         " needs that much locked memory, and the locked-memory limit (ulimit -l, "
         "RLIMIT_MEMLOCK) of this process is " + limit +
         "; raise it with `ulimit -l unlimited` in the shell that starts the program, "
         "LimitMEMLOCK=infinity in its systemd unit, or a '* - memlock unlimited' line in "
         "/etc/security/limits.conf (then log in again)";
}

Error registration_error(int err, std::size_t length, std::string_view object) {
  std::string what = describe_call("ibv_reg_mr", object) + " (" + human_bytes(length) + ")";
  if (err == ENOMEM || err == EPERM) {
    return Error(Errc::locked_memory,
                 what + ": " + std::error_code(err, std::generic_category()).message() + ": " +
                     locked_memory_advice(length));
  }
  return Error(std::error_code(err, std::generic_category()), what);
}

void log_destroy_failure(int err, std::string_view call, std::string_view object) noexcept {
  try {
    spdlog::warn("{} failed: {} (resource leaked)", describe_call(call, object),
                 std::error_code(err, std::generic_category()).message());
  } catch (...) {
    // Logging is best effort in a destructor.
  }
}

}  // namespace tickrail::rdma
