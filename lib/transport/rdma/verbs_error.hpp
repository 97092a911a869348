// The one place where the error conventions of libibverbs and librdmacm become tickrail::Error.
//
// verbs and rdma_cm report failure four ways:
//   1. NULL + errno          ibv_open_device, ibv_alloc_pd, ibv_create_cq, ibv_reg_mr,
//                            ibv_create_qp, ibv_create_ah, rdma_create_event_channel
//   2. returned errno        ibv_modify_qp, ibv_query_port, ibv_req_notify_cq, ibv_post_*,
//                            ibv_destroy_*, ibv_dealloc_pd, ibv_dereg_mr
//   3. -1 + errno            every rdma_* call that returns int, ibv_get_cq_event
//   4. negative count        ibv_poll_cq (errno is not set)
// Each check_* below takes the call's name and the object it acted on, so that what() reads
// "ibv_alloc_pd on device rxe0: Cannot allocate memory". System errors keep the generic errno
// category (callers compare against std::errc); tickrail's own conditions use Errc (not_found,
// locked_memory, timed_out...).
//
// Control plane only: these throw. The data path calls verbs directly and returns status.
#pragma once

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

#include "tickrail/error.hpp"

namespace tickrail::rdma {

// Throws the Error for `err` (an errno value) raised by `call` acting on `object`.
[[noreturn]] void throw_call_error(int err, std::string_view call, std::string_view object);

// Convention 1: NULL + errno. Returns p when it is not null.
template <typename T>
T* check_ptr(T* p, std::string_view call, std::string_view object) {
  if (p == nullptr) throw_call_error(errno != 0 ? errno : EIO, call, object);
  return p;
}

// Convention 2: the call returns 0 or an errno value. (Some providers return -errno or -1 with
// errno set; both are understood.)
void check_ret(int rc, std::string_view call, std::string_view object);

// Convention 3: the call returns 0 (or a non-negative value) or -1 with errno set.
int check_minus1(int rc, std::string_view call, std::string_view object);

// Convention 4: ibv_poll_cq's count, negative on failure. Returns the count.
int check_poll(int n, std::string_view call, std::string_view object);

// The errno a convention-2 return value stands for (0 when rc is 0).
[[nodiscard]] int returned_errno(int rc) noexcept;

// The error for a failed ibv_reg_mr of `length` bytes: ENOMEM and EPERM mean the locked-memory
// limit (RLIMIT_MEMLOCK) was hit, and become Errc::locked_memory with the limit and the fixes;
// anything else keeps its errno.
[[nodiscard]] Error registration_error(int err, std::size_t length, std::string_view object);

// "the locked-memory limit (ulimit -l) is 8 MiB; ...": the current RLIMIT_MEMLOCK and how to
// raise it (ulimit -l, LimitMEMLOCK=, /etc/security/limits.conf). Shared with mlock() callers.
[[nodiscard]] std::string locked_memory_advice(std::size_t length);

// Logs (never throws) a failed destroy/free in a destructor: `call` returned errno `err`.
void log_destroy_failure(int err, std::string_view call, std::string_view object) noexcept;

}  // namespace tickrail::rdma
