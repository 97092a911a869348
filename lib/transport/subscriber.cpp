#include "tickrail/subscriber.hpp"

#include <thread>

#include "transport/transport.hpp"

namespace tickrail {

Subscriber::Subscriber(const SubscriberConfig& config)
    : impl_(detail::make_subscriber_transport(config)) {
  adopt_ring();
}

void Subscriber::adopt_ring() noexcept {
  ring_ = impl_->ring();
  credit_due_ = ring_ != nullptr ? impl_->return_credit(ring_->next_seq()) : ~std::uint64_t{0};
}

void Subscriber::return_credit() noexcept { credit_due_ = impl_->return_credit(ring_->next_seq()); }
Subscriber::~Subscriber() = default;
Subscriber::Subscriber(Subscriber&&) noexcept = default;
Subscriber& Subscriber::operator=(Subscriber&&) noexcept = default;

std::size_t Subscriber::poll_indirect(detail::TickSink sink, std::size_t limit) noexcept {
  const std::size_t n = impl_->poll(sink, limit);
  // A ring transport hands out its ring once the publisher serves us: poll it inline from then.
  if (impl_->ring() != nullptr) adopt_ring();
  return n;
}

SubscriberState Subscriber::state() const noexcept { return impl_->state(); }
SubscriberCounters Subscriber::counters() const noexcept { return impl_->counters(); }
std::uint64_t Subscriber::next_sequence() const noexcept { return impl_->next_sequence(); }
std::string Subscriber::reason() const { return impl_->reason(); }
const SubscriberConfig& Subscriber::config() const noexcept { return impl_->config(); }

bool Subscriber::wait_active(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  IdleStrategy idle(IdleKind::backoff);
  for (;;) {
    if (impl_->ready()) {
      adopt_ring();
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
