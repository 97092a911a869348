#include "tickrail/publisher.hpp"

#include "transport/transport.hpp"

namespace tickrail {

Publisher::Publisher(const PublisherConfig& config)
    : impl_(detail::make_publisher_transport(config)) {}
Publisher::~Publisher() = default;
Publisher::Publisher(Publisher&&) noexcept = default;
Publisher& Publisher::operator=(Publisher&&) noexcept = default;

PublishResult Publisher::publish(const Tick& tick) noexcept {
  return impl_->publish(std::span<const Tick>(&tick, 1));
}
PublishResult Publisher::publish(std::span<const Tick> ticks) noexcept {
  return impl_->publish(ticks);
}
void Publisher::service() noexcept { (void)impl_->publish(std::span<const Tick>{}); }
std::uint64_t Publisher::next_sequence() const noexcept { return impl_->next_sequence(); }
std::uint32_t Publisher::subscriber_count() const noexcept { return impl_->subscriber_count(); }
const PublisherCounters& Publisher::counters() const noexcept { return impl_->counters(); }
std::vector<SubscriberStatus> Publisher::subscribers() const { return impl_->subscribers(); }
const PublisherConfig& Publisher::config() const noexcept { return impl_->config(); }
void Publisher::close() noexcept {
  if (impl_) impl_->close();
}

const char* to_string(PublishStatus s) noexcept {
  switch (s) {
    case PublishStatus::ok: return "ok";
    case PublishStatus::back_pressured: return "back-pressured";
    case PublishStatus::no_subscribers: return "no subscribers";
    case PublishStatus::closed: return "closed";
  }
  return "unknown";
}

}  // namespace tickrail
