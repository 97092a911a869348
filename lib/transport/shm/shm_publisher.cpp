// Control plane of the shared-memory publisher: memory, the channel socket, the conductor.
#include "transport/shm/shm_publisher.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "tickrail/memory.hpp"

namespace tickrail::shm {
namespace {

constexpr std::size_t kMaxKnocks = 64;                        // connections yet to say who they are
constexpr std::uint64_t kKnockTimeoutNs = 2'000'000'000ULL;   // ... and how long they may take
constexpr std::uint64_t kMaxDisconnectAfterNs = 3'600'000'000'000ULL;

void lock_pages(const Mapping& m, const std::string& what) {
  if (::mlock(m.get(), m.size()) != 0) {
    throw Error(Errc::locked_memory,
                "lock " + std::to_string(m.size()) + " bytes of " + what + ": " +
                    std::strerror(errno) + "; the locked-memory limit is " +
                    std::to_string(memlock_limit()) +
                    " bytes (raise it with `ulimit -l`, LimitMEMLOCK= in a systemd unit, or "
                    "/etc/security/limits.conf), or set lock_memory = false");
  }
}

void copy_text(Reply& r, const std::string& s) {
  const std::size_t n = std::min(s.size(), sizeof r.text - 1);
  std::memcpy(r.text, s.data(), n);
  r.text[n] = '\0';
}

}  // namespace

ShmPublisher::ShmPublisher(const PublisherConfig& config, const detail::Placement& where)
    : config_(config),
      allow_(Allow::resolve(config.allow_users, config.allow_groups,
                            static_cast<std::uint32_t>(::geteuid()), "publisher.allow_users",
                            "publisher.allow_groups")),
      wait_for_(Allow::resolve(config.wait_for_users, config.wait_for_groups,
                               static_cast<std::uint32_t>(::geteuid()), "publisher.wait_for_users",
                               "publisher.wait_for_groups")),
      capacity_(config.ring_capacity),
      mask_(config.ring_capacity - 1),
      max_subscribers_(config.max_subscribers) {
  validate_channel_name(config_.channel);
  if (!is_valid_ring_capacity(capacity_) || max_subscribers_ == 0 || max_subscribers_ > kMaxSubscribers) {
    throw Error(Errc::config_error, "ring_capacity " + std::to_string(capacity_) + ", max_subscribers " +
                                        std::to_string(max_subscribers_) + ": out of range");
  }
  (void)Clock::instance();  // calibrate before the first publish, not during it
  const std::string what = "channel '" + config_.channel + "'";
  // All memory first, reserved and locked: a shortage fails here, before the channel has a name.
  status_memory_ = create_shared("the status line of " + what, status_bytes(), true);
  status_ = new (status_memory_.map.get()) Status{};
  status_->next_seq.store(1, std::memory_order_relaxed);
  status_->table_next.store(1, std::memory_order_relaxed);
  status_->heartbeat_ns.store(monotonic_ns(), std::memory_order_relaxed);
  status_read_only_ = reopen_read_only(status_memory_.fd.get(), "the status line of " + what);
  if (const auto g = detail::TableGeometry::of(config_.state); g.capacity != 0) {
    const std::string table = "the last-value table of " + what + " (" +
                              std::to_string(g.capacity) + " instruments, " +
                              std::to_string(g.bytes()) + " bytes)";
    table_memory_ = create_shared(table, table_bytes(g.bytes()), true);
    table_read_only_ = reopen_read_only(table_memory_.fd.get(), table);
    if (config_.lock_memory) lock_pages(table_memory_.map, table);
    table_ = detail::LastValueWriter(static_cast<Slot*>(table_memory_.map.get()), g);
  }
  const std::size_t rb = ring_bytes(capacity_);
  rings_.reserve(max_subscribers_);
  for (std::uint32_t i = 0; i < max_subscribers_; ++i) {
    const std::string ring = "ring " + std::to_string(i) + " of " + what + " (" +
                             std::to_string(max_subscribers_) + " rings of " +
                             std::to_string(capacity_) + " slots, " + std::to_string(rb) +
                             " bytes each)";
    rings_.push_back(create_shared(ring, rb, true));
    rings_read_only_.push_back(reopen_read_only(rings_.back().fd.get(), ring));
    if (config_.lock_memory) lock_pages(rings_.back().map, ring);
  }
  if (config_.lock_memory) lock_pages(status_memory_.map, "the status line of " + what);
  lane_.generation = &generation_;
  lane_.rings = lane_rings_.data();
  lane_.stamp = config_.stamp_send_time;
  // prefetch_ahead is validated: at most 1024.
  lane_.prefetch = static_cast<std::uint16_t>(prefetch_distance(config_.prefetch_ahead, capacity_));
  lane_.mask = mask_;
  lane_.published_seq = &status_->next_seq;
  lane_.counters = &counters_;
  listener_ = listen_channel(config_.shm_dir, config_.channel);
  conductor_ = detail::start_thread("tr-shm-cond", where, [this](std::stop_token st) { conductor_loop(st); });
  logger()->info("publisher: channel '{}' at {} ({} subscribers x {} slots, {} bytes; may attach: {}; "
                 "may hold it back: {})",
                 config_.channel, listener_.path, max_subscribers_, capacity_,
                 rb * max_subscribers_, allow_.describe(), wait_for_.describe());
}

ShmPublisher::~ShmPublisher() { close(); }

void ShmPublisher::close() noexcept {
  if (closing_.exchange(true)) return;
  // Sends the next publish out of line, where closing_ is read.
  generation_.fetch_add(1, std::memory_order_acq_rel);
  conductor_.request_stop();
  if (conductor_.joinable()) conductor_.join();
  // No store of the sequence: every publish keeps it current, and close() may run on another
  // thread than publish(), which owns the lane.
  status_->closed.store(1, std::memory_order_release);
  unlink_channel(listener_);
  listener_.fd = Fd();
  knocks_.clear();
  for (Seat& s : seats_) s.sock = Fd();
}

void ShmPublisher::conductor_loop(std::stop_token st) {
  std::vector<pollfd> fds;
  std::vector<std::uint32_t> seat_of;  // fds[1 + knocks .. ] -> seat index
  const int period_ms = static_cast<int>(config_.conductor_period.count());
  while (!st.stop_requested()) {
    status_->heartbeat_ns.store(monotonic_ns(), std::memory_order_release);
    fds.clear();
    seat_of.clear();
    fds.push_back({listener_.fd.get(), POLLIN, 0});
    for (const Knock& k : knocks_) fds.push_back({k.sock.get(), POLLIN, 0});
    for (std::uint32_t i = 0; i < max_subscribers_; ++i) {
      const auto s = static_cast<SeatState>(seats_[i].state.load(std::memory_order_acquire));
      if (s == SeatState::pending || s == SeatState::active || s == SeatState::evicted) {
        fds.push_back({seats_[i].sock.get(), POLLIN, 0});
        seat_of.push_back(i);
      }
    }
    // Bounded wait: stop requests and heartbeats are handled within one period.
    const int ready = ::poll(fds.data(), fds.size(), period_ms);
    wakeups_.tick();
    if (ready > 0) {
      const std::size_t n_knocks = knocks_.size();
      for (std::size_t j = 0; j < seat_of.size(); ++j) {
        if (fds[1 + n_knocks + j].revents == 0) continue;
        Seat& seat = seats_[seat_of[j]];
        std::uint8_t msg = 0;
        std::vector<Fd> none;
        const long r = receive_message(seat.sock.get(), &msg, sizeof msg, none, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        // Anything but a goodbye is noise; a closed socket without one is a process gone.
        if (r == 1 && msg == kBye) {
          leave(seat_of[j], false);
        } else if (r <= 0 || (fds[1 + n_knocks + j].revents & (POLLHUP | POLLERR)) != 0) {
          leave(seat_of[j], true);
        }
      }
      for (std::size_t j = n_knocks; j-- > 0;) {
        if (fds[1 + j].revents == 0) continue;
        answer(knocks_[j]);
        knocks_.erase(knocks_.begin() + static_cast<std::ptrdiff_t>(j));
      }
      if ((fds[0].revents & POLLIN) != 0) accept_knocks();
    }
    const std::uint64_t now = monotonic_ns();
    std::erase_if(knocks_, [&](const Knock& k) { return now > k.deadline_ns; });
    free_released();
  }
}

void ShmPublisher::accept_knocks() {
  for (;;) {
    Fd s(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (s.get() < 0) return;
    if (knocks_.size() >= kMaxKnocks) continue;  // a flood of silent connections: drop them
    Knock k;
    try {
      k.cred = peer_cred(s.get());
    } catch (const Error&) {
      continue;
    }
    k.sock = std::move(s);
    k.deadline_ns = monotonic_ns() + kKnockTimeoutNs;
    knocks_.push_back(std::move(k));
  }
}

void ShmPublisher::answer(Knock& k) {
  Request r{};
  std::vector<Fd> none;  // a subscriber cannot make us hold its descriptors
  const long n = receive_message(k.sock.get(), &r, sizeof r, none, 0);
  if (n <= 0) return;  // a probe, or gone
  Reply reply{};
  reply.magic = kMagic;
  reply.version = kVersion;
  reply.capacity = capacity_;
  reply.max_subscribers = max_subscribers_;
  reply.table_capacity = table_.geometry().capacity;
  reply.table_classes = table_.geometry().classes;
  const std::string who = "pid " + std::to_string(k.cred.pid) + " of uid " + user_name(k.cred.uid);
  if (!allow_.permits(k.cred)) {
    reply.code = static_cast<std::uint32_t>(ReplyCode::refused);
    copy_text(reply, who + " may not subscribe to channel '" + config_.channel + "' (allowed: " +
                         allow_.describe() + "; the publisher's allow_users and allow_groups)");
    logger()->warn("publisher '{}': refused {}: not in allow_users or allow_groups", config_.channel, who);
  } else if (static_cast<std::size_t>(n) != sizeof r || r.magic != kMagic || r.version != kVersion ||
             r.policy > static_cast<std::uint32_t>(SlowConsumerPolicy::conflate)) {
    reply.code = static_cast<std::uint32_t>(ReplyCode::bad_request);
    copy_text(reply, "malformed attach request (protocol version " + std::to_string(kVersion) + ")");
  } else if (!never_waits(static_cast<SlowConsumerPolicy>(r.policy)) && !wait_for_.permits(k.cred)) {
    // It could make publish() wait for it, and with it every other subscriber.
    reply.code = static_cast<std::uint32_t>(ReplyCode::refused);
    // The advice first: a long list of users is what the reply's fixed text may cut.
    copy_text(reply, who + " may not hold channel '" + config_.channel + "' back: policy " +
                         to_string(static_cast<SlowConsumerPolicy>(r.policy)) +
                         " is for the publisher's wait_for_users and wait_for_groups only; subscribe with policy "
                         "drop or conflate (may hold it back: " + wait_for_.describe() + ")");
    logger()->warn("publisher '{}': refused {}: policy {} not allowed (wait_for_users, wait_for_groups)",
                   config_.channel, who, to_string(static_cast<SlowConsumerPolicy>(r.policy)));
  } else if (r.policy == static_cast<std::uint32_t>(SlowConsumerPolicy::conflate) && !table_.on()) {
    reply.code = static_cast<std::uint32_t>(ReplyCode::refused);
    copy_text(reply, "policy conflate needs the channel's last-value table, and channel '" + config_.channel +
                         "' keeps none ([state] enabled = false)");
  } else if (r.ring_capacity != 0 && r.ring_capacity != capacity_) {
    reply.code = static_cast<std::uint32_t>(ReplyCode::geometry_mismatch);
    copy_text(reply, "the channel's rings hold " + std::to_string(capacity_) +
                         " ticks, config asks for " + std::to_string(r.ring_capacity));
  } else if (seat_subscriber(k, r, reply)) {
    return;
  }
  (void)send_message(k.sock.get(), &reply, sizeof reply, nullptr, 0);
}

// Gives the subscriber a seat and its memory; false (with `reply` saying why) when it cannot.
bool ShmPublisher::seat_subscriber(Knock& k, const Request& r, Reply& reply) {
  std::uint32_t index = max_subscribers_;
  for (std::uint32_t i = 0; i < max_subscribers_ && index == max_subscribers_; ++i) {
    if (seats_[i].state.load(std::memory_order_acquire) == static_cast<std::uint32_t>(SeatState::free)) {
      index = i;
    }
  }
  if (index == max_subscribers_) {
    reply.code = static_cast<std::uint32_t>(ReplyCode::no_capacity);
    copy_text(reply, "all " + std::to_string(max_subscribers_) +
                         " subscriber entries are taken (raise max_subscribers)");
    return false;
  }
  Seat& seat = seats_[index];
  try {
    SharedMemory m = create_shared("the control line of subscriber " + std::to_string(index), control_bytes(), false);
    std::lock_guard g(seats_mutex_);
    seat.control_memory = std::move(m);
    seat.control = new (seat.control_memory.map.get()) Control{};
    seat.policy = static_cast<SlowConsumerPolicy>(r.policy);
    seat.disconnect_after_ns = std::min(r.disconnect_after_ns, kMaxDisconnectAfterNs);
    seat.pid = k.cred.pid;
    seat.dead.store(false, std::memory_order_relaxed);
  } catch (const Error& e) {
    reply.code = static_cast<std::uint32_t>(ReplyCode::refused);
    copy_text(reply, e.what());
    return false;
  }
  reply.code = static_cast<std::uint32_t>(ReplyCode::ok);
  reply.index = index;
  const int fds[4] = {rings_read_only_[index].get(), status_read_only_.get(),
                      seat.control_memory.fd.get(), table_read_only_.get()};
  if (!send_message(k.sock.get(), &reply, sizeof reply, fds, table_.on() ? 4 : 3)) {
    std::lock_guard g(seats_mutex_);
    seat.control = nullptr;
    seat.control_memory = SharedMemory{};
    return true;  // it went away meanwhile: nothing to answer
  }
  seat.sock = std::move(k.sock);
  seat.state.store(static_cast<std::uint32_t>(SeatState::pending), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  logger()->debug("publisher '{}': pid {} (uid {}) in slot {}", config_.channel, k.cred.pid,
                  k.cred.uid, index);
  return true;
}

void ShmPublisher::leave(std::uint32_t index, bool dead) {
  Seat& seat = seats_[index];
  seat.dead.store(dead, std::memory_order_relaxed);
  std::uint32_t s = seat.state.load(std::memory_order_acquire);
  while (s == static_cast<std::uint32_t>(SeatState::pending) ||
         s == static_cast<std::uint32_t>(SeatState::active) ||
         s == static_cast<std::uint32_t>(SeatState::evicted)) {
    if (seat.state.compare_exchange_weak(s, static_cast<std::uint32_t>(SeatState::leaving),
                                         std::memory_order_acq_rel)) {
      if (dead) {
        logger()->warn("publisher '{}': subscriber pid {} in slot {} is gone; reclaiming its ring",
                       config_.channel, seat.pid, index);
      }
      generation_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
  }
}

void ShmPublisher::free_released() {
  for (std::uint32_t i = 0; i < max_subscribers_; ++i) {
    Seat& seat = seats_[i];
    if (seat.state.load(std::memory_order_acquire) != static_cast<std::uint32_t>(SeatState::released)) {
      continue;
    }
    std::lock_guard g(seats_mutex_);
    seat.sock = Fd();
    seat.control = nullptr;
    seat.control_memory = SharedMemory{};
    seat.state.store(static_cast<std::uint32_t>(SeatState::free), std::memory_order_release);
  }
}

std::vector<SubscriberStatus> ShmPublisher::subscribers() const {
  static constexpr const char* kNames[] = {"free", "requested", "active", "evicted"};
  std::vector<SubscriberStatus> out;
  const std::uint64_t published = status_->next_seq.load(std::memory_order_relaxed);
  std::lock_guard g(seats_mutex_);
  for (std::uint32_t i = 0; i < max_subscribers_; ++i) {
    const Seat& seat = seats_[i];
    const std::uint32_t state = seat.state.load(std::memory_order_acquire);
    // A seat whose subscriber left is no subscriber, though its memory is freed a moment later.
    if (state == static_cast<std::uint32_t>(SeatState::free) ||
        state >= static_cast<std::uint32_t>(SeatState::leaving) || seat.control == nullptr) {
      continue;
    }
    SubscriberStatus s;
    s.slot = i;
    s.pid = seat.pid;
    s.policy = seat.policy;
    s.state = kNames[state];
    // The subscriber writes its credit: clamp it to what exists.
    s.position = std::min(seat.control->credit.load(std::memory_order_acquire), published);
    s.lag = published - s.position;
    s.back_pressure = seat.control->back_pressure.load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tickrail::shm
