#include "pingpong.hpp"

#include <cstdio>

namespace tickrail::jitter {

std::string next_group(const std::string& group) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  if (std::sscanf(group.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || d > 255) {
    return group;  // not dotted IPv4: the transport's validation names it
  }
  char out[32];
  std::snprintf(out, sizeof out, "%u.%u.%u.%u", a, b, c, (d + 1) % 256);
  return out;
}

PublisherConfig forward_publisher(const SubscriberConfig& sc) {
  PublisherConfig pc;
  pc.transport = sc.transport;
  pc.channel = sc.channel;
  pc.max_subscribers = 1;
  pc.shm_dir = sc.shm_dir;
  pc.stats = sc.stats;
  pc.lock_memory = sc.lock_memory;
  pc.rdma = sc.rdma;
  pc.stamp_send_time = true;  // the ping's send time, on this end's clock
  return pc;
}

namespace {
RdmaConfig echo_rdma(const SubscriberConfig& sc, const Options& o) {
  RdmaConfig r = sc.rdma;
  if (!o.echo_address.empty()) r.address = o.echo_address;
  r.port = static_cast<std::uint16_t>(sc.rdma.port + 1);
  r.groups = {o.echo_group.empty() ? next_group(sc.rdma.groups.empty() ? std::string("239.1.1.1")
                                                                       : sc.rdma.groups.front())
                                   : o.echo_group};
  return r;
}
}  // namespace

PublisherConfig echo_publisher(const SubscriberConfig& sc, const Options& o) {
  PublisherConfig pc = forward_publisher(sc);
  pc.channel = sc.channel + "-echo";
  pc.rdma = echo_rdma(sc, o);
  pc.stamp_send_time = false;  // the ping goes back as it came, its send time included
  return pc;
}

SubscriberConfig echo_subscriber(const SubscriberConfig& sc, const Options& o) {
  SubscriberConfig e = sc;
  e.channel = sc.channel + "-echo";
  e.rdma = echo_rdma(sc, o);
  e.policy = SlowConsumerPolicy::block;
  return e;
}

}  // namespace tickrail::jitter
