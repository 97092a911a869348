// (c) tickrail's own proof that RDMA WRITE works on the device: two RC queue pairs connected
// through librdmacm; the client RDMA WRITEs a known pattern into the server's registered buffer,
// then a second pattern with RDMA WRITE WITH IMMEDIATE; the server sees the immediate on its
// receive CQ, checks every byte of both, and SENDs its verdict back.
//
//   rdma_write_check                         server and client in two processes (fork)
//   rdma_write_check --server [--port P]     server only (prints "listening on ADDR:PORT")
//   rdma_write_check --client --port P [--addr A]
// Options: --addr A (default: TICKRAIL_RDMA_ADDR / the device's address), --bytes N (per
// pattern, default 65536), --timeout-ms T (each wait, default 20000). Exit status 0 only when
// every byte arrived and the immediate was seen.
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rig_env.hpp"
#include "tickrail/error.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/verbs.hpp"
#include "transport/rdma/verbs_error.hpp"

using namespace tickrail;
using namespace tickrail::rdma;
using std::chrono::milliseconds;

namespace {

constexpr std::uint32_t kMagic = 0x54525743;  // "TRWC"
constexpr std::uint32_t kImmediate = 0x5eed1234;
constexpr std::uint32_t kSeedWrite = 1;
constexpr std::uint32_t kSeedWriteImm = 2;

// Server -> client in the accept's private data: where to write.
struct Offer {
  std::uint32_t magic;
  std::uint32_t rkey;
  std::uint64_t addr;
  std::uint64_t length;
};

// Server -> client by SEND once the bytes are checked.
struct Verdict {
  std::uint32_t magic;
  std::uint32_t ok;
  std::uint64_t bad_offset;  // first wrong byte, or ~0
  std::uint32_t immediate;   // as received
  std::uint32_t pad;
};

enum class Role { both, server, client };

struct Options {
  Role role = Role::both;
  std::string addr;
  std::uint16_t port = 0;
  std::size_t bytes = 65536;
  milliseconds timeout{20000};
};

std::byte pattern(std::size_t i, std::uint32_t seed) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + seed * 40503u;
  x ^= x >> 13;
  return static_cast<std::byte>(x & 0xffu);
}

void fill(std::span<std::byte> buf, std::uint32_t seed) {
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(i, seed);
}

std::optional<std::size_t> first_mismatch(std::span<const std::byte> buf, std::uint32_t seed) {
  for (std::size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != pattern(i, seed)) return i;
  }
  return std::nullopt;
}

ibv_qp_init_attr rc_attr(ibv_cq* cq) {
  ibv_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 4;
  qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  return qa;
}

void post_recv(ibv_qp* qp, std::uint64_t wr_id, ibv_sge* sge, int num_sge, std::string_view what) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = num_sge;
  ibv_recv_wr* bad = nullptr;
  check_ret(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv", what);
}

