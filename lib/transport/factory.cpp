// The one place that knows every transport.
#include "tickrail/error.hpp"
#include "transport/shm/shm_publisher.hpp"
#include "transport/rdma/common/device.hpp"
#include "transport/rdma/rc/rc_publisher.hpp"
#include "transport/rdma/rc/rc_subscriber.hpp"
#include "transport/rdma/ud/ud_publisher.hpp"
#include "transport/rdma/ud/ud_subscriber.hpp"
#include "transport/shm/shm_subscriber.hpp"
#include "transport/transport.hpp"

namespace tickrail::detail {

std::unique_ptr<PublisherTransport> make_publisher_transport(const PublisherConfig& config) {
  config.validate();
  if (config.transport != TransportKind::shm) rdma::require_device(config.rdma.device, to_string(config.transport));
  switch (config.transport) {
    case TransportKind::shm: return std::make_unique<shm::ShmPublisher>(config);
    case TransportKind::ud: return std::make_unique<rdma::ud::UdPublisher>(config);
    case TransportKind::rc: return std::make_unique<rdma::rc::RcPublisher>(config);
  }
  throw Error(Errc::unsupported, std::string("publisher transport '") + to_string(config.transport) +
                                     "' is not available in this build");
}

std::unique_ptr<SubscriberTransport> make_subscriber_transport(const SubscriberConfig& config) {
  config.validate();
  if (config.transport != TransportKind::shm) rdma::require_device(config.rdma.device, to_string(config.transport));
  switch (config.transport) {
    case TransportKind::shm: return std::make_unique<shm::ShmSubscriber>(config);
    case TransportKind::ud: return std::make_unique<rdma::ud::UdSubscriber>(config);
    case TransportKind::rc: return std::make_unique<rdma::rc::RcSubscriber>(config);
  }
  throw Error(Errc::unsupported, std::string("subscriber transport '") +
                                     to_string(config.transport) + "' is not available in this build");
}

}  // namespace tickrail::detail
