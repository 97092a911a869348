// UD recovery on real verbs, deterministic: publisher and subscriber in one process and one
// thread, datagrams dropped by the subscriber's receive-path test hook. The publisher does not
// move while the subscriber recovers (the NIC serves the RDMA READs), so which ticks are still in
// history, and so the exact count lost for good, is known in advance.
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <numeric>
#include <vector>

#include "tickrail/publisher.hpp"
#include "tickrail/subscriber.hpp"
#include "transport/rdma/ud/ud_publisher.hpp"
#include "transport/rdma/ud/ud_subscriber.hpp"
#include "transport/rdma/ud/recovery_link.hpp"
#include "core/last_value.hpp"
#include "ud_support.hpp"

using namespace tickrail;
using namespace tickrail::rdma::test;
using rdma::ud::DatagramHeader;
using rdma::ud::DatagramKind;
using rdma::ud::UdPublisher;
using rdma::ud::UdSubscriber;
using namespace std::chrono_literals;

namespace {

// Drops data datagrams whose first sequence matches (and, once `mute_heartbeats` is set, every
// heartbeat: then nothing but the data reveals a hole, and when it does is known).
struct DropRule {
  std::function<bool(std::uint64_t first)> match;
  std::uint64_t dropped = 0;  // ticks
  bool mute_heartbeats = false;
  static bool hook(void* ctx, const std::byte* p, std::size_t len) {
    auto* self = static_cast<DropRule*>(ctx);
    if (len < sizeof(DatagramHeader)) return false;
    const DatagramHeader h = rdma::ud::read_header(p);
    if (h.kind == DatagramKind::heartbeat) return self->mute_heartbeats;
    if (h.kind != DatagramKind::data || !self->match(h.first_seq)) return false;
    self->dropped += h.count;
    return true;
  }
};

struct Pair {
  Pair(const PublisherConfig& pc, const SubscriberConfig& sc) : pub(pc), sub(sc) {}
  UdPublisher pub;
  UdSubscriber sub;
  std::vector<std::uint64_t> got;
  std::uint64_t bad_content = 0;

  std::size_t poll() {
    auto h = [&](const Tick& t) {
      got.push_back(t.seq);
      if (!ud_tick_ok(t)) ++bad_content;
    };
    detail::TickSink sink(h);
    return sub.poll(sink, 256);
  }
  void step() {
    (void)pub.publish(std::span<const Tick>{});  // service: heartbeats
    (void)poll();
  }
  // The subscriber knows the session and its recovery link is up.
  void connect() {
    REQUIRE(poll_until([&] { return sub.ready() && pub.subscriber_count() == 1; },
                       [&] { step(); }, 30s));
  }
  void publish(std::uint64_t i) {
    const Tick t = ud_tick(i);
    REQUIRE(pub.publish(std::span<const Tick>(&t, 1)).ok());
  }
  void drain_until(std::size_t n) {
    const bool done = poll_until([&] { return got.size() >= n; }, [&] { step(); }, 60s);
    INFO("delivered " << got.size() << " of " << n);
    REQUIRE(done);
  }
  void report(const char* name) const {
    const auto c = sub.ud_counters();
    std::cout << name << ": delivered " << c.delivered << ", datagrams " << c.datagrams
              << " (heartbeats " << c.heartbeats << "), gaps " << c.gaps << ", recovered "
              << c.recovered << " in " << c.reads << " reads, lost " << c.lost << " ("
              << c.loss_events << " runs), duplicates " << c.duplicates << ", hook-dropped "
              << c.hook_dropped << "\n";
  }
};

std::vector<std::uint64_t> seqs(std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::uint64_t> v(hi - lo);
  std::iota(v.begin(), v.end(), lo);
  return v;
}

}  // namespace

TEST_CASE("everyDroppedTickStillInHistoryIsRecoveredAndDeliveredInOrder") {
  PublisherConfig pc = ud_publisher_config("239.7.7.11", 7481);
  pc.rdma.heartbeat_interval = 20ms;
  Pair p(pc, ud_subscriber_config("239.7.7.11"));
  DropRule drop{[](std::uint64_t s) { return s % 10 == 3 || (s >= 50 && s < 80); }};
  p.sub.set_drop_hook(&DropRule::hook, &drop);
  p.connect();
  const std::uint64_t n = 3000;
  for (std::uint64_t i = 1; i <= n; ++i) {
    p.publish(i);
    (void)p.poll();
  }
  p.drain_until(n);
  p.report("10% + a run of 30 dropped");
  CHECK(p.got == seqs(1, n + 1));
  CHECK(p.bad_content == 0);
  const auto c = p.sub.ud_counters();
  CHECK(drop.dropped == 300 + 27);
  CHECK(c.recovered == drop.dropped);
  CHECK(c.lost == 0);
  CHECK(c.gaps > 0);
  CHECK(p.sub.counters().received == n);
  CHECK(p.sub.counters().lost == 0);
  CHECK(p.sub.counters().recovered == drop.dropped);
  CHECK(p.sub.counters().gaps == c.gaps);
}

