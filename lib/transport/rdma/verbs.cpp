#include "transport/rdma/verbs.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "tickrail/error.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*[], DeviceListDeleter>;

// A NULL list with ENOSYS means the kernel has no RDMA support at all: that is "no devices".
DeviceList list_devices(int& count) {
  count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    if (errno == ENOSYS || errno == ENOENT || errno == 0) {
      count = 0;
      return {};
    }
    throw_call_error(errno, "ibv_get_device_list", "this host");
  }
  return DeviceList(list);
}

std::string of_device(const ibv_context* ctx, std::string_view what) {
  return std::string(what) + " of device " + device_name(ctx);
}

std::string joined(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> device_names() {
  int count = 0;
  DeviceList list = list_devices(count);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  return names;
}

void require_device(std::string_view configured, std::string_view transport) {
  const std::vector<std::string> present = device_names();
  const char* missing = nullptr;
  if (present.empty()) {
    missing = "/sys/class/infiniband";
  } else if (::access("/dev/infiniband/rdma_cm", F_OK) != 0) {
    missing = "/dev/infiniband/rdma_cm";
  }
  if (missing != nullptr) {
    throw Error(Errc::no_device, std::string("no RDMA device found (") + missing +
                                     " missing): this host cannot use transport " +
                                     std::string(transport) + "; run tickrail-doctor");
  }
  if (configured.empty()) return;
  for (const std::string& n : present) {
    if (n == configured) return;
  }
  throw Error(Errc::not_found, "rdma.device = '" + std::string(configured) +
                                   "': no such RDMA device (devices present: " + joined(present) +
                                   "); run tickrail-doctor");
}

std::string device_name(const ibv_context* ctx) {
  if (ctx == nullptr || ctx->device == nullptr) return "?";
  return ibv_get_device_name(ctx->device);
}

// --- Context ---

Context Context::open(std::string_view name) {
  if (name.empty()) throw Error(Errc::invalid_argument, "open RDMA device: empty device name");
  int count = 0;
  DeviceList list = list_devices(count);
  std::vector<std::string> present;
  for (int i = 0; i < count; ++i) {
    std::string n = ibv_get_device_name(list[i]);
    if (n == name) {
      ibv_context* ctx = check_ptr(ibv_open_device(list[i]), "ibv_open_device", "device " + n);
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

ibv_device_attr Context::query_device() const {
  ibv_device_attr attr{};
  check_ret(ibv_query_device(ctx_, &attr), "ibv_query_device", "device " + name_);
  return attr;
}

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

// --- CompletionChannel ---

CompletionChannel::CompletionChannel(ibv_context* ctx)
    : ch_(check_ptr(ibv_create_comp_channel(ctx), "ibv_create_comp_channel",
                    "device " + device_name(ctx))) {
  // Non-blocking, so that wait() never blocks past its poll() deadline.
  const int flags = fcntl(ch_->fd, F_GETFL);
  if (flags < 0 || fcntl(ch_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int err = errno;
    reset();
    throw_call_error(err, "fcntl(O_NONBLOCK)", "completion channel of device " + device_name(ctx));
  }
}

CompletionChannel& CompletionChannel::operator=(CompletionChannel&& o) noexcept {
  if (this != &o) {
    reset();
    ch_ = std::exchange(o.ch_, nullptr);
  }
  return *this;
}

CompletionChannel::~CompletionChannel() { reset(); }

void CompletionChannel::reset() noexcept {
  if (ch_ == nullptr) return;
  if (int rc = ibv_destroy_comp_channel(ch_); rc != 0) {
    log_destroy_failure(returned_errno(rc), "ibv_destroy_comp_channel",
                        of_device(ch_->context, "completion channel"));
  }
  ch_ = nullptr;
}

ibv_cq* CompletionChannel::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* cq_context = nullptr;
    if (ibv_get_cq_event(ch_, &cq, &cq_context) == 0) {
      // Acknowledged at once: ibv_destroy_cq waits for every event to be acknowledged.
      ibv_ack_cq_events(cq, 1);
      return cq;
    }
    if (errno != EAGAIN) {
      throw_call_error(errno, "ibv_get_cq_event", of_device(ch_->context, "completion channel"));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return nullptr;
    pollfd pfd{ch_->fd, POLLIN, 0};
    check_minus1(::poll(&pfd, 1, static_cast<int>(left.count())), "poll",
                 of_device(ch_->context, "completion channel"));
  }
}

// --- CompletionQueue ---

CompletionQueue::CompletionQueue(ibv_context* ctx, int entries, CompletionChannel* channel,
                                 int comp_vector)
    : cq_(check_ptr(ibv_create_cq(ctx, entries, nullptr,
                                  channel != nullptr ? channel->get() : nullptr, comp_vector),
                    "ibv_create_cq",
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

void CompletionQueue::request_notify(bool solicited_only) {
  check_ret(ibv_req_notify_cq(cq_, solicited_only ? 1 : 0), "ibv_req_notify_cq",
            of_device(cq_->context, "CQ"));
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

// --- QueuePair ---

QueuePair::QueuePair(const ProtectionDomain& pd, ibv_qp_init_attr& attr)
    : qp_(check_ptr(ibv_create_qp(pd.get(), &attr), "ibv_create_qp",
                    "device " + device_name(pd.get()->context))) {}

QueuePair& QueuePair::operator=(QueuePair&& o) noexcept {
  if (this != &o) {
    reset();
    qp_ = std::exchange(o.qp_, nullptr);
  }
  return *this;
}

QueuePair::~QueuePair() { reset(); }

void QueuePair::reset() noexcept {
  if (qp_ == nullptr) return;
  if (int rc = ibv_destroy_qp(qp_); rc != 0) {
    log_destroy_failure(returned_errno(rc), "ibv_destroy_qp",
                        of_device(qp_->context, "QP " + std::to_string(qp_->qp_num)));
  }
  qp_ = nullptr;
}

void QueuePair::modify(ibv_qp_attr& attr, int mask, std::string_view step) {
  check_ret(ibv_modify_qp(qp_, &attr, mask), "ibv_modify_qp " + std::string(step),
            of_device(qp_->context, "QP " + std::to_string(qp_->qp_num)));
}

ibv_qp_state QueuePair::state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  check_ret(ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init), "ibv_query_qp",
            of_device(qp_->context, "QP " + std::to_string(qp_->qp_num)));
  return attr.qp_state;
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
