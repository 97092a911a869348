// Control plane of the RC subscriber: the ring region, the connection, the CM thread, teardown.
#include "transport/rdma/rc/rc_subscriber.hpp"

#include <poll.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <thread>

#include "tickrail/build_config.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "core/thread.hpp"
#include "transport/rdma/common/connection.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma::rc {
namespace {

constexpr std::uint64_t kDefaultCapacity = 16384;  // PublisherConfig's default ring_capacity

std::uint64_t ms_to_cycles(std::chrono::milliseconds ms) {
  return std::max<std::uint64_t>(
      1, Clock::instance().ns_to_cycles(static_cast<double>(ms.count()) * 1e6));
}

}  // namespace

RcSubscriber::RcSubscriber(const SubscriberConfig& config, const detail::Placement& placement,
                           const Overrides& overrides)
    : config_(config) {
  const RdmaConfig& r = config_.rdma;
  where_ = "channel '" + config_.channel + "' at " + r.address + ":" + std::to_string(r.port);
  check_settings(r);
  rdma::require_device(r.device, "rc");
  (void)Clock::instance();
  silence_cycles_ = ms_to_cycles(config_.publisher_timeout);

  std::uint64_t capacity = config_.ring_capacity != 0 ? config_.ring_capacity : kDefaultCapacity;
  std::uint64_t geometry_max = 0;
  try {
    conn_ = connect(capacity, overrides, geometry_max);
  } catch (const Error& e) {
    // A ring left to the publisher's choice that is larger than it accepts: once more, with
    // the size it named in its reject.
    if (config_.ring_capacity != 0 || geometry_max == 0 || geometry_max >= capacity ||
        !is_valid_ring_capacity(geometry_max) || overrides.capacity_log2) {
      throw;
    }
    capacity = geometry_max;
    conn_ = connect(capacity, overrides, geometry_max);
  }
  capacity_ = capacity;
  credit_every_ = credit_interval(r.credit_every, capacity);
  last_credit_ = first_seq_;

  auto* base = static_cast<std::byte*>(conn_->region.data());
  control_ = reinterpret_cast<const ControlBlock*>(base);
  slots_ = reinterpret_cast<Slot*>(base + kControlBytes);
  prepare_credit_write(reinterpret_cast<ControlBlock*>(base));

  send_.cq = conn_->send_cq->get();
  if (is_memory_mode(mode_)) {
    // Credits go out from Subscriber::poll through return_credit(), not from the reader.
    reader_ = RingReader(slots_, capacity_, first_seq_, nullptr);
    if (wants_table()) start_table();
  } else {
    next_ = first_seq_;
    limit_ = first_seq_ - 1;
    credit_due_ = first_seq_ + credit_every_;
    if (wants_table()) start_table();  // a snapshot (connect refused conflate)
  }
  silence_ = SilenceWatch(silence_cycles_, grace_cycles_, Clock::now(),
                          load_word(control_->heartbeat.beat));
  cm_thread_ = detail::start_thread("tr-rc-cm", placement, [this](std::stop_token s) { cm_loop(s); });
  logger()->info("subscriber: {} on {}: {} slots, policy {}, {}{}; first tick {}", where_,
                 rdma::device_name(conn_->id->verbs()), capacity_, to_string(config_.policy),
                 to_string(mode_), mode_note_, first_seq_);
}

RcSubscriber::~RcSubscriber() { close(); }

// The table's reader and delivery (the private copy: 192 bytes per instrument of the table's
// capacity), allocated here, never on the poll path.
void RcSubscriber::start_table() {
  table_reader_ = std::make_unique<TableReader>(conn_->qp->get(), send_, table_addr_, table_rkey_,
                                                conn_->table_buffer.data(),
                                                conn_->table_buffer_mr->lkey());
  // A delivery that makes no progress for publisher_timeout has a publisher dead or lying.
  delivery_ = std::make_unique<detail::TableDelivery>(table_geometry_, *table_reader_,
                                                      ms_to_cycles(config_.publisher_timeout));
  reader_.stop_at_laps(config_.policy == SlowConsumerPolicy::conflate);
  credit_due_ = first_seq_ + credit_every_;
  if (config_.start == StartMode::snapshot) {
    delivery_->begin(detail::TableDelivery::Why::snapshot, table_feed());
  }
}

