// Control plane of the RC publisher: listening, the CM thread, connection setup and teardown.
#include "transport/rdma/rc/rc_publisher.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "tickrail/clock.hpp"
#include "core/enum_names.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "core/thread.hpp"
#include "transport/rdma/common/connection.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma::rc {
namespace {

bool same_host(const sockaddr* a, const sockaddr* b) noexcept {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr,
                       sizeof(in6_addr)) == 0;
  }
  return false;
}

std::uint32_t clamp_u32(std::uint64_t v, std::uint64_t lo, std::uint64_t hi) {
  return static_cast<std::uint32_t>(std::clamp(v, lo, hi));
}

}  // namespace

namespace {
// A link's state is shown by its name (subscriber rows of tickrail-stat).
constexpr tickrail::detail::EnumName<LinkState> kLinkStateNames[] = {{LinkState::free, "free"},
    {LinkState::claimed, "claimed"}, {LinkState::joining, "joining"},
    {LinkState::reserved, "reserved"}, {LinkState::established, "established"},
    {LinkState::active, "active"}, {LinkState::leaving, "leaving"}, {LinkState::retired, "retired"}};
constexpr tickrail::detail::EnumName<LinkEnd> kLinkEndNames[] = {{LinkEnd::none, "none"},
    {LinkEnd::disconnected, "disconnected"}, {LinkEnd::failed, "failed (work completion error)"},
    {LinkEnd::evicted, "evicted (slow consumer)"}, {LinkEnd::timed_out, "timed out while connecting"},
    {LinkEnd::closed, "publisher closed"}};
// Every state has its own entry: none prints "unknown" or another's word.
static_assert(tickrail::detail::names_every_value(kLinkStateNames));
static_assert(tickrail::detail::names_every_value(kLinkEndNames));
}  // namespace

const char* to_string(LinkState s) noexcept {
  return tickrail::detail::name_of(kLinkStateNames, s);
}
const char* to_string(LinkEnd e) noexcept { return tickrail::detail::name_of(kLinkEndNames, e); }

void Link::teardown() noexcept {
  // rc_pingpong's order: QP, CQ, MRs, PD; then the id.
  qp.reset();
  cq.reset();
  table_mr.reset();
  staging_mr.reset();
  source_mr.reset();
  credit_mr.reset();
  pd.reset();
  id.reset();
  signalled_seq.clear();
  peer.clear();
  req = ConnectRequest{};
  accepted = false;
  disconnected = false;
  max_inline = 0;
  block = LinkBlock{};
  first_seq.store(0, std::memory_order_relaxed);
  position.store(0, std::memory_order_relaxed);
  back_pressure.store(0, std::memory_order_relaxed);
  end.store(0, std::memory_order_relaxed);
}

