// Runs a real program of the build tree (found from the build root, where the unit tests run)
// with arguments, its stdout and stderr in one log file, every wait bounded.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace tickrail::test {

inline std::string build_program(const std::string& relative) {
  return (std::filesystem::current_path() / relative).string();
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A started program; its output goes to `log`.
struct Started {
  pid_t pid = -1;
  std::string log;
};

// In a forked child: becomes `args`, or exits 127.
[[noreturn]] inline void exec_child(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

inline Started start(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    (void)out;
    dup2(fileno(stdout), STDERR_FILENO);
    exec_child(args);
  }
  return {pid, log};
}

// As start(), with stdout on `out_fd` (a pipe, /dev/full) and only stderr in `log`, and `env`
// ("NAME=value") added to the environment.
inline Started start_with_stdout(const std::vector<std::string>& args, int out_fd, const std::string& log,
                                 const std::vector<std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* err = std::freopen(log.c_str(), "w", stderr);
    (void)err;
    dup2(out_fd, STDOUT_FILENO);
    std::signal(SIGPIPE, SIG_DFL);  // as a shell starts it, whatever this process does
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    exec_child(args);
  }
  return {pid, log};
}

// Exit status (128 + signal when killed by one), or -1 when it ran past `timeout` (then killed).
inline int wait_exit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// True once `log` contains `text`, false after `timeout`.
inline bool wait_for_output(const std::string& log, const std::string& text, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (slurp(log).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// True once process `pid` catches signal `sig` (its handler is installed: SigCgt in
// /proc/PID/status), false after `timeout`. A signal sent before that would kill it instead.
inline bool wait_catching(pid_t pid, int sig, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  while (std::chrono::steady_clock::now() < deadline) {
    // Not before the exec: until then the child has this test's handlers (Catch's).
    if (std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec) == self) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigCgt:", 0) == 0 && ((std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1u) != 0) {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

struct Finished {
  int status = 0;
  std::string output;  // stdout and stderr
};

inline Finished run_program(const std::vector<std::string>& args, const std::string& log,
                            std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const Started s = start(args, log);
  Finished f;
  f.status = wait_exit(s.pid, timeout);
  f.output = slurp(log);
  std::error_code ec;
  std::filesystem::remove(log, ec);
  return f;
}

}  // namespace tickrail::test
