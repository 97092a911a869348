#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <fstream>

#include "tickrail/error.hpp"
#include "tickrail/tools/report.hpp"

namespace tickrail {

Summary summarize(const Histogram& h, std::uint64_t lost) {
  Summary s;
  s.count = h.count();
  s.lost = lost;
  s.overflow = h.overflow_count();
  if (h.empty()) return s;
  const auto max = static_cast<double>(h.max());
  const auto at = [&](double p) {
    return std::min(static_cast<double>(h.value_at_percentile(p)), max);
  };
  s.min_ns = static_cast<double>(h.min());
  s.p50_ns = at(50.0);
  s.mean_ns = h.mean();
  s.stdev_ns = h.stdev();
  s.p90_ns = at(90.0);
  s.p99_ns = at(99.0);
  s.p999_ns = at(99.9);
  s.p9999_ns = at(99.99);
  s.max_ns = max;
  return s;
}

void write_text_file(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw_errno(errno, "open " + path + " for writing");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw_errno(errno, "write " + path);
}

void write_text_file_atomically(const std::string& path, std::string_view text) {
  // The rename below replaces whatever `path` names: a device or a link must not be.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw Error(Errc::config_error, "'" + path + "' is not a regular file (it would be replaced)");
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw_errno(errno, "create " + tmp + " (to replace " + path + ")");
  const auto fail = [&](const std::string& what) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw_errno(e, what);
  };
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write " + tmp);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync " + tmp);
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(e, "close " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(e, "rename " + tmp + " to " + path);
  }
}

}  // namespace tickrail
