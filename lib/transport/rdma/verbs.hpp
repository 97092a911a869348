// Owners of libibverbs objects: one move-only type per verbs object, each destroying its object
// in its destructor (a failed destroy is logged, never thrown).
//
// A child must not outlive its parent. Declare owners in the order of creation, so that they are
// destroyed in the order of rdma-core's rc_pingpong.c (QP, CQ, MR, PD, context):
//
//   Context ctx = Context::open("rxe0");
//   ProtectionDomain pd(ctx);
//   MemoryRegion mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
//   CompletionQueue cq(ctx, 64);
//   CmQueuePair qp(id, pd.get(), init_attr);   // QPs are made on rdma_cm ids (cm.hpp)
//
// Parents are referred to by raw handle, so objects made on a context owned by rdma_cm
// (rdma_cm_id::verbs) are built the same way. Which device, and the checks on it, are in
// common/device.hpp. Constructors and query calls are control plane and throw tickrail::Error (verbs_error.hpp); poll() and post_*() are the data path: inline,
// noexcept, returning the verbs status.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transport/rdma/common/device.hpp"

namespace tickrail::rdma {

// An open device (ibv_context).
class Context {
 public:
  // Opens the device called `name`. Errc::not_found naming it and the devices present.
  [[nodiscard]] static Context open(std::string_view name);
  // Opens the first device. Errc::not_found when there is none.
  [[nodiscard]] static Context open_first();

  Context(Context&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)), name_(std::move(o.name_)) {}
  Context& operator=(Context&& o) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  [[nodiscard]] ibv_context* get() const noexcept { return ctx_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

  [[nodiscard]] ibv_device_attr query_device() const;
  [[nodiscard]] ibv_port_attr query_port(std::uint8_t port) const;
  [[nodiscard]] ibv_gid query_gid(std::uint8_t port, int index) const;
  // Waits (polling every 100 ms) until `port` is IBV_PORT_ACTIVE. Errc::timed_out naming the
  // device, the port and its last state.
  ibv_port_attr wait_port_active(std::uint8_t port, std::chrono::milliseconds timeout) const;

 private:
  Context(ibv_context* ctx, std::string name) noexcept : ctx_(ctx), name_(std::move(name)) {}
  void reset() noexcept;

  ibv_context* ctx_;
  std::string name_;
};

class ProtectionDomain {
 public:
  explicit ProtectionDomain(const Context& ctx) : ProtectionDomain(ctx.get()) {}
  explicit ProtectionDomain(ibv_context* ctx);
  ProtectionDomain(ProtectionDomain&& o) noexcept : pd_(std::exchange(o.pd_, nullptr)) {}
  ProtectionDomain& operator=(ProtectionDomain&& o) noexcept;
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;
  ~ProtectionDomain();

  [[nodiscard]] ibv_pd* get() const noexcept { return pd_; }

 private:
  void reset() noexcept;
  ibv_pd* pd_;
};

class CompletionQueue {
 public:
  // A CQ of at least `entries` entries, polled (no completion channel: nothing here sleeps on
  // completions).
  CompletionQueue(const Context& ctx, int entries) : CompletionQueue(ctx.get(), entries) {}
  CompletionQueue(ibv_context* ctx, int entries);
  CompletionQueue(CompletionQueue&& o) noexcept : cq_(std::exchange(o.cq_, nullptr)) {}
  CompletionQueue& operator=(CompletionQueue&& o) noexcept;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ~CompletionQueue();

  [[nodiscard]] ibv_cq* get() const noexcept { return cq_; }

  // Data path: up to wc.size() completions; returns their count, or a negative value when the
  // CQ is in error.
  [[nodiscard]] int poll(std::span<ibv_wc> wc) noexcept {
    return ibv_poll_cq(cq_, static_cast<int>(wc.size()), wc.data());
  }

  // Control plane and tests: the next completion, polling until `timeout` (Errc::timed_out).
  // The completion's status is not checked: see check_success().
  [[nodiscard]] ibv_wc next(std::chrono::milliseconds timeout, std::string_view what);

 private:
  void reset() noexcept;
  ibv_cq* cq_;
};

// Throws unless wc.status is IBV_WC_SUCCESS, naming `what`, the opcode and the status text.
void check_success(const ibv_wc& wc, std::string_view what);

class MemoryRegion {
 public:
  // Registers [addr, addr + length). Errc::locked_memory when RLIMIT_MEMLOCK is too small.
  MemoryRegion(const ProtectionDomain& pd, void* addr, std::size_t length, int access);
  MemoryRegion(MemoryRegion&& o) noexcept : mr_(std::exchange(o.mr_, nullptr)) {}
  MemoryRegion& operator=(MemoryRegion&& o) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();

  [[nodiscard]] ibv_mr* get() const noexcept { return mr_; }
  [[nodiscard]] std::uint32_t lkey() const noexcept { return mr_->lkey; }
  [[nodiscard]] std::uint32_t rkey() const noexcept { return mr_->rkey; }
  [[nodiscard]] void* addr() const noexcept { return mr_->addr; }
  [[nodiscard]] std::size_t length() const noexcept { return mr_->length; }

 private:
  void reset() noexcept;
  ibv_mr* mr_;
};

class AddressHandle {
 public:
  AddressHandle(const ProtectionDomain& pd, ibv_ah_attr& attr);
  AddressHandle(AddressHandle&& o) noexcept : ah_(std::exchange(o.ah_, nullptr)) {}
  AddressHandle& operator=(AddressHandle&& o) noexcept;
  AddressHandle(const AddressHandle&) = delete;
  AddressHandle& operator=(const AddressHandle&) = delete;
  ~AddressHandle();

  [[nodiscard]] ibv_ah* get() const noexcept { return ah_; }

 private:
  void reset() noexcept;
  ibv_ah* ah_;
};

}  // namespace tickrail::rdma