void RcSubscriber::check_settings(const RdmaConfig& r) {
  if (r.address.empty()) {
    throw Error(Errc::config_error, "rdma.address: an RC subscriber needs its publisher's address");
  }
  if (r.connect_timeout.count() <= 0) {
    throw Error(Errc::config_error, "rdma.connect_timeout_ms: must be positive");
  }
  if (r.recv_batch == 0 || r.recv_batch > 4096) {
    throw Error(Errc::config_error, "rdma.recv_batch: " + std::to_string(r.recv_batch) +
                                        " is outside 1..4096");
  }
}

// The credit WRITE: prepared once; the value goes inline (or from the control block's
// credit-source line when the device has no inline data).
void RcSubscriber::prepare_credit_write(ControlBlock* control) {
  credit_sge_.addr = reinterpret_cast<std::uintptr_t>(&control->credit_source[0]);
  credit_sge_.length = sizeof(std::uint64_t);
  credit_sge_.lkey = conn_->mr->lkey();
  credit_wr_.sg_list = &credit_sge_;
  credit_wr_.num_sge = 1;
  credit_wr_.opcode = IBV_WR_RDMA_WRITE;
  credit_wr_.wr.rdma.remote_addr = credit_addr_;
  credit_wr_.wr.rdma.rkey = credit_rkey_;
}

WriteMode RcSubscriber::choose_mode(Connection& c) {
  if (config_.rdma.polling == RcPolling::cq) return WriteMode::cq;
  // Memory polling reads the commit word while the NIC may still be writing the slot: only
  // correct where the device places a WRITE's bytes in address order.
  int in_order = 0;
#if TICKRAIL_HAVE_QP_DATA_IN_ORDER
  in_order = ibv_query_qp_data_in_order(c.qp->get(), IBV_WR_RDMA_WRITE, 0);
#endif
  const std::string dev = rdma::device_name(c.id->verbs());
  if (in_order == 1) {
    mode_note_ = " (" + dev + " places RDMA WRITE data in order)";
    return WriteMode::memory;
  }
  if (config_.rdma.split_commit) {
    mode_note_ = " (" + dev + " does not report in-order placement; split_commit = true)";
    return WriteMode::memory_split;
  }
  mode_note_ = " (memory polling asked for, but " + dev +
               " does not report in-order data placement (ibv_query_qp_data_in_order); set "
               "rdma.split_commit to keep memory polling)";
  logger()->warn("subscriber: {}: memory polling needs in-order data placement, which {} does "
                 "not report: falling back to CQ polling",
                 where_, dev);
  return WriteMode::cq;
}

std::unique_ptr<RcSubscriber::Connection> RcSubscriber::connect(std::uint64_t capacity,
                                                                const Overrides& overrides,
                                                                std::uint64_t& geometry_max) {
  const std::string what = "subscribe to " + where_;
  auto c = std::make_unique<Connection>();
  const rdma::Address dst = resolve_route(*c, what);
  register_ring(*c, capacity, what);
  create_queue_pair(*c, capacity, what);
  mode_ = choose_mode(*c);
  if (config_.policy == SlowConsumerPolicy::conflate && mode_ == WriteMode::cq) {
    throw Error(Errc::unsupported,
                what + ": policy = conflate over rc needs the ring read in memory, where the "
                       "publisher overwrites what a lapped subscriber has not read, and this "
                       "subscriber would poll its completion queue (" +
                    (config_.rdma.polling == RcPolling::cq
                         ? std::string("rdma.polling = cq): set rdma.polling = memory")
                         : rdma::device_name(c->id->verbs()) +
                               " does not report in-order data placement): set rdma.split_commit = true"));
  }
  if (mode_ == WriteMode::cq) post_first_receives(*c, what);
  handshake(*c, capacity, overrides, dst, geometry_max, what);
  return c;
}

rdma::Address RcSubscriber::resolve_route(Connection& c, const std::string& what) {
  const RdmaConfig& r = config_.rdma;
  rdma::Address dst;
  try {
    dst = rdma::Address::parse(r.address, r.port);
    c.id.emplace(c.channel, RDMA_PS_TCP);
    rdma::resolve(*c.id, c.channel, dst, r.connect_timeout);
  } catch (const Error& e) {
    const std::error_code ec = e.code();
    if (ec == std::errc::network_unreachable || ec == std::errc::host_unreachable ||
        ec == std::errc::address_not_available) {
      throw Error(Errc::not_found, what + ": no RDMA device has a route to " + r.address + " (" +
                                       e.what() + ")");
    }
    throw Error(e.code(), what + ": " + e.what());
  }
  rdma::check_bound_device(*c.id, r.device, what + ": " + dst.str());
  return dst;
}

