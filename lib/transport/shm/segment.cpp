#include "transport/shm/segment.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <utility>

#include "tickrail/error.hpp"

namespace tickrail::shm {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

std::string random_suffix() {
  std::random_device rd;
  char buf[24];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

sockaddr_un unix_address(const std::string& path, const std::string& what) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) {
    throw Error(Errc::config_error, "shm_dir: " + what + ": the path " + path + " is longer than " +
                                        std::to_string(sizeof a.sun_path - 1) +
                                        " bytes, the limit of a UNIX socket name");
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

const char* file_kind(mode_t m) {
  if (S_ISREG(m)) return "regular file";
  if (S_ISDIR(m)) return "directory";
  if (S_ISLNK(m)) return "symbolic link";
  if (S_ISFIFO(m)) return "FIFO";
  if (S_ISSOCK(m)) return "socket";
  if (S_ISCHR(m)) return "character device";
  if (S_ISBLK(m)) return "block device";
  return "special file";
}

std::optional<std::uint32_t> number(const std::string& s) {
  if (s.empty() || s.size() > 10 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const unsigned long long v = std::stoull(s);
  if (v > 0xffffffffULL) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

std::string group_name(std::uint32_t gid) {
  std::vector<char> buf(4096);
  group g{};
  group* r = nullptr;
  if (::getgrgid_r(gid, &g, buf.data(), buf.size(), &r) == 0 && r != nullptr) {
    return std::to_string(gid) + " (" + r->gr_name + ")";
  }
  return std::to_string(gid);
}

std::size_t mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    f.ignore(256, '\n');
  }
  return 0;
}

std::string mib(std::size_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB)";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Identity

PeerCred peer_cred(int sock) {
  ucred c{};
  socklen_t n = sizeof c;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &c, &n) != 0) throw_errno(errno, "SO_PEERCRED");
  PeerCred p;
  p.pid = c.pid;
  p.uid = c.uid;
  p.gid = c.gid;
  gid_t groups[256];
  socklen_t gn = sizeof groups;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, groups, &gn) == 0) {
    p.groups.assign(groups, groups + gn / sizeof(gid_t));
  }
  return p;
}

std::string user_name(std::uint32_t uid) {
  std::vector<char> buf(4096);
  passwd pw{};
  passwd* r = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &r) == 0 && r != nullptr) {
    return std::to_string(uid) + " (" + r->pw_name + ")";
  }
  return std::to_string(uid);
}

Allow Allow::resolve(const std::vector<std::string>& users, const std::vector<std::string>& groups,
                     std::uint32_t self, const std::string& users_key,
                     const std::string& groups_key) {
  Allow a;
  a.uids = {0, self};
  std::vector<char> buf(16384);
  for (const std::string& u : users) {
    if (const auto n = number(u)) {
      a.uids.push_back(*n);
      continue;
    }
    passwd pw{};
    passwd* r = nullptr;
    if (::getpwnam_r(u.c_str(), &pw, buf.data(), buf.size(), &r) != 0 || r == nullptr) {
      throw Error(Errc::config_error, users_key + ": no user '" + u + "' on this host");
    }
    a.uids.push_back(r->pw_uid);
  }
  for (const std::string& g : groups) {
    if (const auto n = number(g)) {
      a.gids.push_back(*n);
      continue;
    }
    group gr{};
    group* r = nullptr;
    if (::getgrnam_r(g.c_str(), &gr, buf.data(), buf.size(), &r) != 0 || r == nullptr) {
      throw Error(Errc::config_error, groups_key + ": no group '" + g + "' on this host");
    }
    a.gids.push_back(r->gr_gid);
  }
  std::sort(a.uids.begin(), a.uids.end());
  a.uids.erase(std::unique(a.uids.begin(), a.uids.end()), a.uids.end());
  return a;
}

