#include "tickrail/subscriber.hpp"

#include <algorithm>
#include <thread>

#include "tickrail/error.hpp"
#include "tickrail/log.hpp"

#include "transport/transport.hpp"

namespace tickrail {

namespace {
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


// What a later attempt can change: a publisher not there yet, gone (also in the system's words,
// when it vanished mid-handshake), or not answering. RC reports "nobody listening on that
// address yet" as rejected; over shm rejected is about the channel's owner.
bool worth_retrying(const std::error_code& e, TransportKind t) noexcept {
  return e == Errc::not_found || e == Errc::peer_gone || e == Errc::timed_out ||
         e == std::errc::connection_reset || e == std::errc::broken_pipe ||
         e == std::errc::connection_refused || (e == Errc::rejected && t != TransportKind::shm);
}

std::unique_ptr<detail::SubscriberTransport> attach(const SubscriberConfig& config,
                                                    const std::function<void()>* between) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + config.attach_timeout;
  SubscriberConfig attempt = config;
  for (;;) {
    try {
      return detail::make_subscriber_transport(attempt);
    } catch (const Error& e) {
      if (!worth_retrying(e.code(), config.transport) || Clock::now() >= deadline) throw;
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

Subscriber::Subscriber(const SubscriberConfig& config) : impl_(attach(config, nullptr)) {
  start(config);
}

Subscriber::Subscriber(const SubscriberConfig& config, const std::function<void()>& between_attempts)
    : impl_(attach(config, between_attempts ? &between_attempts : nullptr)) {
  start(config);
}

void Subscriber::start(const SubscriberConfig& config) {
  if (config.stats) {
    std::string label = config.channel;
    if (config.transport != TransportKind::shm && !config.rdma.address.empty()) {
      label += "@" + config.rdma.address + ":" + std::to_string(config.rdma.port);
    }
    probe_ = stats::PollProbe(
        stats::register_endpoint(stats::BlockKind::subscriber, config.transport, label));
  }
  adopt_ring();
}

void Subscriber::adopt_ring() noexcept {
  ring_ = impl_->ring();
  credit_due_ = ring_ != nullptr ? impl_->return_credit(ring_->next_seq()) : ~std::uint64_t{0};
  if (ring_ != nullptr) probe_.registration().set_state(stats::EndpointState::active);
}

void Subscriber::return_credit() noexcept {
  credit_due_ = impl_->return_credit(ring_->next_seq());
  // Rare (every few thousand ticks): the place where a ring transport's own errors surface.
  store_indirect_stats();
}

void Subscriber::store_indirect_stats() noexcept {
  stats::Block* b = probe_.registration().block();
  if (b == nullptr) return;
  const SubscriberCounters c = impl_->counters();
  using stats::SubCounter;
  stats::put(*b, SubCounter::received, c.received);
  stats::put(*b, SubCounter::lost, c.lost);
  stats::put(*b, SubCounter::laps, c.laps);
  stats::put(*b, SubCounter::position, impl_->next_sequence());
  stats::put(*b, SubCounter::gaps, c.gaps);
  stats::put(*b, SubCounter::recovered, c.recovered);
  stats::put(*b, SubCounter::foreign, c.foreign);
  stats::put(*b, SubCounter::malformed, c.malformed);
  stats::put(*b, SubCounter::completion_errors, c.completion_errors);
}
Subscriber::~Subscriber() = default;
Subscriber::Subscriber(Subscriber&&) noexcept = default;
Subscriber& Subscriber::operator=(Subscriber&&) noexcept = default;

std::size_t Subscriber::poll_indirect(detail::TickSink sink, std::size_t limit) noexcept {
  const std::size_t n = impl_->poll(sink, limit);
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
  if (impl_) impl_->close();
  probe_.registration().set_state(stats::EndpointState::closed);
}

const char* to_string(SubscriberState s) noexcept {
  switch (s) {
    case SubscriberState::connecting: return "connecting";
    case SubscriberState::active: return "active";
    case SubscriberState::evicted: return "evicted";
    case SubscriberState::publisher_gone: return "publisher gone";
    case SubscriberState::closed: return "closed";
  }
  return "unknown";
}

}  // namespace tickrail
