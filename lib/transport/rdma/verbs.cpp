#include "transport/rdma/verbs.hpp"

#include <thread>

#include "tickrail/error.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma {
namespace {

std::string of_device(const ibv_context* ctx, std::string_view what) {
  return std::string(what) + " of device " + device_name(ctx);
}

}  // namespace

// --- Context ---

Context Context::open(std::string_view name) {
  if (name.empty()) throw Error(Errc::invalid_argument, "open RDMA device: empty device name");
  const DeviceList list;
  std::vector<std::string> present;
  for (ibv_device* d : list.devices()) {
    std::string n = ibv_get_device_name(d);
    if (n == name) {
      ibv_context* ctx = check_ptr(ibv_open_device(d), "ibv_open_device", "device " + n);
      return Context(ctx, std::move(n));
    }
    present.push_back(std::move(n));
  }
  throw Error(Errc::not_found, "RDMA device '" + std::string(name) +
                                  "' not found (devices present: " + joined(present) + ")");
}

Context Context::open_first() {
  std::vector<std::string> names = device_names();
  if (names.empty()) throw Error(Errc::not_found, "no RDMA device on this host");
  return open(names.front());
}

Context& Context::operator=(Context&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::exchange(o.ctx_, nullptr);
    name_ = std::move(o.name_);
  }
  return *this;
}

Context::~Context() { reset(); }

void Context::reset() noexcept {
  if (ctx_ == nullptr) return;
  if (int rc = ibv_close_device(ctx_); rc != 0) {
    log_destroy_failure(returned_errno(rc), "ibv_close_device", "device " + name_);
  }
  ctx_ = nullptr;
}

ibv_device_attr Context::query_device() const { return rdma::query_device(ctx_); }

ibv_port_attr Context::query_port(std::uint8_t port) const {
  ibv_port_attr attr{};
  check_ret(ibv_query_port(ctx_, port, &attr), "ibv_query_port",
            "port " + std::to_string(port) + " of device " + name_);
  return attr;
}

ibv_gid Context::query_gid(std::uint8_t port, int index) const {
  ibv_gid gid{};
  check_ret(ibv_query_gid(ctx_, port, index, &gid), "ibv_query_gid",
            "GID " + std::to_string(index) + " of port " + std::to_string(port) + " of device " +
                name_);
  return gid;
}

ibv_port_attr Context::wait_port_active(std::uint8_t port,
                                        std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ibv_port_attr attr = query_port(port);
    if (attr.state == IBV_PORT_ACTIVE) return attr;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(Errc::timed_out, "port " + std::to_string(port) + " of device " + name_ +
                                       " not ACTIVE after " + std::to_string(timeout.count()) +
                                       " ms (state " + ibv_port_state_str(attr.state) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// --- ProtectionDomain ---

ProtectionDomain::ProtectionDomain(ibv_context* ctx)
    : pd_(check_ptr(ibv_alloc_pd(ctx), "ibv_alloc_pd", "device " + device_name(ctx))) {}

ProtectionDomain& ProtectionDomain::operator=(ProtectionDomain&& o) noexcept {
  if (this != &o) {
    reset();
    pd_ = std::exchange(o.pd_, nullptr);
  }
  return *this;
}

ProtectionDomain::~ProtectionDomain() { reset(); }

void ProtectionDomain::reset() noexcept {
  if (pd_ == nullptr) return;
  // EBUSY here means a child (MR, QP, AH) outlived the PD: a declaration-order bug.
  if (int rc = ibv_dealloc_pd(pd_); rc != 0) {
    log_destroy_failure(returned_errno(rc), "ibv_dealloc_pd", of_device(pd_->context, "PD"));
  }
  pd_ = nullptr;
}

// --- CompletionQueue ---

CompletionQueue::CompletionQueue(ibv_context* ctx, int entries)
    : cq_(check_ptr(ibv_create_cq(ctx, entries, nullptr, nullptr, 0), "ibv_create_cq",
                    std::to_string(entries) + "-entry CQ of device " + device_name(ctx))) {}

CompletionQueue& CompletionQueue::operator=(CompletionQueue&& o) noexcept {
  if (this != &o) {
    reset();
    cq_ = std::exchange(o.cq_, nullptr);
  }
  return *this;
}

CompletionQueue::~CompletionQueue() { reset(); }

void CompletionQueue::reset() noexcept {
  if (cq_ == nullptr) return;
  if (int rc = ibv_destroy_cq(cq_); rc != 0) {
    log_destroy_failure(returned_errno(rc), "ibv_destroy_cq", of_device(cq_->context, "CQ"));
  }
  cq_ = nullptr;
}

ibv_wc CompletionQueue::next(std::chrono::milliseconds timeout, std::string_view what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ibv_wc wc{};
  for (;;) {
    if (check_poll(poll(std::span(&wc, 1)), "ibv_poll_cq", of_device(cq_->context, "CQ")) == 1) {
      return wc;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(Errc::timed_out, "no completion for " + std::string(what) + " on " +
                                       of_device(cq_->context, "CQ") + " within " +
                                       std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::yield();
  }
}

void check_success(const ibv_wc& wc, std::string_view what) {
  if (wc.status == IBV_WC_SUCCESS) return;
  throw Error(std::make_error_code(std::errc::io_error),
              std::string(what) + ": work completion wr_id " + std::to_string(wc.wr_id) +
                  " opcode " + std::to_string(static_cast<int>(wc.opcode)) + " failed: " +
                  ibv_wc_status_str(wc.status) + " (vendor error " +
                  std::to_string(wc.vendor_err) + ")");
}

// --- MemoryRegion ---

MemoryRegion::MemoryRegion(const ProtectionDomain& pd, void* addr, std::size_t length,
                           int access)
    : mr_(ibv_reg_mr(pd.get(), addr, length, access)) {
  if (mr_ == nullptr) {
    throw registration_error(errno != 0 ? errno : EIO, length,
                             "device " + device_name(pd.get()->context));
  }
}

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& o) noexcept {
  if (this != &o) {
    reset();
    mr_ = std::exchange(o.mr_, nullptr);
  }
  return *this;
}

MemoryRegion::~MemoryRegion() { reset(); }

void MemoryRegion::reset() noexcept {
  if (mr_ == nullptr) return;
  if (int rc = ibv_dereg_mr(mr_); rc != 0) {
    log_destroy_failure(returned_errno(rc), "ibv_dereg_mr",
                        of_device(mr_->context, std::to_string(mr_->length) + "-byte MR"));
  }
  mr_ = nullptr;
}

// --- AddressHandle ---

AddressHandle::AddressHandle(const ProtectionDomain& pd, ibv_ah_attr& attr)
    : ah_(check_ptr(ibv_create_ah(pd.get(), &attr), "ibv_create_ah",
                    "device " + device_name(pd.get()->context))) {}

AddressHandle& AddressHandle::operator=(AddressHandle&& o) noexcept {
  if (this != &o) {
    reset();
    ah_ = std::exchange(o.ah_, nullptr);
  }
  return *this;
}

AddressHandle::~AddressHandle() { reset(); }

void AddressHandle::reset() noexcept {
  if (ah_ == nullptr) return;
  if (int rc = ibv_destroy_ah(ah_); rc != 0) {
    log_destroy_failure(returned_errno(rc), "ibv_destroy_ah", of_device(ah_->context, "AH"));
  }
  ah_ = nullptr;
}

}  // namespace tickrail::rdma