void RcSubscriber::register_ring(Connection& c, std::uint64_t capacity, const std::string& what) {
  const std::size_t bytes = region_bytes(capacity);
  try {
    c.pd.emplace(c.id->verbs());
    c.region = MappedRegion(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), what + ": " + e.what());
  }
  c.region.prefault();  // no page fault when the first ticks land
  if (config_.lock_memory && ::mlock(c.region.data(), c.region.size()) != 0) {
    const int err = errno;
    throw Error(Errc::locked_memory, what + ": lock the " + std::to_string(bytes) +
                                         "-byte ring (" + std::to_string(capacity) + " slots): " +
                                         std::strerror(err) + "; " +
                                         rdma::locked_memory_advice(bytes));
  }
  try {
    // Remote write only; never IBV_ACCESS_RELAXED_ORDERING: memory polling needs the NIC's
    // writes to land in order.
    c.mr.emplace(*c.pd, c.region.data(), bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  } catch (const Error& e) {
    throw Error(e.code(), what + ": register its ring of " + std::to_string(capacity) +
                              " slots (" + std::to_string(bytes) + " bytes): " + e.what());
  }
  if (!wants_table()) return;
  try {
    // The target of the table's READs: local write only.
    c.table_buffer = MappedRegion(TableReader::kBufferBytes);
    c.table_buffer.prefault();
    c.table_buffer_mr.emplace(*c.pd, c.table_buffer.data(), TableReader::kBufferBytes,
                              IBV_ACCESS_LOCAL_WRITE);
  } catch (const Error& e) {
    throw Error(e.code(), what + ": register the " + std::to_string(TableReader::kBufferBytes) +
                              "-byte buffer the last-value table is read into: " + e.what());
  }
}

void RcSubscriber::create_queue_pair(Connection& c, std::uint64_t capacity,
                                     const std::string& what) {
  const RdmaConfig& r = config_.rdma;
  const bool cq_wanted = r.polling == RcPolling::cq || !r.split_commit;
  const ibv_device_attr dattr = rdma::query_device(c.id->verbs());
  // Receives for WRITE WITH IMMEDIATE: enough that a keeping-up subscriber never makes the
  // publisher wait for one (RNR), within what the device allows.
  const std::uint64_t max_wr = dattr.max_qp_wr > 0 ? static_cast<std::uint64_t>(dattr.max_qp_wr) : 4096;
  recv_batch_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(r.recv_batch, max_wr / 2));
  // (A whole ring of one-slot WRITEs, and room for the heartbeats that follow them.)
  c.recv_depth = static_cast<std::uint32_t>(std::min<std::uint64_t>(
      std::min<std::uint64_t>(capacity, 4096) + 2 * std::uint64_t{recv_batch_}, max_wr));
  try {
    // Credit WRITEs, and a table subscriber's READs (TableReader: kMaxReads at most in flight).
    const std::uint32_t send_depth = credit_depth_ + (wants_table() ? TableReader::kMaxReads + 1 : 0);
    c.send_cq.emplace(c.id->verbs(), static_cast<int>(send_depth));
    c.recv_cq.emplace(c.id->verbs(), cq_wanted ? static_cast<int>(c.recv_depth) : 1);
    ibv_qp_init_attr qa{};
    qa.send_cq = c.send_cq->get();
    qa.recv_cq = c.recv_cq->get();
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 0;
    qa.cap.max_send_wr = send_depth;
    qa.cap.max_recv_wr = cq_wanted ? c.recv_depth : 1;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = sizeof(std::uint64_t);
    c.qp.emplace(rdma::create_qp(*c.id, c.pd->get(), qa, sizeof(std::uint64_t)));
    c.max_inline = qa.cap.max_inline_data;
  } catch (const Error& e) {
    throw Error(e.code(), what + ": " + e.what());
  }
}

