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

namespace tickrail::test {

// Starts the peer program with a pipe on its stdout and waits (bounded) for its "ready".
struct Peer {
  pid_t pid = -1;
  int out = -1;

  Peer(std::initializer_list<std::string> args) {
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
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~Peer() {
    if (pid > 0) kill9();
    if (out >= 0) ::close(out);
  }
};


}  // namespace tickrail::test