TEST_CASE("ticksNoLongerInHistoryAreReportedLostWithTheExactCount") {
  PublisherConfig pc = ud_publisher_config("239.7.7.12", 7482);
  pc.rdma.history = 1024;
  pc.rdma.heartbeat_interval = 20ms;
  Pair p(pc, ud_subscriber_config("239.7.7.12"));
  DropRule drop{[](std::uint64_t s) { return s >= 200 && s < 1500; }};
  p.sub.set_drop_hook(&DropRule::hook, &drop);
  p.connect();
  drop.mute_heartbeats = true;  // a heartbeat must not reveal the hole before 1500 does
  for (std::uint64_t i = 1; i <= 2000; ++i) {
    p.publish(i);
    if (i < 200 || i >= 1500) {
      // Recovery of the hole finishes before the publisher moves on.
      INFO("tick " << i << ", subscriber at " << p.sub.next_sequence());
      REQUIRE(poll_until([&] { return p.sub.next_sequence() == i + 1; }, [&] { (void)p.poll(); },
                         30s));
    } else {
      (void)p.poll();  // consume the (dropped) datagrams: the receive queue must not overflow
    }
  }
  p.report("1300 dropped, history 1024");
  // When 1500 arrived the history held 477..1500: 200..476 are gone, the rest recovered.
  std::vector<std::uint64_t> want = seqs(1, 200);
  const auto tail = seqs(477, 2001);
  want.insert(want.end(), tail.begin(), tail.end());
  CHECK(p.got == want);
  CHECK(p.bad_content == 0);
  const auto c = p.sub.ud_counters();
  CHECK(c.lost == 277);
  CHECK(c.loss_events == 1);
  CHECK(c.recovered == 1500 - 477);
  CHECK(p.sub.counters().lost == 277);
  CHECK(p.sub.counters().skips == 1);  // one run lost for good
  CHECK(p.sub.counters().laps == 0);   // no ring to lap
  CHECK(p.sub.counters().received + p.sub.counters().lost == 2000);
}

TEST_CASE("aLostTailIsRevealedByTheHeartbeatAndRecovered") {
  PublisherConfig pc = ud_publisher_config("239.7.7.13", 7483);
  pc.rdma.heartbeat_interval = 20ms;
  Pair p(pc, ud_subscriber_config("239.7.7.13"));
  DropRule drop{[](std::uint64_t s) { return s > 95; }};
  p.sub.set_drop_hook(&DropRule::hook, &drop);
  p.connect();
  for (std::uint64_t i = 1; i <= 100; ++i) p.publish(i);
  p.drain_until(100);
  p.report("last 5 dropped");
  CHECK(p.got == seqs(1, 101));
  CHECK(p.sub.ud_counters().recovered == 5);
  CHECK(p.sub.ud_counters().lost == 0);
}

TEST_CASE("aLateJoinerRecoversTheLastKTicksBeforeTheLiveOnes") {
  PublisherConfig pc = ud_publisher_config("239.7.7.14", 7484);
  pc.rdma.heartbeat_interval = 20ms;
  UdPublisher pub(pc);
  for (std::uint64_t i = 1; i <= 500; ++i) {
    const Tick t = ud_tick(i);
    (void)pub.publish(std::span<const Tick>(&t, 1));
  }
  SubscriberConfig sc = ud_subscriber_config("239.7.7.14");
  sc.rdma.late_join_recover = 100;
  UdSubscriber sub(sc);
  std::vector<std::uint64_t> got;
  auto handler = [&](const Tick& t) {
    CHECK(ud_tick_ok(t));
    got.push_back(t.seq);
  };
  detail::TickSink sink(handler);
  auto step = [&] {
    (void)pub.publish(std::span<const Tick>{});
    (void)sub.poll(sink, 256);
  };
  REQUIRE(poll_until([&] { return got.size() >= 100; }, step, 30s));
  for (std::uint64_t i = 501; i <= 600; ++i) {
    const Tick t = ud_tick(i);
    (void)pub.publish(std::span<const Tick>(&t, 1));
    (void)sub.poll(sink, 256);
  }
  REQUIRE(poll_until([&] { return got.size() >= 200; }, step, 30s));
  CHECK(got == seqs(401, 601));
  CHECK(sub.ud_counters().recovered == 100);
}

