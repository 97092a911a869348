// The shm_peer program (shm_peer.cpp) run as a second process by the shared-memory tests.
#pragma once

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "shm_test_util.hpp"
#include "transport/shm/segment.hpp"

namespace tickrail::test {

// Starts the peer program with a pipe on its stdout and waits (bounded) for its "ready".
// Killed, it leaves nothing in /dev/shm: its counters file goes with kill9(), and the socket of
// a channel it published when the Peer goes (not at kill9(): a test may show that a new
// publisher replaces a dead one's socket).
struct Peer {
  pid_t pid = -1;
  int out = -1;
  std::string published;  // the channel of a "pub" or "stream" peer

  Peer(std::initializer_list<std::string> args) {
    if (args.size() >= 2 && (*args.begin() == "pub" || *args.begin() == "stream")) published = *(args.begin() + 1);
    const char* exe = std::getenv("TICKRAIL_SHM_PEER");
    REQUIRE(exe != nullptr);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      std::vector<std::string> a(args);
      std::vector<char*> argv{const_cast<char*>(exe)};
      for (auto& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(exe, argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out = fds[0];
    char buf[16] = {};
    REQUIRE(::read(out, buf, 6) == 6);  // "ready\n"; the peer bounds its own life
    REQUIRE(std::string(buf, 5) == "ready");
  }
  void kill9() {
    if (pid <= 0) return;  // killed already: kill(-1) would reach every process we may signal
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    remove_counters_file(pid);
    pid = -1;
  }
  ~Peer() {
    if (pid > 0) kill9();
    if (out >= 0) ::close(out);
    if (!published.empty()) ::unlink(shm::channel_path("/dev/shm", published).c_str());
  }
};


}  // namespace tickrail::test