bool Allow::permits(const PeerCred& p) const {
  const auto has = [](const std::vector<std::uint32_t>& v, std::uint32_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  if (has(uids, p.uid) || has(gids, p.gid)) return true;
  return std::any_of(p.groups.begin(), p.groups.end(), [&](std::uint32_t g) { return has(gids, g); });
}

std::string Allow::describe() const {
  std::string s;
  for (std::uint32_t u : uids) s += (s.empty() ? "uid " : ", uid ") + user_name(u);
  for (std::uint32_t g : gids) s += ", gid " + group_name(g);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Memory

Mapping::~Mapping() {
  if (base_ != nullptr) ::munmap(base_, size_);
}
Mapping::Mapping(Mapping&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}
Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}
Fd::Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}
int Fd::release() noexcept { return std::exchange(fd_, -1); }

std::size_t ring_bytes(std::uint64_t capacity) noexcept {
  return round_up(capacity * sizeof(Slot), kPage);
}
std::size_t control_bytes() noexcept { return round_up(sizeof(Control), kPage); }
std::size_t status_bytes() noexcept { return round_up(sizeof(Status), kPage); }
std::size_t table_bytes(std::size_t entry_bytes) noexcept { return round_up(entry_bytes, kPage); }

SharedMemory create_shared(const std::string& what, std::size_t bytes, bool read_only_for_others) {
  SharedMemory m;
  m.fd = Fd(::memfd_create("tickrail", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (m.fd.get() < 0) throw_errno(errno, "create shared memory for " + what);
  // Size and reserve every page at once: a shortage is an error at start, never a SIGBUS mid-stream.
  if (const int e = ::posix_fallocate(m.fd.get(), 0, static_cast<off_t>(bytes)); e != 0) {
    throw Error(std::error_code(e, std::generic_category()),
                "reserve " + mib(bytes) + " of shared memory for " + what + ": " + std::strerror(e) +
                    "; the host has " + mib(mem_available()) +
                    " available (lower ring_capacity or max_subscribers)");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, m.fd.get(), 0);
  if (p == MAP_FAILED) throw_errno(errno, "map " + mib(bytes) + " of shared memory for " + what);
  m.map = Mapping(p, bytes);
  // Huge pages where the host allows them for shared memory; harmless where it does not.
  ::madvise(p, bytes, MADV_HUGEPAGE);
  int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (read_only_for_others) seals |= F_SEAL_FUTURE_WRITE;
  if (::fcntl(m.fd.get(), F_ADD_SEALS, seals) != 0) throw_errno(errno, "seal shared memory for " + what);
  return m;
}

Fd reopen_read_only(int fd, const std::string& what) {
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  Fd ro(::open(self.c_str(), O_RDONLY | O_CLOEXEC));
  if (ro.get() < 0) throw_errno(errno, "reopen " + what + " read-only through " + self);
  return ro;
}

Mapping map_received(int fd, std::size_t bytes, bool writable, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno(errno, what);
  if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != bytes) {
    throw Error(Errc::geometry_mismatch, what + ": the publisher handed over a " +
                                             file_kind(st.st_mode) + " of " +
                                             std::to_string(st.st_size) + " bytes, expected " +
                                             std::to_string(bytes));
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    throw Error(Errc::rejected, what + ": the publisher's memory can be resized under us (not sealed)");
  }
  const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = ::mmap(nullptr, bytes, prot, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) throw_errno(errno, what + ": map " + std::to_string(bytes) + " bytes");
  return Mapping(p, bytes);
}

// ---------------------------------------------------------------------------------------------
// Names

std::string channel_path(const std::string& dir, const std::string& channel) {
  return dir + "/tickrail." + channel;
}

void validate_channel_name(const std::string& channel) {
  bool ok = !channel.empty() && channel.size() <= 64;
  for (char c : channel) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    ok = ok && allowed;
  }
  if (!ok || channel == "." || channel == "..") {
    throw Error(Errc::config_error,
                "channel name '" + channel + "': use 1 to 64 of the characters A-Z a-z 0-9 _ - .");
  }
}

std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// ---------------------------------------------------------------------------------------------
// Sockets