TEST_CASE("batchedDatagramsCarryManyTicksAndTheirLossIsRecoveredTheSame") {
  PublisherConfig pc = ud_publisher_config("239.7.7.15", 7485);
  pc.rdma.heartbeat_interval = 20ms;
  pc.rdma.max_ticks_per_datagram = 15;  // the most rxe's 1024-byte MTU carries
  Pair p(pc, ud_subscriber_config("239.7.7.15"));
  REQUIRE(p.pub.ticks_per_datagram() == 15);
  DropRule drop{[](std::uint64_t s) { return (s / 15) % 7 == 3; }};
  p.sub.set_drop_hook(&DropRule::hook, &drop);
  p.connect();
  std::vector<Tick> batch(40);
  std::uint64_t next = 1;
  for (int round = 0; round < 100; ++round) {
    for (auto& t : batch) t = ud_tick(next++);
    REQUIRE(p.pub.publish(batch).ok());  // 2 full datagrams and a partial one per call
    (void)p.poll();
  }
  p.drain_until(4000);
  p.report("batched, 1 datagram in 7 dropped");
  CHECK(p.got == seqs(1, 4001));
  const auto c = p.sub.ud_counters();
  CHECK(c.recovered == drop.dropped);
  CHECK(drop.dropped > 0);
  CHECK(p.pub.ud_counters().datagrams == 300);
  CHECK(c.ticks + drop.dropped == 4000);
}

TEST_CASE("oneSubscriberOfTwoGroupsDeliversEachStreamInItsOrder") {
  PublisherConfig pa = ud_publisher_config("239.7.7.16", 7486);
  PublisherConfig pb = ud_publisher_config("239.7.7.17", 7487);
  pa.rdma.heartbeat_interval = pb.rdma.heartbeat_interval = 20ms;
  UdPublisher a(pa);
  UdPublisher b(pb);
  SubscriberConfig sc = ud_subscriber_config("239.7.7.16");
  sc.rdma.groups.push_back("239.7.7.17");
  UdSubscriber sub(sc);
  std::vector<std::uint64_t> from_a;
  std::vector<std::uint64_t> from_b;
  auto handler = [&](const Tick& t) { (t.flags == 1 ? from_a : from_b).push_back(t.seq); };
  detail::TickSink sink(handler);
  auto step = [&] {
    (void)a.publish(std::span<const Tick>{});
    (void)b.publish(std::span<const Tick>{});
    (void)sub.poll(sink, 256);
  };
  REQUIRE(poll_until([&] { return sub.ready(); }, step, 30s));
  for (std::uint64_t i = 1; i <= 500; ++i) {
    Tick t = ud_tick(i);
    t.flags = 1;
    (void)a.publish(std::span<const Tick>(&t, 1));
    if (i % 2 == 0) {
      t.flags = 2;
      (void)b.publish(std::span<const Tick>(&t, 1));
    }
    (void)sub.poll(sink, 256);
  }
  REQUIRE(poll_until([&] { return from_a.size() >= 500 && from_b.size() >= 250; }, step, 30s));
  CHECK(from_a == seqs(1, 501));
  CHECK(from_b == seqs(1, 251));
  CHECK(sub.group_count() == 2);
  CHECK(sub.session(0) == a.session());
  CHECK(sub.session(1) == b.session());
}

TEST_CASE("aStreamThroughThePublicApiArrivesInOrder") {
  PublisherConfig pc = ud_publisher_config("239.7.7.18", 7488);
  pc.rdma.heartbeat_interval = 10ms;
  Publisher pub(pc);
  Subscriber sub(ud_subscriber_config("239.7.7.18"));
  std::vector<std::uint64_t> got;
  auto handler = [&](const Tick& t) {
    CHECK(ud_tick_ok(t));
    got.push_back(t.seq);
  };
  REQUIRE(poll_until([&] { return sub.state() == SubscriberState::active; },
                     [&] {
                       pub.service();
                       (void)sub.poll(handler);
                     },
                     30s));
  CHECK(sub.wait_active(1s));
  for (std::uint64_t i = 1; i <= 1000; ++i) {
    const Tick t = ud_tick(i);
    CHECK(pub.publish(t).ok());
    (void)sub.poll(handler);
  }
  REQUIRE(poll_until([&] { return got.size() >= 1000; },
                     [&] {
                       pub.service();
                       (void)sub.poll(handler);
                     },
                     30s));
  CHECK(got == seqs(1, 1001));
  CHECK(sub.counters().received == 1000);
  CHECK(sub.counters().lost == 0);
  CHECK(pub.counters().published == 1000);
  CHECK(pub.next_sequence() == 1001);
}