RcPublisher::RcPublisher(const PublisherConfig& config, const detail::Placement& placement)
    : config_(config),
      capacity_(config.ring_capacity),
      staging_slots_(2 * std::uint64_t{config.ring_capacity}),
      signal_every_(clamp_u32(config.rdma.signal_every, 1, 1024)),
      sq_depth_(signal_every_ + 2 * kMaxWrPerPost + 8),
      min_capacity_(config.ring_capacity) {
  const RdmaConfig& r = config_.rdma;
  if (r.address.empty()) {
    throw Error(Errc::config_error,
                "rdma.address: an RC publisher needs the address to listen on (an address of "
                "an RDMA device's interface)");
  }
  if (r.heartbeat_interval.count() <= 0) {
    throw Error(Errc::config_error, "rdma.heartbeat_interval_ms: must be positive");
  }
  if (r.connect_timeout.count() <= 0) {
    throw Error(Errc::config_error, "rdma.connect_timeout_ms: must be positive");
  }
  const std::string what = "publish channel '" + config_.channel + "' over RC at " + r.address +
                           ":" + std::to_string(r.port);
  rdma::require_device(r.device, "rc");
  const auto parse_list = [](const std::vector<std::string>& in, const char* key) {
    std::vector<rdma::Address> out;
    for (const auto& a : in) {
      try {
        out.push_back(rdma::Address::parse(a, 0));
      } catch (const Error& e) {
        throw Error(Errc::config_error, std::string("rdma.") + key + ": '" + a + "': " + e.what());
      }
    }
    return out;
  };
  allow_ = parse_list(r.allow, "allow");
  wait_for_ = parse_list(r.wait_for, "wait_for");
  terms_ = ServeTerms{config_.channel, channel_hash(config_.channel), token_hash(r.token),
                      capacity_, {}};
  (void)Clock::instance();  // calibrate before the first publish, not during it
  heartbeat_cycles_ = std::max<std::uint64_t>(
      1, Clock::instance().ns_to_cycles(static_cast<double>(
             std::chrono::duration_cast<std::chrono::nanoseconds>(r.heartbeat_interval).count())));

  staging_ = MappedRegion(2 * staging_slots_ * sizeof(Slot));
  staging_.prefault();
  if (config_.lock_memory && ::mlock(staging_.data(), staging_.size()) != 0) {
    throw Error(Errc::locked_memory, what + ": lock the " + std::to_string(staging_.size()) +
                                         "-byte staging ring: " + std::strerror(errno) + "; " +
                                         rdma::locked_memory_advice(staging_.size()));
  }

  if (config_.state.enabled) {
    // Registered per connection that asks for it (setup_link).
    table_ = rdma::TableRegion(config_.state, config_.lock_memory, what);
    terms_.table = table_.geometry();
  }

  try {
    listener_.emplace(channel_, RDMA_PS_TCP);
    listener_->bind(rdma::Address::parse(r.address, r.port));
  } catch (const Error& e) {
    throw Error(e.code(), what + ": " + e.what());
  }
  rdma::check_bound_device(*listener_, r.device, what + ": address " + r.address);
  const std::string dev = rdma::device_name(listener_->verbs());
  try {
    const ibv_device_attr attr = rdma::query_device(listener_->verbs());
    if (attr.max_qp_wr > 0 && sq_depth_ > static_cast<std::uint32_t>(attr.max_qp_wr)) {
      throw Error(Errc::unsupported, "device " + dev + " allows " +
                                         std::to_string(attr.max_qp_wr) +
                                         " work requests per queue, tickrail needs " +
                                         std::to_string(sq_depth_) + " (lower rdma.signal_every)");
    }
    listener_->listen(static_cast<int>(kMaxSubscribers));
  } catch (const Error& e) {
    throw Error(e.code(), what + ": " + e.what());
  }
  config_.rdma.port = listener_->local_port();
  where_ = r.address + ":" + std::to_string(config_.rdma.port) + " on " + dev;
  cm_thread_ = detail::start_thread("tr-rc-cm", placement, [this](std::stop_token s) { cm_loop(s); });
  logger()->info("publisher: channel '{}' over RC, listening on {} (rings up to {} slots, "
                 "staging {} slots, signal every {} WRs)",
                 config_.channel, where_, capacity_, staging_slots_, signal_every_);
}

RcPublisher::~RcPublisher() { close(); }

// --- CM thread ---

void RcPublisher::cm_loop(std::stop_token stop) noexcept {
  const detail::StopSignal stopped(stop);
  while (!stop.stop_requested()) {
    std::array<pollfd, 2> fds{{{channel_.fd(), POLLIN, 0}, {stopped.fd(), POLLIN, 0}}};
    // Without the stop signal (no eventfd), the period bounds how long close() waits.
    const auto period = stopped.fd() >= 0 ? wait_period() : std::min(wait_period(), config_.conductor_period);
    (void)::poll(fds.data(), fds.size(), static_cast<int>(period.count()));
    wakeups_.tick();
    // Links first: one the data path retired while this thread slept is freed before a
    // connection request that needs its place is taken for a full house.
    check_links();
    try {
      while (auto ev = channel_.try_next()) on_event(std::move(*ev));
    } catch (const std::exception& e) {
      logger()->error("publisher '{}': rdma_cm event: {}", config_.channel, e.what());
    }
    check_links();
  }
}