namespace {

// Non-blocking connect: 0 when a listener took it, else errno. EAGAIN: a live listener whose
// queue is full; the socket is not connected (and has no peer to ask who it is).
int probe_connect(const sockaddr_un& a, Fd& out) {
  Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.get() < 0) return errno;
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    if (e != EINPROGRESS) return e;
  }
  out = std::move(s);
  return 0;
}

// Something is at the channel's path: refuse it, or move a dead publisher's socket out of the way.
// Returns normally when the caller should try to claim the name again.
void clear_or_refuse(const std::string& dir, const std::string& channel, const std::string& path) {
  const std::string what = "publish channel '" + channel + "' at " + path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // gone meanwhile
    throw_errno(errno, what);
  }
  if (!S_ISSOCK(st.st_mode)) {
    throw Error(Errc::bad_magic, what + ": the path is a " + file_kind(st.st_mode) + " of uid " +
                                     user_name(st.st_uid) +
                                     ", not a tickrail channel; remove it if it is not needed");
  }
  Fd probe;
  const int e = probe_connect(unix_address(path, what), probe);
  if (e == 0 || e == EAGAIN) {
    std::string who = "a live process";
    try {
      if (e == 0) {
        const PeerCred p = peer_cred(probe.get());
        who = "live process " + std::to_string(p.pid) + " of uid " + user_name(p.uid);
      }
    } catch (const Error&) {
    }
    throw Error(Errc::rejected, what + ": the channel is already published by " + who);
  }
  if (e != ECONNREFUSED) {
    throw Error(Errc::rejected, what + ": the path is a socket of uid " + user_name(st.st_uid) +
                                    " that cannot be probed (" + std::strerror(e) + ")");
  }
  // A dead publisher's name. Move it aside under a unique name, then make sure what we moved is
  // what we inspected: a racing publisher may have replaced it meanwhile, and must keep it.
  const std::string grave = dir + "/.tickrail." + channel + ".stale." + random_suffix();
  if (::rename(path.c_str(), grave.c_str()) != 0) {
    if (errno == ENOENT) return;
    throw Error(std::error_code(errno, std::generic_category()),
                what + ": replace the socket left by a publisher that is gone (uid " +
                    user_name(st.st_uid) + "): " + std::strerror(errno));
  }
  struct stat moved {};
  if (::lstat(grave.c_str(), &moved) == 0 && moved.st_dev == st.st_dev && moved.st_ino == st.st_ino) {
    ::unlink(grave.c_str());
    return;
  }
  if (::renameat2(AT_FDCWD, grave.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
    ::unlink(grave.c_str());
  }
}

}  // namespace

Listener listen_channel(const std::string& dir, const std::string& channel) {
  validate_channel_name(channel);
  const std::string path = channel_path(dir, channel);
  const std::string what = "publish channel '" + channel + "' at " + path;
  (void)unix_address(path, what);
  for (int attempt = 0; attempt < 16; ++attempt) {
    Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (s.get() < 0) throw_errno(errno, what + ": socket");
    // Bind and listen under a unique name, then link it into place only if the name is free:
    // of publishers racing for a channel exactly one wins, and nobody is ever unlinked.
    const std::string tmp = dir + "/.tickrail." + channel + "." + random_suffix();
    const sockaddr_un a = unix_address(tmp, what);
    if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      throw_errno(errno, what + ": bind " + tmp);
    }
    // Anyone may knock: who gets in is decided by the kernel's word for the peer (SO_PEERCRED).
    if (::chmod(tmp.c_str(), 0666) != 0 || ::listen(s.get(), 64) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      throw_errno(e, what + ": listen on " + tmp);
    }
    struct stat st {};
    const int r = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    const int e = errno;
    if (r == 0 && ::lstat(path.c_str(), &st) == 0) {
      Listener l;
      l.fd = std::move(s);
      l.path = path;
      l.dev = st.st_dev;
      l.ino = st.st_ino;
      return l;
    }
    ::unlink(tmp.c_str());
    if (r != 0 && e != EEXIST) throw_errno(e, what);
    clear_or_refuse(dir, channel, path);
  }
  throw Error(Errc::rejected, what + ": the name kept changing under us; is another publisher "
                                     "restarting in a loop?");
}