// CQ mode: one receive per WRITE WITH IMMEDIATE; no scatter entry, the data went by RDMA.
void RcSubscriber::post_first_receives(Connection& c, const std::string& what) {
  recv_wr_.assign(recv_batch_, ibv_recv_wr{});
  for (std::uint32_t i = 0; i < recv_batch_; ++i) {
    recv_wr_[i].wr_id = i;
    recv_wr_[i].next = i + 1 < recv_batch_ ? &recv_wr_[i + 1] : nullptr;
  }
  wc_.assign(recv_batch_, ibv_wc{});
  for (std::uint32_t posted = 0; posted + recv_batch_ <= c.recv_depth; posted += recv_batch_) {
    ibv_recv_wr* bad = nullptr;
    rdma::check_ret(ibv_post_recv(c.qp->get(), recv_wr_.data(), &bad), "ibv_post_recv", what);
  }
}

// Sends the connect request and reads the publisher's answer: an accept with the first
// sequence and the credit word, or a reject whose reason becomes the error.
void RcSubscriber::handshake(Connection& c, std::uint64_t capacity, const Overrides& overrides,
                             const rdma::Address& dst, std::uint64_t& geometry_max,
                             const std::string& what) {
  ConnectRequest req = make_request(config_, mode_, capacity,
                                    reinterpret_cast<std::uintptr_t>(c.region.data()),
                                    c.mr->rkey());
  if (overrides.version) req.version = *overrides.version;
  if (overrides.capacity_log2) req.capacity_log2 = *overrides.capacity_log2;
  rdma_conn_param param = rdma::connection_param(std::as_bytes(std::span(&req, 1)), 1, 1);
  try {
    c.id->connect(param);
    rdma::CmEvent ev = c.channel.next(config_.rdma.connect_timeout, what);
    if (ev.type() == RDMA_CM_EVENT_REJECTED) {
      if (auto note = decode_reject(ev.private_data())) {
        const auto reason = static_cast<RejectReason>(note->reason);
        if (reason == RejectReason::bad_geometry) geometry_max = note->detail;
        throw Error(reject_errc(reason), what + ": rejected by the publisher: " +
                                             to_string(reason) + ": " + note->text);
      }
      if (ev.status() == 8) {
        // Nobody there yet, not a refusal: Subscriber retries it within attach_timeout.
        throw Error(Errc::not_found, what + ": no publisher is listening on " + dst.str() + " (" +
                                        rdma::reject_reason(ev.status()) + ")");
      }
    }
    if (ev.type() != RDMA_CM_EVENT_ESTABLISHED || ev.status() != 0) {
      rdma::throw_unexpected(ev, RDMA_CM_EVENT_ESTABLISHED, what);
    }
    const auto reply = decode_accept(ev.private_data());
    if (!reply || reply->version != kVersion) {
      throw Error(Errc::version_mismatch,
                  what + ": the publisher's accept is not tickrail RC version " +
                      std::to_string(kVersion));
    }
    if (wants_table()) {
      std::string why;
      const auto table = granted_table(*reply, why);
      if (!table) throw Error(Errc::geometry_mismatch, what + ": the publisher's accept grants " + why);
      table_geometry_ = *table;
      table_addr_ = reply->table_addr;
      table_rkey_ = reply->table_rkey;
    }
    first_seq_ = reply->first_seq;
    credit_addr_ = reply->credit_addr;
    credit_rkey_ = reply->credit_rkey;
    // After a stop, three of the publisher's heartbeats (a peer's number: SilenceWatch clamps
    // the grace to our own limit).
    grace_cycles_ = ms_to_cycles(
        std::chrono::milliseconds(3 * std::min<std::uint64_t>(reply->heartbeat_ms, 60'000)));
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with(what)) throw;
    throw Error(e.code(), what + ": " + e.what());
  }
}

void RcSubscriber::cm_loop(std::stop_token stop) noexcept {
  // The connection is up: the only events left are its end. Nothing is due between them, so the
  // thread sleeps until one comes or a stop (bounded all the same): no wake-ups beside the
  // polling thread.
  const detail::StopSignal stopped(stop);
  while (!stop.stop_requested()) {
    std::array<pollfd, 2> fds{{{conn_->channel.fd(), POLLIN, 0}, {stopped.fd(), POLLIN, 0}}};
    (void)::poll(fds.data(), fds.size(), stopped.fd() >= 0 ? 1000 : 50);
    wakeups_.tick();
    try {
      while (auto ev = conn_->channel.try_next()) {
        PeerLoss loss = PeerLoss::none;
        if (ev->type() == RDMA_CM_EVENT_DISCONNECTED) loss = PeerLoss::disconnected;
        if (ev->type() == RDMA_CM_EVENT_DEVICE_REMOVAL) loss = PeerLoss::device_removed;
        if (loss != PeerLoss::none) {
          std::uint32_t none = 0;
          loss_.compare_exchange_strong(none, static_cast<std::uint32_t>(loss),
                                        std::memory_order_release);
        }
      }
    } catch (const std::exception& e) {
      logger()->warn("subscriber: {}: rdma_cm: {}", where_, e.what());
    }
  }
}

SubscriberState RcSubscriber::state() const noexcept {
  if (closed_) return SubscriberState::closed;
  const auto notice = static_cast<Notice>(load_word(control_->notice.notice));
  if (notice == Notice::evicted) return SubscriberState::evicted;
  if (notice == Notice::closed) return SubscriberState::publisher_gone;
  if (loss_.load(std::memory_order_acquire) != 0) return SubscriberState::publisher_gone;
  if (silence_.silent_word(load_word(control_->heartbeat.beat), Clock::now())) {
    return SubscriberState::publisher_gone;
  }
  return SubscriberState::active;
}

std::string RcSubscriber::reason() const {
  if (closed_) return "closed";
  const auto notice = static_cast<Notice>(load_word(control_->notice.notice));
  switch (state()) {
    case SubscriberState::evicted:
      return "evicted by the publisher of " + where_ +
             ": its ring stayed full for longer than disconnect_after (" +
             std::to_string(config_.disconnect_after.count()) + " ms)";
    case SubscriberState::publisher_gone:
      if (notice == Notice::closed) return "the publisher of " + where_ + " closed the channel";
      switch (static_cast<PeerLoss>(loss_.load(std::memory_order_acquire))) {
        case PeerLoss::disconnected:
          return "the publisher of " + where_ +
                 " disconnected (its process ended or the connection was lost)";
        case PeerLoss::device_removed:
          return "the RDMA device of the connection to " + where_ + " was removed";
        case PeerLoss::qp_error:
          return "the connection to the publisher of " + where_ + " failed (queue pair in error)";
        case PeerLoss::none:
          break;
      }
      return "the publisher of " + where_ + " has been silent for more than " +
             std::to_string(config_.publisher_timeout.count()) + " ms";
    case SubscriberState::closed: return "closed";
    default: return {};
  }
}

SubscriberCounters RcSubscriber::counters() const noexcept {
  SubscriberCounters c;
  if (is_memory_mode(mode_)) {
    c.received = reader_.received();
    c.lost = reader_.lost();
    c.laps = reader_.laps();
    c.skips = reader_.skips();
  } else {
    c.received = received_;
    c.lost = lost_;
    c.laps = capacity_ != 0 ? (lost_ + capacity_ - 1) / capacity_ : 0;  // whole rings, as RingReader
    c.skips = skips_;
  }
  if (delivery_ != nullptr) {
    c.from_table = delivery_->entries_delivered();
    c.conflations = delivery_->conflations();
    c.table_abandoned = delivery_->abandoned();
  }
  return c;
}

std::uint64_t RcSubscriber::next_sequence() const noexcept {
  return is_memory_mode(mode_) ? reader_.next_seq() : next_;
}

ibv_wc_status RcSubscriber::probe_table(bool write, std::uint64_t offset) {
  if (closed_ || !conn_ || !conn_->table_buffer_mr) return IBV_WC_GENERAL_ERR;
  auto* local = static_cast<std::uint64_t*>(conn_->table_buffer.data());
  local[0] = ~std::uint64_t{0};
  return rdma::probe_table(conn_->qp->get(), conn_->send_cq->get(), local, conn_->table_buffer_mr->lkey(), write,
                           table_addr_ + offset, table_rkey_, std::uint64_t{1} << 62);
}

void RcSubscriber::close() noexcept {
  if (closed_) return;
  closed_ = true;
  cm_thread_.request_stop();
  if (cm_thread_.joinable()) cm_thread_.join();
  if (conn_) {
    // Tell the publisher (it frees our connection on DISCONNECTED), then tear down.
    if (loss_.load(std::memory_order_acquire) == 0 && conn_->id) conn_->id->disconnect();
    conn_.reset();
  }
}

}  // namespace tickrail::rdma::rc
