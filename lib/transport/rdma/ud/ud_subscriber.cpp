// Control plane of the UD subscriber: configuration checks, joins, receive buffers posted once,
// the conductor that opens recovery links, status in words, teardown.
#include "transport/rdma/ud/ud_subscriber.hpp"

#include <arpa/inet.h>
#include <poll.h>

#include <bit>
#include <cstring>

#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "transport/rdma/ud/recovery_protocol.hpp"
#include "transport/rdma/ud/settings.hpp"
#include "transport/rdma/verbs_error.hpp"

namespace tickrail::rdma::ud {
namespace {

constexpr std::uint32_t kConnectAttempts = 3;  // in a row, before recovery is unavailable

std::string local_address(const RdmaConfig& r) {
  Context ctx = r.device.empty() ? Context::open_first() : Context::open(r.device);
  return device_ipv4(ctx, 1);
}

std::vector<Address> parse_groups(const RdmaConfig& r) {
  std::vector<Address> addrs;
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    addrs.push_back(parse_group(r.groups[i], "rdma.groups[" + std::to_string(i) + "]"));
  }
  return addrs;
}

}  // namespace

UdSubscriber::UdSubscriber(const SubscriberConfig& config, const detail::Placement& placement)
    : config_(validated(config)) {
  const RdmaConfig& r = config_.rdma;
  const Clock& clock = Clock::instance();
  require_device(r.device, "ud");
  // Parse every group first: a bad one fails before anything is joined.
  const std::vector<Address> addrs = parse_groups(r);
  if (!r.address.empty()) configured_endpoint_ = Address::parse(r.address, r.port);
  const Address src = Address::parse(local_address(r), 0);

  resolve_groups(addrs, src);
  const std::uint32_t nbufs = create_receive_cq();
  for (auto& g : groups_) {
    post_receive_buffers(*g, nbufs);
    join_group(*g);
  }

  publisher_timeout_cycles_ = clock.ns_to_cycles(static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(config_.publisher_timeout).count()));
  // After a stop, three heartbeat intervals (ours: the publisher's is not told).
  const std::uint64_t grace = clock.ns_to_cycles(3e6 * static_cast<double>(
      std::min<std::int64_t>(config_.rdma.heartbeat_interval.count(), 60'000)));
  for (auto& g : groups_) g->silence = SilenceWatch(publisher_timeout_cycles_, grace, Clock::now());
  retry_cycles_ = clock.ns_to_cycles(1e9);
  recovery_delay_cycles_ = clock.ns_to_cycles(static_cast<double>(config_.rdma.recovery_delay.count()) * 1e3);
  conductor_ = detail::start_thread("tr-ud-cond", placement, [this](std::stop_token st) { conductor_loop(st); });

  std::string names;
  for (const auto& g : groups_) names += (names.empty() ? "" : ", ") + g->text;
  logger()->info("UD subscriber: joined {} from {} on {} (MTU {}, {} receive buffers per group, "
                 "reorder window {} ticks)",
                 names, src.str(), device_name(groups_.front()->id.verbs()), mtu_, nbufs,
                 window_ticks_);
  if (wants_table()) wait_for_table();
}

// start = snapshot and policy = conflate read the publisher's table over the recovery link, so
// the publisher must be there, and keep one, when we are made (as over RC, where the connect
// says so): wait, bounded, for its first datagram and the link, then start the delivery. What
// arrives meanwhile waits in the reorder window (or, beyond it, in the publisher's history).
void UdSubscriber::wait_for_table() {
  const std::string what = "UD subscriber '" + config_.channel + "': " +
                           (config_.start == StartMode::snapshot ? "start = snapshot" : "policy = conflate");
  Group& g = *groups_.front();
  const auto wait = config_.publisher_timeout + config_.rdma.connect_timeout * kConnectAttempts;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    take_completions();
    const RecoveryState s = g.recovery_state.load(std::memory_order_acquire);
    if (g.tracker.started() && s == RecoveryState::ready) break;
    if (g.tracker.started() && s == RecoveryState::idle) {
      throw Error(Errc::unsupported, what + " reads the publisher's table over its recovery connection, and the "
                                            "publisher of group " + g.text + " advertises none (nor is rdma.address set)");
    }
    if (s == RecoveryState::failed) {
      std::lock_guard lock(mutex_);
      throw Error(Errc::peer_gone, what + " needs the publisher's last-value table: " + g.link_error);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(Errc::timed_out,
                  what + " needs the publisher's last-value table, and " +
                      (g.tracker.started() ? "no recovery link to the publisher of group " + g.text
                                           : "no publisher was heard on group " + g.text) +
                      " within " + std::to_string(wait.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto& table = g.recovery->table();
  if (!table || g.recovery->table_reader() == nullptr) {
    throw Error(Errc::unsupported, what + " needs the channel's last-value table, and the publisher of group " +
                                       g.text + " keeps none ([state] enabled = false)");
  }
  delivery_ = std::make_unique<detail::TableDelivery>(*table, table_source_, publisher_timeout_cycles_);
  g.tracker.stop_at_loss(config_.policy == SlowConsumerPolicy::conflate);
  if (config_.start == StartMode::snapshot) delivery_->begin(detail::TableDelivery::Why::snapshot, feed_);
  logger()->info("{}: the publisher's table holds {} instruments; {}", what, table->capacity,
                 config_.start == StartMode::snapshot ? "snapshot started" : "ready to conflate");
}

// One Group per address, each id resolved from `src`: all on one device.
void UdSubscriber::resolve_groups(const std::vector<Address>& addrs, const Address& src) {
  const RdmaConfig& r = config_.rdma;
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    auto g = std::make_unique<Group>();
    g->index = static_cast<std::uint32_t>(i);
    g->text = r.groups[i];
    g->address = addrs[i];
    g->id.resolve_addr(&src, g->address, r.connect_timeout);
    (void)g->channel.expect(RDMA_CM_EVENT_ADDR_RESOLVED, r.connect_timeout + std::chrono::seconds(1),
                            "resolve multicast group " + g->address.str() + " from " + src.str());
    check_bound_device(g->id, r.device, "group " + g->text, Errc::invalid_argument);
    if (!groups_.empty() && g->id.verbs() != groups_.front()->id.verbs()) {
      throw Error(Errc::invalid_argument, "UD subscriber: group " + g->text + " is reached through " +
                                              device_name(g->id.verbs()) + ", group " +
                                              groups_.front()->text + " through " +
                                              device_name(groups_.front()->id.verbs()) +
                                              ": one device per subscriber");
    }
    groups_.push_back(std::move(g));
  }
}

// The PD, the geometry (MTU, buffer stride, reorder window, staging) and the one receive CQ of
// every group; returns the receive buffers each group gets.
std::uint32_t UdSubscriber::create_receive_cq() {
  const RdmaConfig& r = config_.rdma;
  ibv_context* verbs = groups_.front()->id.verbs();
  pd_.emplace(verbs);
  mtu_ = active_mtu(groups_.front()->id.get());
  (void)checked_ticks_per_datagram(1, mtu_, "device " + device_name(verbs) + " port 1");
  buf_stride_ = static_cast<std::uint32_t>(kHeaderBytes) + mtu_;  // GRH in the first line's tail
  window_ticks_ = r.reorder_buffer;
  // The longest read: 16 KiB, 16 packets at MTU 1024, so that a lossy network still
  // completes most reads at the first try.
  staging_ticks_ = std::min<std::uint32_t>(window_ticks_, 256);
  recv_batch_ = std::clamp<std::uint32_t>(r.recv_batch, 1, r.recv_buffers / 2);
  const ibv_device_attr dev = query_device(verbs);
  // Every posted receive may complete before a poll: the one CQ must hold them all, or it
  // overflows (and the QPs go to error). So the buffers per group fit the device's CQ too.
  const std::uint64_t cq_room = static_cast<std::uint64_t>(std::max(dev.max_cqe, 32)) - 16;
  const auto nbufs = static_cast<std::uint32_t>(std::min<std::uint64_t>(
      {r.recv_buffers, static_cast<std::uint64_t>(dev.max_qp_wr), cq_room / groups_.size()}));
  if (nbufs < r.recv_buffers) {
    logger()->warn("UD subscriber: rdma.recv_buffers {} is more than device {} can complete into one "
                   "queue for {} group(s): {} per group",
                   r.recv_buffers, device_name(verbs), groups_.size(), nbufs);
  }
  recv_cq_.emplace(verbs, static_cast<int>(std::uint64_t{nbufs} * groups_.size() + 16));
  return nbufs;
}

// The group's registered buffers and UD QP, with every receive work request built once and
// posted.
void UdSubscriber::post_receive_buffers(Group& g, std::uint32_t nbufs) {
  g.nbufs = nbufs;
  const std::size_t bytes = std::size_t{nbufs} * buf_stride_;
  g.bufs_mem = MappedRegion(bytes);
  g.bufs_mem.prefault();
  g.bufs_mr.emplace(*pd_, g.bufs_mem.data(), bytes, IBV_ACCESS_LOCAL_WRITE);

  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_UD;
  a.send_cq = recv_cq_->get();
  a.recv_cq = recv_cq_->get();
  a.cap.max_send_wr = 1;
  a.cap.max_recv_wr = nbufs;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  g.qp.emplace(g.id, pd_->get(), a);

  // Every receive work request is built once; a batch repost only relinks its last one.
  g.wrs = std::make_unique<ibv_recv_wr[]>(nbufs);
  g.sges = std::make_unique<ibv_sge[]>(nbufs);
  auto* base = static_cast<std::byte*>(g.bufs_mem.data());
  for (std::uint32_t i = 0; i < nbufs; ++i) {
    // The 40-byte GRH fills the end of the buffer's first cache line: the datagram header
    // starts on the second, and its ticks stay line-aligned.
    g.sges[i].addr = reinterpret_cast<std::uintptr_t>(base + std::size_t{i} * buf_stride_ +
                                                      kHeaderBytes - kGrhBytes);
    g.sges[i].length = static_cast<std::uint32_t>(kGrhBytes) + mtu_;
    g.sges[i].lkey = g.bufs_mr->lkey();
    g.wrs[i].wr_id = (std::uint64_t{g.index} << 32) | i;
    g.wrs[i].sg_list = &g.sges[i];
    g.wrs[i].num_sge = 1;
    g.wrs[i].next = i + 1 < nbufs ? &g.wrs[i + 1] : nullptr;
  }
  g.repost_from = 0;
  g.to_repost = nbufs;
  repost(g);
  if (g.to_repost != 0) {
    throw Error(Errc::unsupported, "UD subscriber: posting " + std::to_string(nbufs) +
                                       " receive buffers on group " + g.text + " failed");
  }
}

// The group's reorder window, then the join itself.
void UdSubscriber::join_group(Group& g) {
  g.window_mem = MappedRegion(std::size_t{window_ticks_} * kTickBytes);
  g.window_mem.prefault();
  g.tracker = SequenceTracker(static_cast<Tick*>(g.window_mem.data()), window_ticks_);

  g.membership = std::make_unique<Membership>(g.id, g.channel, g.address, Membership::Kind::full,
                                              config_.rdma.connect_timeout);
}

UdSubscriber::~UdSubscriber() { close(); }

void UdSubscriber::close() noexcept {
  if (closing_.exchange(true)) return;
  conductor_.request_stop();
  if (conductor_.joinable()) conductor_.join();
}

void UdSubscriber::teardown() noexcept {
  // The conductor is stopped by then: by close() in the destructor, or never started when a
  // constructor throws (conductor_, declared after teardown_, is already gone: never touch it).
  // Leave the groups and destroy the QPs before their CQ and PD, the ids after.
  for (auto& g : groups_) {
    g->recovery.reset();
    g->membership.reset();
    g->qp.reset();
    g->bufs_mr.reset();
  }
  recv_cq_.reset();
  pd_.reset();
}

void UdSubscriber::conductor_loop(std::stop_token st) {
  std::vector<pollfd> fds;
  while (!st.stop_requested()) {
    // Sleep in poll() on the rdma_cm channels: woken by their events at once, and every 10 ms
    // to pick up the polling thread's link requests (which may not make system calls to wake
    // us). Few wake-ups: on a shared core each one delays a spinning poller.
    fds.clear();
    for (auto& g : groups_) {
      fds.push_back({g->channel.fd(), POLLIN, 0});
      if (g->recovery_state.load(std::memory_order_acquire) == RecoveryState::ready) {
        fds.push_back({g->recovery->event_fd(), POLLIN, 0});
      }
    }
    (void)::poll(fds.data(), fds.size(), 10);
    wakeups_.tick();
    for (auto& g : groups_) {
      try {
        serve_link(*g);
        // Membership events after the join (an address change, a port going down): noted.
        pollfd pfd{g->channel.fd(), POLLIN, 0};
        if (::poll(&pfd, 1, 0) > 0) {
          CmEvent ev = g->channel.next(std::chrono::milliseconds(10), "group " + g->text);
          logger()->warn("UD subscriber: group {}: {} (status {})", g->text,
                         rdma_event_str(ev.type()), ev.status());
        }
      } catch (const std::exception& e) {
        logger()->warn("UD subscriber: group {}: {}", g->text, e.what());
      }
    }
  }
}

void UdSubscriber::serve_link(Group& g) {
  RecoveryState s = g.recovery_state.load(std::memory_order_acquire);
  if (s == RecoveryState::broken) {
    logger()->info("UD subscriber: group {}: recovery link to {} broken; reconnecting", g.text,
                   g.recovery ? g.recovery->describe() : std::string("?"));
    g.recovery.reset();
    g.recovery_state.store(RecoveryState::wanted, std::memory_order_release);
    s = RecoveryState::wanted;
  }
  if (s == RecoveryState::ready) {
    g.recovery->check_events();
    return;
  }
  if (s != RecoveryState::wanted) return;

  RecoveryLink::Params p;
  if (configured_endpoint_) {
    p.publisher = *configured_endpoint_;
  } else {
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(g.ep_family == 6 ? AF_INET6 : AF_INET, g.ep_addr, text, sizeof text);
    p.publisher = Address::parse(text, g.ep_port);
  }
  p.token = config_.rdma.token;
  p.session = g.session.load(std::memory_order_relaxed);
  p.staging_ticks = staging_ticks_;
  p.timeout = config_.rdma.connect_timeout;
  p.device = config_.rdma.device;
  p.want_table = wants_table();
  try {
    g.recovery = std::make_unique<RecoveryLink>(p);
    if (delivery_ != nullptr && g.recovery->table() != delivery_->geometry()) {
      throw Error(Errc::geometry_mismatch, "the publisher's table changed geometry");
    }
    logger()->info("UD subscriber: group {}: recovery link {} (history {} ticks)", g.text,
                   g.recovery->describe(), g.recovery->history());
    g.connect_failures = 0;
    g.recovery_state.store(RecoveryState::ready, std::memory_order_release);
  } catch (const std::exception& e) {
    // rdma_cm's connection messages are datagrams: on a lossy fabric one can go missing and the
    // attempt time out. Try again at once a few times, holes waiting, before declaring
    // recovery unavailable (then holes are given up and the link retried later).
    if (++g.connect_failures < kConnectAttempts) {
      logger()->warn("UD subscriber: group {}: recovery from {}: {}; trying again ({} of {})",
                     g.text, p.publisher.str(), e.what(), g.connect_failures + 1,
                     kConnectAttempts);
      return;  // still `wanted`
    }
    g.connect_failures = 0;
    {
      std::lock_guard lock(mutex_);
      g.link_error = std::string("recovery from ") + p.publisher.str() + ": " + e.what();
    }
    logger()->warn("UD subscriber: group {}: recovery from {} unavailable: {}", g.text,
                   p.publisher.str(), e.what());
    g.recovery.reset();
    g.recovery_state.store(RecoveryState::failed, std::memory_order_release);
  }
}

SubscriberState UdSubscriber::state() const noexcept {
  if (closing_.load(std::memory_order_relaxed)) return SubscriberState::closed;
  bool all_heard = true;
  const std::uint64_t now = Clock::now();
  for (const auto& g : groups_) {
    if (g->ended.load(std::memory_order_acquire)) return SubscriberState::publisher_gone;
    const std::uint64_t last = g->last_heard.load(std::memory_order_relaxed);
    if (last == 0) {
      all_heard = false;
    } else if (g->silence.silent(last, now)) {
      return SubscriberState::publisher_gone;
    }
  }
  return all_heard ? SubscriberState::active : SubscriberState::connecting;
}

std::string UdSubscriber::reason() const {
  std::string out;
  const Clock& clock = Clock::instance();
  const std::uint64_t now = Clock::now();
  for (const auto& g : groups_) {
    std::string why;
    char session[24];
    std::snprintf(session, sizeof session, "%016llx", static_cast<unsigned long long>(g->session.load(std::memory_order_relaxed)));
    const std::uint64_t last = g->last_heard.load(std::memory_order_relaxed);
    if (g->ended.load(std::memory_order_acquire)) {
      why = "publisher session " + std::string(session) + " on group " + g->text +
            " ended its stream";
    } else if (last != 0 && now > last && now - last > publisher_timeout_cycles_) {
      why = "publisher session " + std::string(session) + " on group " + g->text + " silent for " +
            std::to_string(static_cast<long long>(clock.to_ns(now - last) / 1e6)) +
            " ms (publisher_timeout " + std::to_string(config_.publisher_timeout.count()) + " ms)";
    }
    std::string link_error;
    {
      std::lock_guard lock(mutex_);
      link_error = g->link_error;
    }
    if (!link_error.empty() &&
        g->recovery_state.load(std::memory_order_acquire) == RecoveryState::failed) {
      why += (why.empty() ? "" : "; ") + link_error;
    }
    if (!why.empty()) out += (out.empty() ? "" : "; ") + why;
  }
  return out;
}

}  // namespace tickrail::rdma::ud
