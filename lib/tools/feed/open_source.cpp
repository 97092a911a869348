#include "tickrail/tools/feed/open_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tickrail/error.hpp"
#include "tickrail/tools/feed/csv_reader.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/pcap_reader.hpp"
#include "tickrail/tools/record/recording.hpp"

namespace tickrail::feed {

const char* to_string(InputFormat f) noexcept {
  switch (f) {
    case InputFormat::automatic: return "automatic";
    case InputFormat::itch: return "itch";
    case InputFormat::pcap: return "pcap";
    case InputFormat::csv: return "csv";
    case InputFormat::recording: return "recording";
  }
  return "unknown";
}

InputFormat detect_format(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "open input '" + path + "'");
  unsigned char m[8] = {};
  const ssize_t got = ::read(fd, m, sizeof m);
  ::close(fd);
  if (got == 8 && std::memcmp(m, record::kFileMagic, sizeof m) == 0) return InputFormat::recording;
  if (got >= 4) {
    std::uint32_t le = 0;
    std::memcpy(&le, m, 4);  // the magic numbers as a little-endian host reads them
    switch (le) {
      case 0xa1b2c3d4: case 0xd4c3b2a1:  // pcap, microseconds, either byte order
      case 0xa1b23c4d: case 0x4d3cb2a1:  // pcap, nanoseconds
      case 0x0a0d0d0a:                   // pcapng section header
        return InputFormat::pcap;
      default: break;
    }
  }
  const auto ends_with = [&](const char* s) {
    const std::size_t n = std::strlen(s);
    return path.size() >= n && path.compare(path.size() - n, n, s) == 0;
  };
  if (ends_with(".csv") || ends_with(".CSV")) return InputFormat::csv;
  return InputFormat::itch;
}

std::unique_ptr<TickSource> open_source(const std::string& path, const SourceOptions& opts) {
  // A directory opens for reading: without this it would fail only at its first read, when
  // the run has started (and waited for its subscribers).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw_errno(EISDIR, "open input '" + path + "'");
  const InputFormat f = opts.format == InputFormat::automatic ? detect_format(path) : opts.format;
  switch (f) {
    case InputFormat::pcap: {
      PcapReadOptions p;
      p.skip_bad = opts.skip_bad;
      p.decoder = opts.decoder;
      p.udp_port = opts.udp_port;
      return std::make_unique<PcapMoldReader>(path, p);
    }
    case InputFormat::csv:
      return std::make_unique<CsvTickReader>(path, CsvReadOptions{opts.skip_bad});
    case InputFormat::recording:
      return std::make_unique<record::RecordingSource>(path, opts.range, opts.skip_bad);
    default: {
      ItchReadOptions i;
      i.skip_bad = opts.skip_bad;
      i.decoder = opts.decoder;
      return std::make_unique<ItchFileReader>(path, i);
    }
  }
}

}  // namespace tickrail::feed
