// Helpers shared by the RC tests: configs for the rig's device, a payload that proves itself,
// and child processes with bounded line reads.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/publisher.hpp"
#include "tickrail/tick.hpp"

namespace tickrail::rc_test {

// Runs `make()` (which connects to `pub`) on a helper thread while this thread serves `pub`:
// a connection completes only when the publishing thread serves it. Its result, or nullptr
// when it took longer than 30 s.
template <class Make>
auto construct_serving(Publisher& pub, Make make) -> decltype(make()) {
  auto f = std::async(std::launch::async, std::move(make));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (f.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
    pub.service();
    if (std::chrono::steady_clock::now() >= deadline) return nullptr;
  }
  return f.get();
}

// Every field is derived from the sequence number: a tick checks itself.
inline Tick payload(std::uint64_t seq) {
  Tick t{};
  t.order_ref = seq;
  t.exch_ts = seq * 1000;
  t.aux = (seq + 1) * 0x9E3779B97F4A7C15ULL;
  t.price = static_cast<std::int64_t>(seq % 1000000) * 100;
  t.qty = static_cast<std::uint32_t>(seq % 977);
  t.aux_qty = static_cast<std::uint32_t>(seq >> 32);
  t.instrument = static_cast<std::uint32_t>(seq & 0xffff);
  t.kind = TickKind::Add;
  t.side = seq % 2 == 0 ? Side::Buy : Side::Sell;
  // Every other tick with kTickFromTable set, as a careless or lying publisher would: the
  // subscriber must clear it (a live tick never carries it).
  t.flags = static_cast<std::uint16_t>((seq & 0x7fff) | (seq % 2 == 1 ? kTickFromTable : 0));
  return t;
}

inline bool payload_ok(const Tick& t) {
  const Tick e = payload(t.seq);
  return t.order_ref == e.order_ref && t.exch_ts == e.exch_ts && t.aux == e.aux &&
         t.price == e.price && t.qty == e.qty && t.aux_qty == e.aux_qty &&
         t.instrument == e.instrument && t.kind == e.kind && t.side == e.side &&
         t.flags == (e.flags & ~kTickFromTable);
}

// A child process running `exe args...`, its stdout on a pipe read line by line with deadlines.
class Child {
 public:
  Child(const std::string& exe, const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      std::vector<std::string> a(args);
      std::vector<char*> argv{const_cast<char*>(exe.c_str())};
      for (auto& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] const std::string& output() const { return all_; }

  // The first line (read from now on) matching `re`, or nullopt at the deadline or at EOF.
  std::optional<std::smatch> expect(const std::string& re, std::chrono::milliseconds timeout) {
    const std::regex pattern(re);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      while (true) {
        const auto nl = pending_.find('\n');
        if (nl == std::string::npos) break;
        line_ = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        std::smatch m;
        if (std::regex_search(line_, m, pattern)) return m;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (out_ < 0) return std::nullopt;
      pollfd pfd{out_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(std::max<long>(left.count(), 0))) <= 0) {
        if (left.count() <= 0) return std::nullopt;
        continue;
      }
      char buf[4096];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) {
        ::close(out_);
        out_ = -1;
        continue;
      }
      pending_.append(buf, static_cast<std::size_t>(n));
      all_.append(buf, static_cast<std::size_t>(n));
    }
  }

  // The whole line the last successful expect() matched in.
  [[nodiscard]] const std::string& line() const { return line_; }

  // Exit status if the child has exited, without waiting.
  std::optional<int> try_wait() {
    if (pid_ <= 0) return std::nullopt;
    (void)expect("(?!)", std::chrono::milliseconds(0));  // keep its pipe drained
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
    pid_ = -1;
    (void)expect("(?!)", std::chrono::milliseconds(50));  // what it wrote last
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // Exit status after waiting up to `timeout` (killed and -1 if it did not exit).
  int wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      // Keep draining stdout so the child never blocks on a full pipe.
      (void)expect("(?!)", std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string pending_;
  std::string line_;
  std::string all_;
};

}  // namespace tickrail::rc_test
