#include "tickrail/publisher.hpp"

#include <thread>
#include <utility>

#include "core/enum_names.hpp"
#include "core/stats.hpp"
#include "transport/transport.hpp"

namespace tickrail {

namespace {
std::string stats_label(TransportKind t, const std::string& channel, const RdmaConfig& r) {
  if (t == TransportKind::shm || r.address.empty()) return channel;
  return channel + "@" + r.address + ":" + std::to_string(r.port);
}

std::unique_ptr<detail::PublisherTransport> make_transport(const PublisherConfig& config) {
  config.validate();  // every other key's error before the cpus are looked at
  const auto where =
      detail::Placement::for_endpoint(config.housekeeping_cpus, "publisher '" + config.channel + "'");
  return detail::make_publisher_transport(config, where);
}

// The background thread stops writing into the counters before they are released.
void detach_wakeups(detail::PublisherTransport* t) noexcept {
  if (t == nullptr) return;
  if (detail::WakeCounter* w = t->wakeups()) w->detach();
}
}  // namespace

Publisher::Publisher(const PublisherConfig& config)
    : impl_(make_transport(config)), counters_(&impl_->counters()), lane_(impl_->lane()) {
  if (!config.stats) return;
  // The stats thread reads the per-subscriber table through the transport, whose subscribers()
  // is callable from any thread; stats_ is released before impl_ goes.
  const detail::PublisherTransport* t = impl_.get();
  stats_ = stats::register_endpoint(
      stats::BlockKind::publisher, config.transport,
      stats_label(config.transport, config.channel, config.rdma), [t] { return t->subscribers(); });
  if (detail::WakeCounter* w = impl_->wakeups()) {
    w->attach(stats::thread_word(stats_, stats::PubCounter::background_wakeups));
  }
}
Publisher::~Publisher() { detach_wakeups(impl_.get()); }
// A moved-from publisher keeps no lane into the rings it gave away.
Publisher::Publisher(Publisher&& o) noexcept
    : impl_(std::move(o.impl_)), stats_(std::move(o.stats_)), counters_(o.counters_),
      stored_rare_(o.stored_rare_), lane_(std::exchange(o.lane_, nullptr)) {}
Publisher& Publisher::operator=(Publisher&& o) noexcept {
  if (this != &o) {
    detach_wakeups(impl_.get());
    stats_.reset();  // before the transport it reads goes
    impl_ = std::move(o.impl_);
    stats_ = std::move(o.stats_);
    counters_ = o.counters_;
    stored_rare_ = o.stored_rare_;
    lane_ = std::exchange(o.lane_, nullptr);
  }
  return *this;
}

// One relaxed store into a line only this thread writes, on most calls: every counter but
// `published` changes only on rare events (back-pressure, no subscriber, an eviction, a dead
// subscriber reclaimed, a failed completion) and each only grows, so their sum says whether any
// did. Storing all six on every publish cost 2-3 % of the shm ping-pong (BENCHMARKS.md, #17).
inline void Publisher::store_stats() noexcept {
  if (stats_.block() == nullptr) return;
  const PublisherCounters& c = *counters_;
  stats_.put(stats::PubCounter::published, c.published);
  const std::uint64_t rare = stats::rare_sum(c);
  if (rare != stored_rare_) [[unlikely]] {
    stored_rare_ = rare;
    stats::store_counters(stats_, c);
  }
}

PublishResult Publisher::publish(std::span<const Tick> ticks) noexcept {
  const PublishResult r = impl_->publish(ticks);
  store_stats();
  return r;
}
void Publisher::service() noexcept {
  (void)impl_->publish(std::span<const Tick>{});
  store_stats();
}
std::uint32_t Publisher::wait_subscribers(std::uint32_t n, std::chrono::milliseconds timeout,
                                          const std::atomic<bool>* stop) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    service();
    const std::uint32_t have = subscriber_count();
    if (have >= n || std::chrono::steady_clock::now() >= deadline) return have;
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return have;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
std::uint64_t Publisher::next_sequence() const noexcept { return impl_->next_sequence(); }
std::uint32_t Publisher::subscriber_count() const noexcept { return impl_->subscriber_count(); }
const PublisherCounters& Publisher::counters() const noexcept { return impl_->counters(); }
std::vector<SubscriberStatus> Publisher::subscribers() const { return impl_->subscribers(); }
const PublisherConfig& Publisher::config() const noexcept { return impl_->config(); }
std::optional<Tick> Publisher::last_value(std::uint32_t instrument, StateClass cls) const noexcept {
  const detail::LastValueWriter* table = impl_->table();
  if (table == nullptr) return std::nullopt;
  const detail::TableGeometry g = table->geometry();
  const auto c = static_cast<unsigned>(cls);
  if (instrument >= g.capacity || c >= kStateClasses || (g.classes & (1u << c)) == 0) return std::nullopt;
  Slot& e = table->entries()[std::size_t{instrument} * kStateClasses + c];
  Tick t;
  // A publish in another thread may hold the entry for a moment: wait it out (bounded).
  for (int i = 0; i < 1'000'000; ++i) {
    switch (detail::read_entry(e, t)) {
      case detail::EntryRead::ok: return t;
      case detail::EntryRead::empty: return std::nullopt;
      case detail::EntryRead::busy: break;
    }
  }
  return std::nullopt;
}
void Publisher::close() noexcept {
  if (impl_) impl_->close();
  stats_.set_state(stats::EndpointState::closed);
}

namespace {
constexpr detail::EnumName<PublishStatus> kStatusNames[] = {
    {PublishStatus::ok, "ok"},
    {PublishStatus::back_pressured, "back-pressured"},
    {PublishStatus::no_subscribers, "no subscribers"},
    {PublishStatus::closed, "closed"}};
}  // namespace

const char* to_string(PublishStatus s) noexcept { return detail::name_of(kStatusNames, s); }

}  // namespace tickrail