// How long the CM thread may wait for an rdma_cm event before it looks at the links again. While
// a connection is being set up or torn down, the data path's moves are picked up within a
// millisecond, and a deadline or a data path that lets a leaving link go within a period. When
// every link is free or serving, nothing is due but events: the thread then wakes up only for
// those (a stop too), or after kIdleWait to pick up a link the data path retired on its own (an
// eviction, a failed completion), so that it does not wake up beside busy-polling threads.
std::chrono::milliseconds RcPublisher::wait_period() const noexcept {
  bool pending = false;
  for (const Link& l : links_) {
    switch (static_cast<LinkState>(l.state.load(std::memory_order_acquire))) {
      case LinkState::joining:
      case LinkState::reserved:
      case LinkState::retired:
        return std::chrono::milliseconds(1);
      case LinkState::claimed:
      case LinkState::established:
      case LinkState::leaving:
        pending = true;
        break;
      case LinkState::free:
      case LinkState::active:
        break;
    }
  }
  return pending ? config_.conductor_period : kIdleWait;
}

Link* RcPublisher::find(const rdma_cm_id* id) noexcept {
  for (Link& l : links_) {
    if (l.id && l.id->get() == id) return &l;
  }
  return nullptr;
}

void RcPublisher::on_event(rdma::CmEvent ev) {
  const rdma_cm_event_type type = ev.type();
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    on_connect_request(std::move(ev));
    return;
  }
  if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
    // Every id on the device must go: the links are handed to the data path to retire.
    device_lost_.store(true, std::memory_order_relaxed);
    logger()->error("publisher '{}': RDMA device of {} removed; dropping every subscriber",
                    config_.channel, where_);
    for (Link& l : links_) to_leaving(l, LinkEnd::failed);
    return;
  }
  Link* link = find(ev.id());
  if (link == nullptr) return;  // an event of a connection already torn down, or the listener's
  switch (type) {
    case RDMA_CM_EVENT_ESTABLISHED:
      if (cas(link->state, LinkState::reserved, LinkState::established)) {
        generation_.fetch_add(1, std::memory_order_acq_rel);
        logger()->info("publisher '{}': subscriber {} connected ({}, {} slots, {})",
                       config_.channel, link->peer,
                       to_string(static_cast<SlowConsumerPolicy>(link->req.policy)),
                       std::uint64_t{1} << link->req.capacity_log2,
                       to_string(static_cast<WriteMode>(link->req.mode)));
      }
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      link->disconnected = true;
      to_leaving(*link, LinkEnd::disconnected);
      break;
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
      link->disconnected = true;
      to_leaving(*link, LinkEnd::failed);
      break;
    default:
      break;  // TIMEWAIT_EXIT and the like: nothing to do
  }
}

bool RcPublisher::listed(const std::vector<rdma::Address>& list, const sockaddr* peer) noexcept {
  if (list.empty()) return true;
  return std::any_of(list.begin(), list.end(),
                     [peer](const rdma::Address& a) { return same_host(a.get(), peer); });
}

