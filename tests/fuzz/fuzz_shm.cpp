// A live shared-memory channel whose hostile subscriber writes every word it can reach (its own
// control line: credit, state, reason, first sequence, back-pressure count) with fuzzer-chosen
// values, between publishes, while an honest subscriber drains. No crash, no out-of-bounds
// access (ASan, UBSan), and the honest subscriber's counts stay exact.
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "transport/shm/segment.hpp"

using namespace tickrail;
using namespace std::chrono_literals;
namespace shm = tickrail::shm;

namespace {

struct Channel {
  std::unique_ptr<Publisher> pub;
  std::unique_ptr<Subscriber> honest;
  shm::Fd sock;  // the hostile subscriber's connection, kept open
  shm::Control* hostile = nullptr;
  std::uint64_t expect = 0;  // next sequence the honest subscriber must see

  Channel() {
    const std::string ch = "fuzz-shm-" + std::to_string(::getpid());
    PublisherConfig pc;
    pc.channel = ch;
    pc.ring_capacity = 64;
    pc.max_subscribers = 2;
    pc.conductor_period = 1ms;
    pc.stats = false;
    pub = std::make_unique<Publisher>(pc);
    SubscriberConfig sc;
    sc.channel = ch;
    sc.stats = false;
    honest = std::make_unique<Subscriber>(sc);
    shm::PeerCred who;
    const auto me = shm::Allow::resolve({}, {}, static_cast<std::uint32_t>(::geteuid()), "", "");
    sock = shm::connect_channel("/dev/shm", ch, 1s, me, who);
    const shm::Request r{shm::kMagic, shm::kVersion, 2 /* disconnect */, 1'000'000, 0};
    if (!shm::send_message(sock.get(), &r, sizeof r, nullptr, 0)) std::abort();
    pollfd p{sock.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) std::abort();
    shm::Reply reply{};
    std::vector<shm::Fd> fds;
    if (shm::receive_message(sock.get(), &reply, sizeof reply, fds, 3) != sizeof reply || fds.size() != 3) {
      std::abort();
    }
    void* c = ::mmap(nullptr, shm::control_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fds[2].get(), 0);
    if (c == MAP_FAILED) std::abort();
    hostile = static_cast<shm::Control*>(c);
    (void)pub->wait_subscribers(2, 5s);
    if (!honest->wait_active(5s)) std::abort();
    expect = pub->next_sequence();
  }

  void drain() {
    honest->poll([&](const Tick& t) {
      if (t.seq != expect) std::abort();  // a gap or a repeat: the honest subscriber was hurt
      ++expect;
    });
  }
};

Channel& channel() {
  static Channel c;
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Channel& c = channel();
  // Each 9-byte record: which word, then the value written to it; then a burst of publishes.
  for (std::size_t i = 0; i + 9 <= size; i += 9) {
    std::uint64_t v = 0;
    std::memcpy(&v, data + i + 1, sizeof v);
    switch (data[i] % 5) {
      case 0: c.hostile->credit.store(v, std::memory_order_release); break;
      case 1: c.hostile->state.store(static_cast<std::uint32_t>(v), std::memory_order_relaxed); break;
      case 2: c.hostile->reason.store(static_cast<std::uint32_t>(v), std::memory_order_relaxed); break;
      case 3: c.hostile->start_seq.store(v, std::memory_order_relaxed); break;
      case 4: c.hostile->back_pressure.store(v, std::memory_order_relaxed); break;
    }
    Tick t[8]{};
    (void)c.pub->publish(std::span<const Tick>(t, 1 + data[i] % 8));
    c.drain();
  }
  c.drain();
  // Everything published reached the honest subscriber, exactly once, in order.
  if (c.expect != c.pub->next_sequence()) std::abort();
  return 0;
}
