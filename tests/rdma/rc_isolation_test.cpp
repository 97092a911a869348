// Isolation between subscribers: a subscriber that knows another's credit address and rkey
// cannot write there (each connection has a protection domain of its own), and the other
// keeps receiving. The two subscribers here speak the wire protocol by hand (protocol.hpp), so
// that the test can post the WRITE the library never would.
#include <catch2/catch.hpp>

#include <future>
#include <optional>
#include <thread>

#include "rc_test_util.hpp"
#include "rig_env.hpp"
#include "tickrail/memory.hpp"
#include "tickrail/publisher.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/common/connection.hpp"
#include "transport/rdma/rc/protocol.hpp"
#include "transport/rdma/verbs.hpp"

using namespace tickrail;
using namespace tickrail::rdma;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kCapacity = 64;

// A subscriber built from the wrappers: its own PD, ring region, CQ and QP.
struct RawSubscriber {
  EventChannel channel;
  std::optional<CmId> id;
  std::optional<ProtectionDomain> pd;
  MappedRegion region;
  std::optional<MemoryRegion> mr;
  std::optional<CompletionQueue> cq;
  std::optional<CmQueuePair> qp;
  rc::AcceptReply reply{};

  RawSubscriber(const std::string& addr, std::uint16_t port) {
    id.emplace(channel, RDMA_PS_TCP);
    resolve(*id, channel, Address::parse(addr, port), 10s);
    pd.emplace(id->verbs());
    region = MappedRegion(rc::region_bytes(kCapacity));
    mr.emplace(*pd, region.data(), rc::region_bytes(kCapacity),
               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    cq.emplace(id->verbs(), 16);
    ibv_qp_init_attr qa{};
    qa.send_cq = cq->get();
    qa.recv_cq = cq->get();
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = 8;
    qa.cap.max_recv_wr = 1;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qp.emplace(*id, pd->get(), qa);
    SubscriberConfig c;
    c.channel = "rc-isolation";
    const rc::ConnectRequest req =
        rc::make_request(c, rc::WriteMode::memory, kCapacity,
                         reinterpret_cast<std::uintptr_t>(region.data()), mr->rkey());
    rdma_conn_param param = connection_param(std::as_bytes(std::span(&req, 1)), 1, 1);
    id->connect(param);
    CmEvent ev = channel.expect(RDMA_CM_EVENT_ESTABLISHED, 20s, "connect by hand");
    const auto r = rc::decode_accept(ev.private_data());
    REQUIRE(r);
    reply = *r;
  }

  // RDMA WRITE of one word to (addr, rkey) from this subscriber's QP; the completion status.
  ibv_wc_status write_word(std::uint64_t addr, std::uint32_t rkey, std::uint64_t value) {
    auto* src = reinterpret_cast<std::uint64_t*>(static_cast<std::byte*>(region.data()) +
                                                 offsetof(rc::ControlBlock, credit_source));
    *src = value;
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(src), 8, mr->lkey()};
    ibv_send_wr wr{};
    wr.wr_id = value;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(qp->get(), &wr, &bad) == 0);
    return cq->next(20s, "a WRITE by hand").status;
  }

  std::uint64_t slot_seq(std::uint64_t seq) const {
    const auto* slots = reinterpret_cast<const Slot*>(static_cast<const std::byte*>(region.data()) +
                                                      rc::kControlBytes);
    return rc::load_word(slots[seq & (kCapacity - 1)].words[kSeqWord]);
  }
};

std::unique_ptr<RawSubscriber> connect(Publisher& pub, const std::string& addr) {
  const std::uint16_t port = pub.config().rdma.port;
  auto s = rc_test::construct_serving(pub, [&] { return std::make_unique<RawSubscriber>(addr, port); });
  REQUIRE(s != nullptr);
  return s;
}

}  // namespace

TEST_CASE("aSubscriberCannotWriteAnotherSubscribersCreditAndTheOtherCarriesOn") {
  const std::string addr = test::address(test::device());
  PublisherConfig pc;
  pc.transport = TransportKind::rc;
  pc.channel = "rc-isolation";
  pc.ring_capacity = kCapacity;
  pc.rdma.address = addr;
  pc.rdma.port = 0;
  Publisher pub(pc);
  auto a = connect(pub, addr);
  auto b = connect(pub, addr);
  REQUIRE(pub.wait_subscribers(2, 20s) == 2);
  REQUIRE(a->reply.credit_rkey != b->reply.credit_rkey);

  // Its own credit word: allowed.
  CHECK(a->write_word(a->reply.credit_addr, a->reply.credit_rkey, a->reply.first_seq) ==
        IBV_WC_SUCCESS);
  // The other's, with the other's rkey: refused by the publisher's NIC (another PD).
  const ibv_wc_status st = a->write_word(b->reply.credit_addr, b->reply.credit_rkey, 999999);
  INFO(ibv_wc_status_str(st));
  CHECK(st == IBV_WC_REM_ACCESS_ERR);

  // The other subscriber still receives, and its credit was not moved by the attempt.
  const Tick t = rc_test::payload(pub.next_sequence());
  const std::uint64_t seq = pub.next_sequence();
  (void)pub.publish(t);
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (b->slot_seq(seq) != seq && std::chrono::steady_clock::now() < until) pub.service();
  CHECK(b->slot_seq(seq) == seq);
  for (const auto& s : pub.subscribers()) CHECK(s.position < 999999);
}
