#include "transport/shm/shm_subscriber.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "tickrail/memory.hpp"

namespace tickrail::shm {
namespace {
constexpr std::uint32_t st(ControlState s) { return static_cast<std::uint32_t>(s); }
}  // namespace

ShmSubscriber::ShmSubscriber(const SubscriberConfig& config, const std::function<void()>* between)
    : config_(config),
      publisher_timeout_ns_(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(config.publisher_timeout).count())) {
  const std::string what = "subscribe to channel '" + config_.channel + "' (" +
                           channel_path(config_.shm_dir, config_.channel) + ")";
  const Allow publishers = Allow::resolve(config_.publisher_users, {},
                                          static_cast<std::uint32_t>(::geteuid()),
                                          "subscriber.publisher_users", "");
  sock_ = connect_channel(config_.shm_dir, config_.channel, config_.attach_timeout, publishers,
                          publisher_, between);
  handshake(what, between);
  if (config_.lock_memory && ::mlock(ring_.get(), ring_.size()) != 0) {
    const int e = errno;
    close();
    throw Error(Errc::locked_memory,
                what + ": lock " + std::to_string(ring_.size()) + " bytes of ring: " + std::strerror(e) +
                    "; the locked-memory limit is " + std::to_string(memlock_limit()) +
                    " bytes (raise it with `ulimit -l`, LimitMEMLOCK= in a systemd unit, or "
                    "/etc/security/limits.conf), or set lock_memory = false");
  }
  logger()->debug("subscriber: channel '{}' slot {} policy {} (publisher pid {}, uid {})",
                  config_.channel, index_, to_string(config_.policy), publisher_.pid, publisher_.uid);
}

void ShmSubscriber::handshake(const std::string& what, const std::function<void()>* between) {
  Request r{};
  r.magic = kMagic;
  r.version = kVersion;
  r.policy = static_cast<std::uint32_t>(config_.policy);
  r.disconnect_after_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(config_.disconnect_after).count());
  r.ring_capacity = config_.ring_capacity;
  if (!send_message(sock_.get(), &r, sizeof r, nullptr, 0)) {
    // A publisher that closed before reading us is gone, whichever side of the close we saw.
    if (errno == EPIPE || errno == ECONNRESET) throw Error(Errc::peer_gone, what + ": the publisher closed the connection");
    throw_errno(errno, what + ": send request");
  }
  pollfd p{sock_.get(), POLLIN, 0};
  const int wait_ms = static_cast<int>(std::max<std::int64_t>(config_.attach_timeout.count(), 5000));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  // In 1 ms looks when `between` must be heard (an interrupt); a signal (EINTR) is no answer.
  for (int got = 0; (got = ::poll(&p, 1, between != nullptr ? 1 : wait_ms)) <= 0;) {
    if (got < 0 && errno != EINTR) throw_errno(errno, what + ": wait for the publisher's answer");
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(Errc::timed_out, what + ": the publisher (pid " + std::to_string(publisher_.pid) +
                                       ") did not answer within " + std::to_string(wait_ms) + " ms");
    }
    if (between != nullptr) (*between)();
  }
  Reply rep{};
  std::vector<Fd> fds;
  const long n = receive_message(sock_.get(), &rep, sizeof rep, fds, 4);
  if (n <= 0) throw Error(Errc::peer_gone, what + ": the publisher closed the connection");
  if (static_cast<std::size_t>(n) != sizeof rep || rep.magic != kMagic) {
    throw Error(Errc::bad_magic, what + ": the publisher's answer is not tickrail's");
  }
  if (rep.version != kVersion) {
    throw Error(Errc::version_mismatch, what + ": the publisher speaks protocol version " +
                                            std::to_string(rep.version) + ", this library " +
                                            std::to_string(kVersion));
  }
  rep.text[sizeof rep.text - 1] = '\0';
  switch (static_cast<ReplyCode>(rep.code)) {
    case ReplyCode::ok: break;
    case ReplyCode::no_capacity: throw Error(Errc::no_capacity, what + ": " + rep.text);
    case ReplyCode::geometry_mismatch: throw Error(Errc::geometry_mismatch, what + ": " + rep.text);
    default: throw Error(Errc::rejected, what + ": the publisher refused: " + rep.text);
  }
  const detail::TableGeometry table{rep.table_capacity, rep.table_classes};
  const std::size_t want_fds = table.capacity != 0 ? 4 : 3;
  if (!is_valid_ring_capacity(rep.capacity) || rep.index >= kMaxSubscribers || fds.size() != want_fds ||
      (table.capacity != 0 && !table.valid()) ||
      (config_.ring_capacity != 0 && rep.capacity != config_.ring_capacity)) {
    throw Error(Errc::geometry_mismatch,
                what + ": unusable answer (capacity " + std::to_string(rep.capacity) + ", slot " +
                    std::to_string(rep.index) + ", table of " + std::to_string(table.capacity) +
                    " instruments and classes " + std::to_string(table.classes) + ", " +
                    std::to_string(fds.size()) + " descriptors)");
  }
  const bool needs_table = config_.start == StartMode::snapshot || config_.policy == SlowConsumerPolicy::conflate;
  if (needs_table && table.capacity == 0) {
    throw Error(Errc::unsupported,
                what + ": " +
                    (config_.start == StartMode::snapshot ? "start = snapshot" : "policy = conflate") +
                    " needs the channel's last-value table, and its publisher (pid " +
                    std::to_string(publisher_.pid) + ") keeps none (its [state] enabled = false)");
  }
  capacity_ = rep.capacity;
  index_ = rep.index;
  ring_ = map_received(fds[0].get(), ring_bytes(capacity_), false, what + ": ring");
  status_ = map_received(fds[1].get(), status_bytes(), false, what + ": status line");
  control_ = map_received(fds[2].get(), control_bytes(), true, what + ": control line");
  status_line_ = static_cast<const Status*>(status_.get());
  control_line_ = static_cast<Control*>(control_.get());
  if (needs_table) {
    table_ = map_received(fds[3].get(), table_bytes(table.bytes()), false, what + ": last-value table");
    table_geometry_ = table;
    // A delivery that makes no progress for publisher_timeout has a publisher dead or lying.
    const auto stall = static_cast<std::uint64_t>(
        Clock::instance().ns_to_cycles(static_cast<double>(publisher_timeout_ns_)));
    table_source_ = std::make_unique<detail::MappedTableSource>(static_cast<Slot*>(table_.get()),
                                                                &status_line_->table_next);
    table_delivery_ = std::make_unique<detail::TableDelivery>(table, *table_source_, stall);
  }
  // After a stop, 100 ms for the publisher's conductor to beat again (every conductor_period,
  // 5 ms by default; the publisher does not tell its own).
  silence_ = SilenceWatch(publisher_timeout_ns_, 100'000'000, monotonic_ns(),
                          status_line_->heartbeat_ns.load(std::memory_order_acquire));
}

