#include "tickrail/subscriber.hpp"

#include <algorithm>
#include <thread>

#include "core/enum_names.hpp"
#include "core/stats.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "core/log.hpp"
#include "transport/transport.hpp"

namespace tickrail {

namespace {
constexpr detail::EnumName<SubscriberState> kStateNames[] = {
    {SubscriberState::connecting, "connecting"},
    {SubscriberState::active, "active"},
    {SubscriberState::evicted, "evicted"},
    {SubscriberState::publisher_gone, "publisher gone"},
    {SubscriberState::closed, "closed"}};

stats::EndpointState to_endpoint_state(SubscriberState s) noexcept {
  switch (s) {
    case SubscriberState::connecting: return stats::EndpointState::connecting;
    case SubscriberState::active: return stats::EndpointState::active;
    case SubscriberState::evicted: return stats::EndpointState::evicted;
    case SubscriberState::publisher_gone: return stats::EndpointState::publisher_gone;
    case SubscriberState::closed: return stats::EndpointState::closed;
  }
  return stats::EndpointState::closed;
}


std::unique_ptr<detail::SubscriberTransport> attach(const SubscriberConfig& config,
                                                    const std::function<void()>* between) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + config.attach_timeout;
  const auto where =
      detail::Placement::for_endpoint(config.housekeeping_cpus, "subscriber '" + config.channel + "'");
  // The library's logger is made on first use, its queue and thread in milliseconds: made now
  // (after the placement, which its thread follows), before the publisher can count us, and not
  // between its first tick and our first poll.
  (void)logger();
  SubscriberConfig attempt = config;
  for (;;) {
    try {
      return detail::make_subscriber_transport(attempt, where, between);
    } catch (const Error& e) {
      if (!detail::attach_worth_retrying(e.code()) || Clock::now() >= deadline) throw;
      logger()->debug("subscriber: channel '{}': {}; trying again", config.channel, e.what());
    }
    for (int i = 0; i < 20 && Clock::now() < deadline; ++i) {
      if (between != nullptr) (*between)();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Each attempt waits (shm: for the channel to appear) only for what is left.
    attempt.attach_timeout = std::max(std::chrono::milliseconds(0),
                                      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  }
}
}  // namespace

// What a later attempt can change: a publisher not there yet (RC: nobody listening at the
// address), gone (also in the system's words, when it vanished mid-handshake), or not
// answering. A refusal (rejected: wrong token, channel or address) is final.
detail::IdleCredit::IdleCredit() noexcept
    : wait_(static_cast<std::uint64_t>(Clock::instance().ns_to_cycles(1e6))) {}

bool detail::IdleCredit::look(std::uint64_t next) noexcept {
  countdown_ = kEvery;
  const std::uint64_t now = Clock::now();
  if (next != next_) {
    next_ = next;
    since_ = now;
    return false;
  }
  if (now - since_ < wait_) return false;
  since_ = now;  // returned now: the next one no sooner than `wait` later, should it be deferred
  return true;
}

bool detail::attach_worth_retrying(const std::error_code& e) noexcept {
  return e == Errc::not_found || e == Errc::peer_gone || e == Errc::timed_out ||
         e == std::errc::connection_reset || e == std::errc::broken_pipe ||
         e == std::errc::connection_refused;
}

namespace {
// First in the constructors: the config is checked before anything is made (every other key's
// error before the cpus are looked at).
stats::PollProbe probe_for(const SubscriberConfig& config) {
  config.validate();
  if (!config.stats) return {};
  return stats::PollProbe(
      stats::register_endpoint(stats::BlockKind::subscriber, config.transport, stats::endpoint_label(config)));
}
}  // namespace

// The counters are registered before the attach (the first in a process makes the counters
// file): once attached, the publisher may count us and publish, and our first poll should follow.
Subscriber::Subscriber(const SubscriberConfig& config) : Subscriber(config, std::function<void()>{}) {}

Subscriber::Subscriber(const SubscriberConfig& config, const std::function<void()>& between_attempts)
    : probe_(probe_for(config)) {
  impl_ = attach(config, between_attempts ? &between_attempts : nullptr);
  start(config);
}

void Subscriber::start(const SubscriberConfig& config) noexcept {
  if (config.stats) {
    if (detail::WakeCounter* w = impl_->wakeups()) {
      w->attach(stats::thread_word(probe_.registration(), stats::SubCounter::background_wakeups));
    }
  }
  adopt_ring();
}

void Subscriber::adopt_ring() noexcept {
  ring_ = impl_->ring();
  credit_due_ = ring_ != nullptr ? impl_->return_credit(ring_->next_seq()) : ~std::uint64_t{0};
  credited_ = ring_ != nullptr ? impl_->credited() : ~std::uint64_t{0};
  if (ring_ != nullptr) probe_.registration().set_state(stats::EndpointState::active);
}

void Subscriber::return_credit() noexcept {
  credit_due_ = impl_->return_credit(ring_->next_seq());
  credited_ = impl_->credited();  // not ours to assume: a full send queue defers it
  // Rare (every few thousand ticks): the place where a ring transport's own errors surface.
  store_indirect_stats();
}

void Subscriber::store_indirect_stats() noexcept {
  const stats::Registration& r = probe_.registration();
  if (r.block() == nullptr) return;
  stats::store_counters(r, impl_->counters());
  r.put(stats::SubCounter::position, impl_->next_sequence());
}
Subscriber::~Subscriber() {
  // The background thread stops writing into the counters before they are released.
  if (!impl_) return;
  if (detail::WakeCounter* w = impl_->wakeups()) w->detach();
}
Subscriber::Subscriber(Subscriber&&) noexcept = default;
Subscriber& Subscriber::operator=(Subscriber&&) noexcept = default;

std::size_t Subscriber::poll_indirect(detail::TickSink sink, std::size_t limit) noexcept {
  const std::size_t n = impl_->poll(sink, limit);
  // The rest is three virtual calls and a dozen stores: after a delivery, and once in
  // kIndirectEvery empty polls (a loss counted without a delivery, a ring handed out), so that a
  // spinning loop's empty poll stays one call and its period short.
  if (n == 0 && --indirect_countdown_ != 0) [[likely]] return 0;
  indirect_countdown_ = kIndirectEvery;
  store_indirect_stats();
  if (n != 0) probe_.note_delivered();
  // A ring transport hands out its ring once the publisher serves us: poll it inline from then.
  if (impl_->ring() != nullptr) adopt_ring();
  return n;
}

SubscriberState Subscriber::state() const noexcept {
  const SubscriberState s = impl_->state();
  // The counters file learns of evictions and ends when the app looks.
  probe_.registration().set_state(to_endpoint_state(s));
  return s;
}
SubscriberCounters Subscriber::counters() const noexcept { return impl_->counters(); }
std::uint64_t Subscriber::next_sequence() const noexcept { return impl_->next_sequence(); }

void Subscriber::cover_below(std::uint64_t seq, std::uint64_t read_until) noexcept {
  impl_->cover_below(seq, read_until);
}
bool Subscriber::in_snapshot() const noexcept { return impl_->in_snapshot(); }
std::string Subscriber::reason() const { return impl_->reason(); }
const SubscriberConfig& Subscriber::config() const noexcept { return impl_->config(); }

bool Subscriber::wait_active(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  IdleStrategy idle(config().idle);
  for (;;) {
    if (impl_->ready()) {
      adopt_ring();
      probe_.registration().set_state(stats::EndpointState::active);
      return true;
    }
    const SubscriberState s = impl_->state();
    if (s != SubscriberState::connecting && s != SubscriberState::active) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    idle.idle(0);
  }
}

void Subscriber::close() noexcept {
  ring_ = nullptr;
  credit_due_ = ~std::uint64_t{0};
  credited_ = ~std::uint64_t{0};
  if (impl_) impl_->close();
  probe_.registration().set_state(stats::EndpointState::closed);
}

const char* to_string(SubscriberState s) noexcept { return detail::name_of(kStateNames, s); }

}  // namespace tickrail
