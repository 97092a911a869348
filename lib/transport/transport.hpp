// The internal interface every transport implements behind Publisher and Subscriber.
// Adding a transport adds a folder and one line in factory.cpp; it touches no other transport.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "core/last_value.hpp"
#include "core/thread.hpp"

namespace tickrail::detail {

class PublisherTransport {
 public:
  virtual ~PublisherTransport() = default;
  virtual PublishResult publish(std::span<const Tick> ticks) noexcept = 0;
  virtual std::uint64_t next_sequence() const noexcept = 0;
  // What Publisher::subscriber_count() documents: UD counts its recovery connections.
  virtual std::uint32_t subscriber_count() const noexcept = 0;
  virtual const PublisherCounters& counters() const noexcept = 0;
  virtual std::vector<SubscriberStatus> subscribers() const = 0;
  virtual const PublisherConfig& config() const noexcept = 0;
  virtual void close() noexcept = 0;
  // The wake-ups of the transport's background thread; nullptr when it runs none.
  virtual WakeCounter* wakeups() noexcept { return nullptr; }
  // The last-value table it writes; nullptr when the channel keeps none.
  virtual const LastValueWriter* table() const noexcept { return nullptr; }
  // The lane Publisher::publish takes inline for one tick, or nullptr (publisher.hpp).
  virtual PublishLane* lane() noexcept { return nullptr; }
};

class SubscriberTransport {
 public:
  virtual ~SubscriberTransport() = default;
  // The ring polled inline by Subscriber::poll, or nullptr for transports polled out of line.
  virtual RingReader* ring() noexcept = 0;
  // True once the publisher serves us (the first sequence is known); cheap, no system call.
  virtual bool ready() noexcept = 0;
  virtual std::size_t poll(TickSink sink, std::size_t limit) noexcept = 0;
  // Ring transports whose writer cannot see the reader's credit word directly (RC) send it
  // here; returns the next_seq at which to be called again (~0: never, e.g. shm).
  virtual std::uint64_t return_credit(std::uint64_t next_seq) noexcept {
    (void)next_seq;
    return ~std::uint64_t{0};
  }
  // The position the publisher last got from return_credit (~0: none to return, ever).
  virtual std::uint64_t credited() const noexcept { return ~std::uint64_t{0}; }
  virtual SubscriberState state() const noexcept = 0;
  virtual SubscriberCounters counters() const noexcept = 0;
  virtual std::uint64_t next_sequence() const noexcept = 0;
  // The most ticks poll() can still deliver, from now on, once the publisher has ended: what was
  // on its way (its ring; or its receive and reorder buffers and what it has to read back), and
  // a last-value table delivered twice. A line that brings more has a publisher writing after
  // its end (FailoverSubscriber takes it down).
  virtual std::uint64_t after_end() const noexcept = 0;
  virtual std::string reason() const = 0;
  virtual const SubscriberConfig& config() const noexcept = 0;
  // start = snapshot: true until the snapshot is delivered (poll() delivers it first).
  virtual bool in_snapshot() const noexcept { return false; }
  // Another line delivered the stream below `seq` and brought `read_until` (~0: not known)
  // (FailoverSubscriber): a transport that recovers holes (UD) stops waiting for those below
  // `seq`, and reads no further than `read_until`. Ring transports have no holes.
  virtual void cover_below(std::uint64_t /*seq*/, std::uint64_t /*read_until*/) noexcept {}
  virtual void close() noexcept = 0;
  // The wake-ups of the transport's background thread; nullptr when it runs none.
  virtual WakeCounter* wakeups() noexcept { return nullptr; }
};

// Whether an attach that failed with `e` may succeed later (Subscriber's attach_timeout retries).
bool attach_worth_retrying(const std::error_code& e) noexcept;

// `where`: the placement of the transport's background thread (Placement::for_endpoint).
std::unique_ptr<PublisherTransport> make_publisher_transport(const PublisherConfig& config,
                                                             const Placement& where);
// `between`: what Subscriber's between_attempts gives, for a transport that waits inside its
// constructor (shm: for the channel to appear).
std::unique_ptr<SubscriberTransport> make_subscriber_transport(const SubscriberConfig& config,
                                                               const Placement& where,
                                                               const std::function<void()>* between = nullptr);

}  // namespace tickrail::detail
