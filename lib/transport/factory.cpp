// The one place that knows every transport (those this build has: -Drdma=disabled leaves out
// rc and ud).
#include "tickrail/build_config.hpp"
#include "tickrail/error.hpp"
#include "transport/shm/shm_publisher.hpp"
#include "transport/shm/shm_subscriber.hpp"
#include "transport/transport.hpp"
#if TICKRAIL_HAVE_RDMA
#include "transport/rdma/common/device.hpp"
#include "transport/rdma/rc/rc_publisher.hpp"
#include "transport/rdma/rc/rc_subscriber.hpp"
#include "transport/rdma/ud/ud_publisher.hpp"
#include "transport/rdma/ud/ud_subscriber.hpp"
#endif

namespace tickrail::detail {

std::unique_ptr<PublisherTransport> make_publisher_transport(const PublisherConfig& config,
                                                             const Placement& where) {
  config.validate();
  if (config.transport == TransportKind::shm) return std::make_unique<shm::ShmPublisher>(config, where);
#if TICKRAIL_HAVE_RDMA
  rdma::require_device(config.rdma.device, to_string(config.transport));
  if (config.transport == TransportKind::ud) return std::make_unique<rdma::ud::UdPublisher>(config, where);
  if (config.transport == TransportKind::rc) return std::make_unique<rdma::rc::RcPublisher>(config, where);
#endif
  throw Error(Errc::unsupported, std::string("publisher transport '") + to_string(config.transport) +
                                     "' is not available in this build (built without RDMA)");
}

std::unique_ptr<SubscriberTransport> make_subscriber_transport(const SubscriberConfig& config,
                                                               const Placement& where,
                                                               const std::function<void()>* between) {
  config.validate();
  (void)where;  // a shared-memory subscriber runs no thread
  if (config.transport == TransportKind::shm) return std::make_unique<shm::ShmSubscriber>(config, between);
#if TICKRAIL_HAVE_RDMA
  rdma::require_device(config.rdma.device, to_string(config.transport));
  if (config.transport == TransportKind::ud) return std::make_unique<rdma::ud::UdSubscriber>(config, where);
  if (config.transport == TransportKind::rc) return std::make_unique<rdma::rc::RcSubscriber>(config, where);
#endif
  throw Error(Errc::unsupported, std::string("subscriber transport '") + to_string(config.transport) +
                                     "' is not available in this build (built without RDMA)");
}

}  // namespace tickrail::detail