void RcPublisher::on_connect_request(rdma::CmEvent ev) {
  rdma_cm_id* raw = ev.id();
  const auto data = ev.private_data();
  std::array<std::byte, kReqPrivateDataMax> bytes{};
  std::memcpy(bytes.data(), data.data(), std::min(data.size(), bytes.size()));
  const std::size_t len = std::min(data.size(), bytes.size());
  const std::string peer = rdma::Address::str(rdma_get_peer_addr(raw));
  // Acknowledge before adopting: rdma_destroy_id waits for its events to be acknowledged.
  ev = rdma::CmEvent(nullptr);
  rdma::CmId id = rdma::CmId::adopt(raw);

  const auto req = decode_request(std::span(bytes.data(), len));
  if (const auto note = refusal(req, data.size(), peer, rdma_get_peer_addr(raw))) {
    refuse(id, peer, *note);
    return;
  }
  Link* slot = claim_link();
  if (slot == nullptr) {
    refuse(id, peer, make_reject(RejectReason::no_capacity, config_.max_subscribers,
                                 "all " + std::to_string(config_.max_subscribers) +
                                     " subscriber places are taken (max_subscribers)"));
    return;
  }
  try {
    const std::lock_guard lock(status_mutex_);
    setup_link(*slot, std::move(id), *req, peer);
  } catch (const std::exception& e) {
    logger()->error("publisher '{}': set up subscriber {}: {}", config_.channel, peer, e.what());
    abandon_link(*slot, e);
    return;
  }
  slot->state.store(st(LinkState::joining), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

// Why a connect request (`req`: its `size` bytes of private data, decoded) is refused, in the
// order the checks are made, or nullopt when it may be served.
std::optional<RejectNote> RcPublisher::refusal(const std::optional<ConnectRequest>& req,
                                               std::size_t size, const std::string& peer,
                                               const sockaddr* peer_addr) const {
  if (!req) {
    return make_reject(RejectReason::malformed, 0,
                       "not a tickrail RC connect request (" + std::to_string(size) +
                           " bytes of private data)");
  }
  if (close_guard_.closing()) {
    return make_reject(RejectReason::closing, 0, "the publisher is closing");
  }
  if (auto verdict = judge(*req, terms_)) return verdict;
  if (!listed(allow_, peer_addr)) {
    return make_reject(RejectReason::not_allowed, 0,
                       "address " + peer + " is not in the publisher's allow-list");
  }
  // It could make publish() wait for it, and with it every other subscriber. The advice first:
  // the note's text is short.
  if (!never_waits(static_cast<SlowConsumerPolicy>(req->policy)) && !listed(wait_for_, peer_addr)) {
    return make_reject(RejectReason::not_allowed, 0,
                       std::string("policy ") + to_string(static_cast<SlowConsumerPolicy>(req->policy)) +
                           " holds the publisher back, which only rdma.wait_for may; use drop or "
                           "conflate (address " + peer + ")");
  }
  return std::nullopt;
}

void RcPublisher::refuse(rdma::CmId& id, const std::string& peer, const RejectNote& note) {
  logger()->warn("publisher '{}': rejected subscriber {}: {}: {}", config_.channel, peer,
                 to_string(static_cast<RejectReason>(note.reason)), note.text);
  try {
    id.reject(std::as_bytes(std::span(&note, 1)));
  } catch (const std::exception& e) {
    logger()->warn("publisher '{}': {}", config_.channel, e.what());
  }
}

// A free link, claimed (free -> claimed) for a new connection; nullptr when all are taken.
Link* RcPublisher::claim_link() noexcept {
  for (std::uint32_t i = 0; i < config_.max_subscribers; ++i) {
    if (cas(links_[i].state, LinkState::free, LinkState::claimed)) return &links_[i];
  }
  return nullptr;
}

// A claimed link whose setup threw: the subscriber is told why (through the id, once the link
// holds it), then everything is freed.
void RcPublisher::abandon_link(Link& link, const std::exception& e) {
  if (link.id) {
    const auto* err = dynamic_cast<const Error*>(&e);
    const RejectNote note = make_reject(
        RejectReason::resources, 0,
        err != nullptr && err->code() == Errc::locked_memory
            ? "its locked-memory limit is too small to register this connection's " +
                  std::to_string(2 * staging_slots_ * sizeof(Slot) + sizeof(LinkBlock)) +
                  " bytes (see its log)"
            : std::string(e.what()));
    try {
      link.id->reject(std::as_bytes(std::span(&note, 1)));
    } catch (const std::exception&) {
    }
  }
  {
    const std::lock_guard lock(status_mutex_);
    link.teardown();
  }
  link.state.store(st(LinkState::free), std::memory_order_release);
}

void RcPublisher::setup_link(Link& link, rdma::CmId id, const ConnectRequest& req,
                             const std::string& peer) {
  link.id.emplace(std::move(id));
  link.req = req;
  link.peer = peer;
  link.deadline = std::chrono::steady_clock::now() + config_.rdma.connect_timeout;
  ibv_context* ctx = link.id->verbs();
  // A protection domain per connection: this subscriber's rkeys are valid on its QP only, and
  // the credit line below can be written through this connection only.
  link.pd.emplace(ctx);
  link.credit_mr.emplace(*link.pd, link.block.credit, sizeof link.block.credit,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  link.source_mr.emplace(*link.pd, &link.block.heartbeat_source,
                         sizeof(LinkBlock) - offsetof(LinkBlock, heartbeat_source),
                         IBV_ACCESS_LOCAL_WRITE);
  link.staging_mr.emplace(*link.pd, staging_.data(), 2 * staging_slots_ * sizeof(Slot),
                          IBV_ACCESS_LOCAL_WRITE);
  if ((req.flags & kWantsTable) != 0 && table_.on()) {
    // Remote read, and nothing else: not even local write (our CPU writes it, not the NIC).
    link.table_mr.emplace(*link.pd, table_.data(), table_.bytes(), IBV_ACCESS_REMOTE_READ);
  }
  link.cq.emplace(ctx, static_cast<int>(sq_depth_));
  link.signalled_seq.assign(std::bit_ceil(std::uint64_t{sq_depth_}), 0);

  ibv_qp_init_attr qa{};
  qa.send_cq = link.cq->get();
  qa.recv_cq = link.cq->get();
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 0;  // selective signalling
  qa.cap.max_send_wr = sq_depth_;
  qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = sizeof(Slot);
  // A device without inline data: every WRITE then reads the staging ring.
  link.qp.emplace(rdma::create_qp(*link.id, link.pd->get(), qa, sizeof(Slot)));
  link.max_inline = qa.cap.max_inline_data;
  link.position.store(0, std::memory_order_relaxed);
  link.end.store(0, std::memory_order_relaxed);
}

void RcPublisher::accept(Link& link) {
  AcceptReply reply{};
  reply.magic = kMagic;
  reply.version = kVersion;
  reply.first_seq = link.first_seq.load(std::memory_order_acquire);
  reply.credit_addr = reinterpret_cast<std::uintptr_t>(link.block.credit);
  reply.credit_rkey = link.credit_mr->rkey();
  reply.heartbeat_ms = static_cast<std::uint32_t>(config_.rdma.heartbeat_interval.count());
  if (link.table_mr) {
    reply.table_addr = reinterpret_cast<std::uintptr_t>(table_.data());
    reply.table_rkey = link.table_mr->rkey();
    reply.table_capacity = table_.geometry().capacity;
    reply.table_classes = table_.geometry().classes;
  }
  // The subscriber's first credit is its first sequence: the data path reads this word.
  std::atomic_ref<std::uint64_t>(link.block.credit[0]).store(reply.first_seq,
                                                              std::memory_order_relaxed);
  // (Its RNR retries matter in CQ polling: a subscriber short of receives is waited for.)
  rdma_conn_param param = rdma::connection_param(std::as_bytes(std::span(&reply, 1)), 1, 1);
  link.accepted = true;
  link.id->accept(param);
}

void RcPublisher::to_leaving(Link& link, LinkEnd why) noexcept {
  std::uint32_t s = link.state.load(std::memory_order_acquire);
  for (;;) {
    const auto state = static_cast<LinkState>(s);
    if (state != LinkState::joining && state != LinkState::reserved &&
        state != LinkState::established && state != LinkState::active) {
      return;
    }
    std::uint32_t expected_end = 0;
    link.end.compare_exchange_strong(expected_end, static_cast<std::uint32_t>(why),
                                     std::memory_order_relaxed);
    if (link.state.compare_exchange_weak(s, st(LinkState::leaving), std::memory_order_acq_rel)) {
      generation_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
  }
}

void RcPublisher::check_links() noexcept {
  const auto now = std::chrono::steady_clock::now();
  for (Link& l : links_) {
    const auto s = static_cast<LinkState>(l.state.load(std::memory_order_acquire));
    switch (s) {
      case LinkState::joining:
        // The publishing thread never took it (no publish()/service() calls): the data path
        // has not touched it, so it can go straight away.
        if (now > l.deadline && cas(l.state, LinkState::joining, LinkState::retired)) {
          l.end.store(static_cast<std::uint32_t>(LinkEnd::timed_out), std::memory_order_relaxed);
        }
        break;
      case LinkState::reserved:
        if (!l.accepted) {
          try {
            accept(l);
          } catch (const std::exception& e) {
            logger()->warn("publisher '{}': accept subscriber {}: {}", config_.channel, l.peer,
                           e.what());
            to_leaving(l, LinkEnd::failed);
          }
        } else if (now > l.deadline) {
          to_leaving(l, LinkEnd::timed_out);
        }
        break;
      case LinkState::established:
        if (now > l.deadline) to_leaving(l, LinkEnd::timed_out);
        break;
      case LinkState::retired: {
        const auto why = static_cast<LinkEnd>(l.end.load(std::memory_order_relaxed));
        if (!l.accepted) {
          const RejectNote note = make_reject(
              RejectReason::not_serving, 0,
              "the publisher did not take the subscriber within connect_timeout (its "
              "publishing thread must call publish() or service())");
          try {
            l.id->reject(std::as_bytes(std::span(&note, 1)));
          } catch (const std::exception&) {
          }
        } else if (!l.disconnected) {
          l.id->disconnect();
        }
        logger()->info("publisher '{}': subscriber {} gone: {}; connection freed", config_.channel,
                       l.peer, to_string(why));
        {
          const std::lock_guard lock(status_mutex_);
          l.teardown();
        }
        l.state.store(st(LinkState::free), std::memory_order_release);
        break;
      }
      default:
        break;
    }
  }
}

// --- close ---

void RcPublisher::close() noexcept {
  // Waits for a publish() in progress; from here on the data path is ours.
  if (!close_guard_.close()) return;
  notify_and_drain();
  for (std::uint32_t i = 0; i < n_active_; ++i) {
    const Active& a = active_[i];
    if (!backlogged(a)) continue;
    logger()->warn("publisher: channel '{}': closed with {} ticks published but not written to subscriber {} "
                   "(its send queue stayed full for 2 s): it does not receive them",
                   config_.channel, next_seq_ - a.sent, a.link->peer);
  }
  cm_thread_.request_stop();
  if (cm_thread_.joinable()) cm_thread_.join();
  for (Link& l : links_) {
    const auto s = static_cast<LinkState>(l.state.load(std::memory_order_acquire));
    if (s == LinkState::free) continue;
    if (l.accepted && !l.disconnected && l.id) l.id->disconnect();
    const std::lock_guard lock(status_mutex_);
    l.teardown();
    l.state.store(st(LinkState::free), std::memory_order_release);
  }
  n_active_ = 0;
  n_pending_ = 0;
  n_active_snapshot_.store(0, std::memory_order_relaxed);
  listener_.reset();
  logger()->info("publisher: channel '{}' closed after {} ticks", config_.channel,
                 counters_.published);
}

std::vector<SubscriberStatus> RcPublisher::subscribers() const {
  std::vector<SubscriberStatus> out;
  const std::lock_guard lock(status_mutex_);
  for (std::uint32_t i = 0; i < config_.max_subscribers; ++i) {
    const Link& l = links_[i];
    const auto s = static_cast<LinkState>(l.state.load(std::memory_order_acquire));
    if (s == LinkState::free || s == LinkState::claimed) continue;
    SubscriberStatus status;
    status.slot = i;
    status.peer = l.peer;
    status.policy = static_cast<SlowConsumerPolicy>(l.req.policy);
    status.state = to_string(s);
    // The data path reads the subscriber's credit only when it needs room: read it here too,
    // not to report a subscriber a credit interval behind where it is. Clamped as there.
    const std::uint64_t cached = l.position.load(std::memory_order_relaxed);
    const std::uint64_t credit = load_word(l.block.credit[0]);
    // After the credit: a credit that came in between is not beyond what was published.
    const std::uint64_t published = published_seq_.load(std::memory_order_acquire);
    status.position = credit > cached && credit <= published ? credit : cached;
    status.lag = published > status.position && status.position != 0 ? published - status.position
                                                                     : 0;
    status.back_pressure = l.back_pressure.load(std::memory_order_relaxed);
    out.push_back(std::move(status));
  }
  return out;
}

}  // namespace tickrail::rdma::rc
