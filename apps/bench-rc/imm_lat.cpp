// rc-imm-lat: the RDMA WRITE WITH IMMEDIATE ping-pong perftest 4.5-0.17 lacks, with no tickrail
// code on its path: the floor under tickrail's RC CQ polling, measured as `ib_write_lat` measures
// a plain WRITE. Each side writes 64 bytes (inline) into the other's buffer with an immediate,
// busy-polls its receive CQ for the other's, and posts the receive back; one send in 16 is
// signalled. The receive is posted back inside the timed loop, before the next write, as
// ib_send_lat does. With -q 2, each direction has a connection of its own, as tickrail's publisher and
// subscriber pair does. RTT/2 of each round trip, from the TSC (LFENCE;RDTSC, calibrated as
// tickrail::Clock is), in microseconds: t_min, t_typical (the median), t_99 and t_99.9.
//
//   rc-imm-lat [-p PORT] [-n ITERS] [-w WARMUP]          the echoing side (listens)
//   rc-imm-lat [-p PORT] [-n ITERS] [-w WARMUP] ADDRESS  the pinging side
//
// A benchmark tool for apps/bench-rc/rc_tail.sh, not installed; pin it with taskset.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tickrail/clock.hpp"

namespace {

constexpr std::uint32_t kSize = 64;
constexpr std::uint32_t kRecvDepth = 64;
constexpr std::uint32_t kSignalEvery = 16;

struct Remote {
  std::uint64_t addr;
  std::uint32_t rkey;
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

struct Side {
  rdma_cm_id* id = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<char> buf = std::vector<char>(kSize * 2);
  Remote peer{};
  std::uint64_t posted = 0;

  void post_recv() {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(id->qp, &wr, &bad) != 0) die("ibv_post_recv");
  }
  void write_imm(bool last = false) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data() + kSize), kSize, mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_INLINE;
    if (++posted % kSignalEvery == 0 || last) wr.send_flags |= IBV_SEND_SIGNALED;
    wr.imm_data = static_cast<std::uint32_t>(posted);
    wr.wr_id = posted;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    if (ibv_post_send(id->qp, &wr, &bad) != 0) die("ibv_post_send");
    ibv_wc wc{};
    int n = 0;
    // Reap a signalled send without waiting; the last one is waited for, so that the peer
    // has it before this side disconnects.
    do {
      n = ibv_poll_cq(id->send_cq, 1, &wc);
      if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) die("send completion");
    } while (last && !(n == 1 && wc.wr_id == posted));
  }
  // Busy-polls the receive CQ, for at most 10 s: a peer that died ends the run.
  void wait_imm() {
    ibv_wc wc{};
    int n = 0;
    std::uint64_t spins = 0, since = 0;
    while ((n = ibv_poll_cq(id->recv_cq, 1, &wc)) == 0) {
      if ((++spins & 0xfff) != 0) continue;
      const std::uint64_t now = tickrail::Clock::now();
      if (since == 0) since = now;
      if (tickrail::Clock::instance().to_ns(now - since) > 10e9) {
        std::fprintf(stderr, "rc-imm-lat: no completion from the peer in 10 s\n");
        std::exit(1);
      }
    }
    if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
      std::fprintf(stderr, "rc-imm-lat: receive completion: %s\n", ibv_wc_status_str(wc.status));
      std::exit(1);
    }
    post_recv();
  }
};

ibv_qp_init_attr qp_attr() {
  ibv_qp_init_attr a{};
  a.cap.max_send_wr = kSignalEvery * 4;
  a.cap.max_recv_wr = kRecvDepth;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = kSize;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;
  return a;
}