// [state] on a UD channel: the publisher keeps the last-value table after the history, and the
// recovery connection grants it for RDMA READ and nothing else. Each entry read over the link
// holds the last tick of its instrument and class, as the test computed it on its own.
TEST_CASE("aUdPublisherKeepsTheLastValueTableAndGrantsItForReadingOnly") {
  constexpr std::uint32_t kCapacity = 64;
  PublisherConfig pc = ud_publisher_config("239.7.7.19", 7489);
  pc.state.enabled = true;
  pc.state.capacity = kCapacity;
  UdPublisher pub(pc);
  REQUIRE(pub.table() != nullptr);
  const detail::TableGeometry g{kCapacity, 7};
  CHECK(pub.table()->geometry() == g);

  // Quotes, trades, executions, statuses and adds (no class) over 80 instruments: 64 kept, 16
  // beyond the capacity (counted, not kept).
  constexpr TickKind kKinds[] = {TickKind::Quote, TickKind::Trade, TickKind::Add, TickKind::Execute,
                                 TickKind::Status, TickKind::Quote, TickKind::Quote};
  std::vector<std::uint64_t> last(g.entries(), 0);
  std::uint64_t beyond = 0;
  std::vector<Tick> batch;
  for (std::uint64_t i = 1; i <= 5000; ++i) {
    Tick t = ud_tick(i);
    t.kind = kKinds[i % std::size(kKinds)];
    t.instrument = static_cast<std::uint32_t>((i * 7) % 80);
    const std::size_t k = g.entry_of(t);
    if (state_class_of(t.kind) >= 0 && t.instrument >= kCapacity) ++beyond;
    else if (k != ~std::size_t{0}) last[k] = i;
    batch.push_back(t);
    if (batch.size() == 13 || i == 5000) {
      REQUIRE(pub.publish(batch).ok());
      batch.clear();
    }
  }
  CHECK(pub.next_sequence() == 5001);
  CHECK(pub.counters().state_beyond == beyond);

  rdma::ud::RecoveryLink::Params lp;
  lp.publisher = rdma::Address::parse(pc.rdma.address, pub.recovery_port());
  lp.session = pub.session();
  lp.device = pc.rdma.device;
  lp.want_table = true;
  rdma::ud::RecoveryLink link(lp);
  REQUIRE(link.table().has_value());
  CHECK(*link.table() == g);

  Tick got{};
  REQUIRE(link.probe_table(false, 0, got) == IBV_WC_SUCCESS);
  std::uint64_t table_next = 0;
  std::memcpy(&table_next, &got, sizeof table_next);
  CHECK(table_next == 5001);
  std::uint64_t filled = 0;
  for (std::size_t k = 0; k < g.entries(); ++k) {
    REQUIRE(link.probe_table(false, sizeof(rdma::TableHeader) + k * sizeof(Slot), got) == IBV_WC_SUCCESS);
    INFO("entry " << k << " (instrument " << k / kStateClasses << ", class " << k % kStateClasses << ")");
    CHECK(got.seq == last[k]);
    if (last[k] != 0) {
      ++filled;
      const Tick want = ud_tick(last[k]);
      CHECK(got.price == want.price);
      CHECK(got.order_ref == want.order_ref);
      CHECK(got.instrument == k / kStateClasses);
    }
  }
  CHECK(filled > 0);
  CHECK(pub.counters().state_entries == filled);

  // Written by the publisher's CPU only: a subscriber's WRITE fails, and changes nothing.
  const Slot before = pub.table()->entries()[0];
  CHECK(link.probe_table(true, sizeof(rdma::TableHeader), got) != IBV_WC_SUCCESS);
  CHECK(std::memcmp(&before, &pub.table()->entries()[0], sizeof before) == 0);

  // A channel without [state] grants no table.
  UdPublisher plain(ud_publisher_config("239.7.7.20", 7490));
  lp.publisher = rdma::Address::parse(pc.rdma.address, plain.recovery_port());
  lp.session = plain.session();
  rdma::ud::RecoveryLink plain_link(lp);
  CHECK_FALSE(plain_link.table().has_value());
}