int run_server(const Options& o, int port_fd) {
  EventChannel ch;
  CmId listener(ch, RDMA_PS_TCP);
  const Address local = Address::parse(o.addr, o.port);
  listener.bind(local);
  if (listener.verbs() == nullptr) {
    throw Error(Errc::not_found, "address " + local.str() + " is not on an RDMA device");
  }
  // PD, buffers and CQ on the listener's device before any request: the connection's id comes
  // later but must be destroyed before them (declaration order = reverse teardown order).
  ProtectionDomain pd(listener.verbs());
  std::vector<std::byte> target(2 * o.bytes, std::byte{0xee});
  Verdict verdict{};
  MemoryRegion target_mr(pd, target.data(), target.size(),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  MemoryRegion verdict_mr(pd, &verdict, sizeof verdict, IBV_ACCESS_LOCAL_WRITE);
  CompletionQueue cq(listener.verbs(), 16);
  listener.listen(1);
  const std::uint16_t port = listener.local_port();
  const std::string where = o.addr + ":" + std::to_string(port);
  std::cout << "rdma_write_check server: listening on " << where << " ("
            << device_name(listener.verbs()) << ")" << std::endl;
  if (port_fd >= 0) {
    if (write(port_fd, &port, sizeof port) != static_cast<ssize_t>(sizeof port)) {
      throw_errno(errno, "report the port to the client process");
    }
    close(port_fd);
  }

  rdma_cm_id* raw = nullptr;
  {
    // Acknowledged at the end of this scope: rdma_destroy_id waits for its events' acks.
    CmEvent req = ch.expect(RDMA_CM_EVENT_CONNECT_REQUEST, o.timeout, "wait for a client on " + where);
    raw = req.id();
  }
  CmId conn = CmId::adopt(raw);
  ibv_qp_init_attr qa = rc_attr(cq.get());
  CmQueuePair qp(conn, pd.get(), qa);
  // The WRITE WITH IMMEDIATE consumes a receive; its data went by RDMA, so no scatter entry.
  post_recv(qp.get(), 1, nullptr, 0, "server QP");

  Offer offer{kMagic, target_mr.rkey(), reinterpret_cast<std::uintptr_t>(target.data()),
              target.size()};
  rdma_conn_param param{};
  param.private_data = &offer;
  param.private_data_len = sizeof offer;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.rnr_retry_count = 7;
  conn.accept(param);
  (void)ch.expect(RDMA_CM_EVENT_ESTABLISHED, o.timeout, "accept a client on " + where);

  const ibv_wc wc = cq.next(o.timeout, "the client's RDMA WRITE WITH IMMEDIATE");
  check_success(wc, "receive of the WRITE WITH IMMEDIATE");
  const bool imm_ok = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM) &&
                      ntohl(wc.imm_data) == kImmediate;
  // RC places the first WRITE's bytes before the second's completion is reported.
  const std::span<const std::byte> all(target);
  auto bad = first_mismatch(all.first(o.bytes), kSeedWrite);
  if (!bad) {
    bad = first_mismatch(all.subspan(o.bytes), kSeedWriteImm);
    if (bad) *bad += o.bytes;
  }
  verdict = Verdict{kMagic, imm_ok && !bad, bad.value_or(~std::uint64_t{0}),
                    ntohl(wc.imm_data), 0};
  std::cout << "rdma_write_check server: received opcode " << wc.opcode << " immediate 0x"
            << std::hex << verdict.immediate << std::dec << "; "
            << (bad ? "byte " + std::to_string(*bad) + " wrong"
                    : "all " + std::to_string(target.size()) + " bytes as written")
            << std::endl;

  ibv_sge sge{reinterpret_cast<std::uintptr_t>(&verdict), sizeof verdict, verdict_mr.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 2;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad_wr = nullptr;
  check_ret(ibv_post_send(qp.get(), &wr, &bad_wr), "ibv_post_send SEND", "server QP");
  check_success(cq.next(o.timeout, "the verdict SEND"), "SEND of the verdict");
  (void)ch.expect(RDMA_CM_EVENT_DISCONNECTED, o.timeout, "wait for the client to disconnect");
  return verdict.ok ? 0 : 1;
}

int run_client_once(const Options& o) {
  EventChannel ch;
  CmId id(ch, RDMA_PS_TCP);
  const Address dst = Address::parse(o.addr, o.port);
  resolve(id, ch, dst, milliseconds(5000));
  ProtectionDomain pd(id.verbs());
  std::vector<std::byte> src(2 * o.bytes);
  fill(std::span(src).first(o.bytes), kSeedWrite);
  fill(std::span(src).subspan(o.bytes), kSeedWriteImm);
  Verdict verdict{};
  MemoryRegion src_mr(pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion verdict_mr(pd, &verdict, sizeof verdict, IBV_ACCESS_LOCAL_WRITE);
  CompletionQueue cq(id.verbs(), 16);
  ibv_qp_init_attr qa = rc_attr(cq.get());
  CmQueuePair qp(id, pd.get(), qa);
  ibv_sge vsge{reinterpret_cast<std::uintptr_t>(&verdict), sizeof verdict, verdict_mr.lkey()};
  post_recv(qp.get(), 3, &vsge, 1, "client QP");

  rdma_conn_param param{};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  id.connect(param);
  Offer offer{};
  {
    CmEvent est = ch.expect(RDMA_CM_EVENT_ESTABLISHED, o.timeout, "connect to " + dst.str());
    const auto pd_bytes = est.private_data();
    if (pd_bytes.size() < sizeof offer) {
      throw Error(Errc::parse_error, "server " + dst.str() + " sent " +
                                         std::to_string(pd_bytes.size()) + " bytes of private data");
    }
    std::memcpy(&offer, pd_bytes.data(), sizeof offer);
  }
  if (offer.magic != kMagic || offer.length != src.size()) {
    throw Error(Errc::geometry_mismatch, "server " + dst.str() + " offers " +
                                             std::to_string(offer.length) + " bytes, want " +
                                             std::to_string(src.size()));
  }

  ibv_sge sge[2] = {
      {reinterpret_cast<std::uintptr_t>(src.data()), static_cast<std::uint32_t>(o.bytes),
       src_mr.lkey()},
      {reinterpret_cast<std::uintptr_t>(src.data() + o.bytes), static_cast<std::uint32_t>(o.bytes),
       src_mr.lkey()}};
  ibv_send_wr wr[2]{};
  wr[0].wr_id = 1;
  wr[0].sg_list = &sge[0];
  wr[0].num_sge = 1;
  wr[0].opcode = IBV_WR_RDMA_WRITE;
  wr[0].send_flags = IBV_SEND_SIGNALED;
  wr[0].wr.rdma.remote_addr = offer.addr;
  wr[0].wr.rdma.rkey = offer.rkey;
  wr[0].next = &wr[1];
  wr[1].wr_id = 2;
  wr[1].sg_list = &sge[1];
  wr[1].num_sge = 1;
  wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr[1].send_flags = IBV_SEND_SIGNALED;
  wr[1].imm_data = htonl(kImmediate);
  wr[1].wr.rdma.remote_addr = offer.addr + o.bytes;
  wr[1].wr.rdma.rkey = offer.rkey;
  ibv_send_wr* bad_wr = nullptr;
  check_ret(ibv_post_send(qp.get(), wr, &bad_wr), "ibv_post_send RDMA WRITE", "client QP");

  unsigned seen = 0;  // bit per wr_id 1..3
  while (seen != 0b1110) {
    const ibv_wc wc = cq.next(o.timeout, "the client's WRITEs and the server's verdict");
    check_success(wc, "client work request " + std::to_string(wc.wr_id));
    seen |= 1u << wc.wr_id;
  }
  std::cout << "rdma_write_check client: wrote " << o.bytes << " + " << o.bytes
            << " bytes (RDMA WRITE, RDMA WRITE WITH IMMEDIATE) to " << dst.str() << " rkey 0x"
            << std::hex << offer.rkey << std::dec << "; server verdict: "
            << (verdict.ok ? "all bytes arrived" : "MISMATCH") << std::endl;
  const bool ok = verdict.magic == kMagic && verdict.ok == 1 && verdict.immediate == kImmediate;
  if (!ok) {
    std::cerr << "rdma_write_check client: server saw immediate 0x" << std::hex
              << verdict.immediate << std::dec << ", first wrong byte " << verdict.bad_offset
              << "\n";
  }
  id.disconnect();
  (void)ch.expect(RDMA_CM_EVENT_DISCONNECTED, o.timeout, "disconnect from " + dst.str());
  return ok ? 0 : 1;
}

// The server may not listen yet (two-guest mode): retry while it rejects for want of a
// listener, within the timeout.
int run_client(const Options& o) {
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  for (;;) {
    try {
      return run_client_once(o);
    } catch (const Error& e) {
      if (e.code() != Errc::rejected || std::chrono::steady_clock::now() >= deadline) throw;
      std::cout << "rdma_write_check client: " << e.what() << "; retrying" << std::endl;
      std::this_thread::sleep_for(milliseconds(500));
    }
  }
}

int guarded(const char* who, auto&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << "rdma_write_check " << who << ": error: " << e.what() << std::endl;
    return 2;
  }
}

// Server in a child process, client in this one.
int run_both(Options o) {
  int fds[2];
  if (pipe(fds) != 0) throw_errno(errno, "pipe");
  const pid_t pid = fork();
  if (pid < 0) throw_errno(errno, "fork");
  if (pid == 0) {
    close(fds[0]);
    std::_Exit(guarded("server", [&] { return run_server(o, fds[1]); }));
  }
  close(fds[1]);
  int rc = 2;
  pollfd pfd{fds[0], POLLIN, 0};
  std::uint16_t port = 0;
  if (::poll(&pfd, 1, static_cast<int>(o.timeout.count())) == 1 &&
      read(fds[0], &port, sizeof port) == static_cast<ssize_t>(sizeof port)) {
    o.port = port;
    rc = guarded("client", [&] { return run_client(o); });
  } else {
    std::cerr << "rdma_write_check: the server process did not start listening" << std::endl;
  }
  close(fds[0]);
  // Bounded wait for the server; a hung one is killed and counts as a failure.
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    std::cerr << "rdma_write_check: server process hung: killed" << std::endl;
    return 2;
  }
  const int server_rc = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
  return rc != 0 ? rc : server_rc;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(Errc::invalid_argument, a + " needs a value");
      return argv[++i];
    };
    if (a == "--server") o.role = Role::server;
    else if (a == "--client") o.role = Role::client;
    else if (a == "--addr") o.addr = value();
    else if (a == "--port") o.port = static_cast<std::uint16_t>(std::stoul(value()));
    else if (a == "--bytes") o.bytes = std::stoul(value());
    else if (a == "--timeout-ms") o.timeout = milliseconds(std::stol(value()));
    else throw Error(Errc::invalid_argument, "unknown option '" + a + "'");
  }
  if (o.bytes == 0 || o.bytes > (1u << 30)) throw Error(Errc::invalid_argument, "--bytes out of range");
  if (o.role == Role::client && o.port == 0) throw Error(Errc::invalid_argument, "--client needs --port");
  if (o.addr.empty()) o.addr = rdma::test::address(rdma::test::device());
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "rdma_write_check: " << e.what() << std::endl;
    return 2;
  }
  switch (o.role) {
    case Role::server: return guarded("server", [&] { return run_server(o, -1); });
    case Role::client: return guarded("client", [&] { return run_client(o); });
    case Role::both: return guarded("", [&] { return run_both(o); });
  }
  return 2;
}