void unlink_channel(const Listener& l) noexcept {
  if (l.path.empty()) return;
  // Only our own name: a newer publisher may have replaced it after we were presumed dead.
  struct stat st {};
  if (::lstat(l.path.c_str(), &st) == 0 && st.st_dev == l.dev && st.st_ino == l.ino) {
    ::unlink(l.path.c_str());
  }
}

Fd connect_channel(const std::string& dir, const std::string& channel,
                   std::chrono::milliseconds timeout, const Allow& publishers, PeerCred& publisher,
                   const std::function<void()>* between) {
  validate_channel_name(channel);
  const std::string path = channel_path(dir, channel);
  const std::string what = "attach channel '" + channel + "' (" + path + ")";
  const sockaddr_un a = unix_address(path, what);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    struct stat st {};
    int e = 0;
    if (::lstat(path.c_str(), &st) != 0) {
      e = errno;
      if (e != ENOENT) throw_errno(e, what);
    } else if (!S_ISSOCK(st.st_mode)) {
      throw Error(Errc::bad_magic, what + ": the path is a " + file_kind(st.st_mode) + " of uid " +
                                       user_name(st.st_uid) + ", not a tickrail channel");
    } else if (!publishers.permits({0, st.st_uid, st.st_gid, {}})) {
      throw Error(Errc::rejected, what + ": the channel belongs to uid " + user_name(st.st_uid) +
                                      ", which is not an allowed publisher (allowed: " +
                                      publishers.describe() + "; see publisher_users)");
    } else {
      Fd s;
      e = probe_connect(a, s);
      if (e == 0) {
        publisher = peer_cred(s.get());
        if (!publishers.permits(publisher)) {
          throw Error(Errc::rejected, what + ": the channel is served by pid " +
                                          std::to_string(publisher.pid) + " of uid " +
                                          user_name(publisher.uid) +
                                          ", which is not an allowed publisher (allowed: " +
                                          publishers.describe() + "; see publisher_users)");
        }
        return s;
      }
      // EAGAIN: the publisher's queue of connections is full (a burst of attaches, or a
      // process flooding it): try again until the deadline.
      if (e != ECONNREFUSED && e != ENOENT && e != EAGAIN) throw_errno(e, what);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (e == ECONNREFUSED) {
        throw Error(Errc::peer_gone, what + ": its publisher is no longer running");
      }
      if (e == EAGAIN) {
        throw Error(Errc::timed_out, what + ": the publisher's queue of connections stayed full for " +
                                       std::to_string(timeout.count()) +
                                       " ms (many attaching at once, or a process flooding the channel)");
      }
      throw Error(Errc::not_found, what + ": no such channel" +
                                       (timeout.count() > 0
                                            ? " after waiting " + std::to_string(timeout.count()) + " ms"
                                            : std::string{}) +
                                       "; is the publisher running?");
    }
    for (int i = 0; i < 10 && std::chrono::steady_clock::now() < deadline; ++i) {
      if (between != nullptr) (*between)();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Messages

bool send_message(int sock, const void* msg, std::size_t n, const int* fds, std::size_t n_fds) noexcept {
  iovec iov{const_cast<void*>(msg), n};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  if (n_fds > 4) return false;
  if (n_fds != 0) {
    h.msg_control = control;
    h.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
  }
  return ::sendmsg(sock, &h, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(n);
}

long receive_message(int sock, void* msg, std::size_t n, std::vector<Fd>& fds, std::size_t max_fds) {
  iovec iov{msg, n};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)];
  h.msg_control = control;
  h.msg_controllen = sizeof control;
  const ssize_t r = ::recvmsg(sock, &h, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (r < 0) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      Fd owned(fd);
      if (fds.size() < max_fds) fds.push_back(std::move(owned));
    }
  }
  if ((h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    errno = EMSGSIZE;
    return -1;
  }
  return static_cast<long>(r);
}

}  // namespace tickrail::shm