void ready(Side& s) {
  s.mr = ibv_reg_mr(s.id->pd, s.buf.data(), s.buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (s.mr == nullptr) die("ibv_reg_mr");
  for (std::uint32_t i = 0; i < kRecvDepth; ++i) s.post_recv();
}

Remote mine(const Side& s) { return {reinterpret_cast<std::uintptr_t>(s.buf.data()), s.mr->rkey}; }

Remote theirs(const rdma_conn_param& p) {
  Remote r{};
  if (p.private_data == nullptr || p.private_data_len < sizeof r) {
    std::fprintf(stderr, "rc-imm-lat: the peer sent no buffer address\n");
    std::exit(1);
  }
  std::memcpy(&r, p.private_data, sizeof r);
  return r;
}

// `qps` connections to the same peer, in order: the pinging side's first one is the echoing
// side's first one.
std::vector<Side> connect(const char* address, const std::string& port, int qps) {
  rdma_addrinfo hints{};
  rdma_addrinfo* res = nullptr;
  hints.ai_port_space = RDMA_PS_TCP;
  if (address == nullptr) hints.ai_flags = RAI_PASSIVE;
  if (rdma_getaddrinfo(address, port.c_str(), &hints, &res) != 0) die("rdma_getaddrinfo");
  ibv_qp_init_attr attr = qp_attr();
  std::vector<Side> sides(static_cast<std::size_t>(qps));
  rdma_cm_id* listen = nullptr;
  if (address == nullptr) {
    if (rdma_create_ep(&listen, res, nullptr, &attr) != 0) die("rdma_create_ep");
    if (rdma_listen(listen, qps) != 0) die("rdma_listen");
  }
  for (Side& s : sides) {
    rdma_conn_param p{};
    if (address == nullptr) {
      if (rdma_get_request(listen, &s.id) != 0) die("rdma_get_request");
      s.peer = theirs(s.id->event->param.conn);
      ready(s);
      const Remote m = mine(s);
      p.private_data = &m;
      p.private_data_len = sizeof m;
      if (rdma_accept(s.id, &p) != 0) die("rdma_accept");
    } else {
      // A fresh one each time: rdma_create_ep writes the CQs it made back into it.
      ibv_qp_init_attr mine_attr = qp_attr();
      if (rdma_create_ep(&s.id, res, nullptr, &mine_attr) != 0) die("rdma_create_ep");
      ready(s);
      const Remote m = mine(s);
      p.private_data = &m;
      p.private_data_len = sizeof m;
      p.retry_count = 7;
      if (rdma_connect(s.id, &p) != 0) die("rdma_connect");
      s.peer = theirs(s.id->event->param.conn);
    }
  }
  rdma_freeaddrinfo(res);
  return sides;
}

double at(std::vector<double>& v, double q) {
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  std::string port = "18600";
  long iters = 5000, warmup = 500, qps = 1;
  const char* address = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-p" || a == "-n" || a == "-w" || a == "-q") && i + 1 < argc) {
      const char* v = argv[++i];
      if (a == "-p") port = v;
      else if (a == "-n") iters = std::strtol(v, nullptr, 10);
      else if (a == "-q") qps = std::strtol(v, nullptr, 10);
      else warmup = std::strtol(v, nullptr, 10);
    } else if (a == "-h" || a == "--help") {
      std::puts("usage: rc-imm-lat [-p PORT] [-n ITERS] [-w WARMUP] [-q 1|2] [ADDRESS]\n"
                "An RDMA WRITE WITH IMMEDIATE ping-pong (64 bytes); without ADDRESS, the echoing side.\n"
                "-q 2: one connection each way, as a tickrail publisher and subscriber pair has.");
      return 0;
    } else if (a[0] != '-' && address == nullptr) {
      address = argv[i];
    } else {
      std::fprintf(stderr, "rc-imm-lat: unknown argument %s (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (iters < 1 || iters > 100'000'000 || warmup < 0 || warmup > 100'000'000 || qps < 1 ||
      qps > 2) {
    std::fprintf(stderr, "rc-imm-lat: -n 1..1e8, -w 0..1e8, -q 1..2\n");
    return 2;
  }
  const auto& clock = tickrail::Clock::instance();
  std::vector<Side> sides = connect(address, port, static_cast<int>(qps));
  Side& forth = sides.front();  // ping -> echo
  Side& back = sides.back();    // echo -> ping
  const long total = iters + warmup;
  if (address == nullptr) {
    for (long i = 0; i < total; ++i) {
      forth.wait_imm();
      back.write_imm(i + 1 == total);
    }
  } else {
    std::vector<double> rtt2;
    rtt2.reserve(static_cast<std::size_t>(iters));
    for (long i = 0; i < total; ++i) {
      const std::uint64_t t0 = tickrail::Clock::now_fenced();
      forth.write_imm();
      back.wait_imm();
      const std::uint64_t t1 = tickrail::Clock::now();
      if (i >= warmup) rtt2.push_back(clock.to_ns(t1 - t0) / 2e3);
    }
    const double mn = *std::min_element(rtt2.begin(), rtt2.end());
    std::printf("t_min %.2f t_typical %.2f t_99 %.2f t_99.9 %.2f\n", mn, at(rtt2, 0.5),
                at(rtt2, 0.99), at(rtt2, 0.999));
  }
  for (Side& s : sides) rdma_disconnect(s.id);
  return 0;
}