ShmSubscriber::~ShmSubscriber() { close(); }

bool ShmSubscriber::try_start() noexcept {
  if (started_) return true;
  if (control_line_ == nullptr ||
      control_line_->state.load(std::memory_order_acquire) != st(ControlState::active)) {
    return false;
  }
  reader_ = RingReader(static_cast<Slot*>(ring_.get()), capacity_,
                       control_line_->start_seq.load(std::memory_order_relaxed), &control_line_->credit);
  reader_.stop_at_laps(config_.policy == SlowConsumerPolicy::conflate);
  if (config_.start == StartMode::snapshot) table_delivery_->begin(detail::TableDelivery::Why::snapshot, feed_);
  started_ = true;
  return true;
}

std::size_t ShmSubscriber::poll_with_table(detail::TickSink sink, std::size_t limit) noexcept {
  if (table_delivery_->busy()) return table_delivery_->step(feed_, sink, limit);
  const std::size_t n = reader_.poll(sink, limit);
  if (reader_.lapped()) [[unlikely]] table_delivery_->begin(detail::TableDelivery::Why::conflation, feed_);
  return n;
}

SubscriberState ShmSubscriber::state() const noexcept {
  if (closed_ || control_line_ == nullptr) return SubscriberState::closed;
  const auto s = control_line_->state.load(std::memory_order_acquire);
  if (s == st(ControlState::evicted)) return SubscriberState::evicted;
  if (status_line_->closed.load(std::memory_order_acquire) != 0) return SubscriberState::publisher_gone;
  const std::uint64_t beat = status_line_->heartbeat_ns.load(std::memory_order_acquire);
  if (silence_.silent_word(beat, monotonic_ns())) return SubscriberState::publisher_gone;
  if (s == st(ControlState::requested)) return SubscriberState::connecting;
  if (s == st(ControlState::active)) return SubscriberState::active;
  return SubscriberState::closed;
}

std::string ShmSubscriber::reason() const {
  switch (state()) {
    case SubscriberState::evicted:
      return "evicted by the publisher of channel '" + config_.channel +
             "': its ring stayed full for longer than disconnect_after (" +
             std::to_string(config_.disconnect_after.count()) + " ms)";
    case SubscriberState::publisher_gone:
      if (status_line_->closed.load(std::memory_order_acquire) != 0) {
        return "the publisher closed channel '" + config_.channel + "'";
      }
      return "the publisher of channel '" + config_.channel + "' (pid " +
             std::to_string(publisher_.pid) + ") has been silent for more than " +
             std::to_string(config_.publisher_timeout.count()) + " ms";
    case SubscriberState::closed: return "closed";
    default: return {};
  }
}

void ShmSubscriber::close() noexcept {
  if (closed_) return;
  closed_ = true;
  if (sock_.get() >= 0) {
    (void)send_message(sock_.get(), &kBye, 1, nullptr, 0);
    sock_ = Fd();
  }
}

}  // namespace tickrail::shm
