#include "tickrail/tools/record/recording.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tickrail/error.hpp"

namespace tickrail::record {

const char* to_string(EndReason r) noexcept {
  switch (r) {
    case EndReason::stopped: return "stopped";
    case EndReason::publisher_gone: return "publisher closed the channel";
    case EndReason::evicted: return "evicted by the publisher";
    case EndReason::write_error: return "write error";
  }
  return "unknown";
}

std::uint32_t crc32(const void* data, std::size_t n) noexcept {
  return static_cast<std::uint32_t>(
      ::crc32_z(::crc32_z(0L, Z_NULL, 0), static_cast<const Bytef*>(data), n));
}

std::uint64_t payload_hash(const void* data, std::size_t n) noexcept { return XXH3_64bits(data, n); }

namespace {

// throw_errno with the errno's text in the message itself: the programs print what() without
// the category's tail (cli::message_of), and "cannot write: No space left on device" must stay.
[[noreturn]] void fail_errno(int err, const std::string& what) {
  throw_errno(err, what + ": " + std::strerror(err));
}

std::uint32_t file_header_crc(const FileHeader& h, const char* channel, std::size_t len) {
  std::uint32_t c = static_cast<std::uint32_t>(
      ::crc32_z(::crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(&h),
                offsetof(FileHeader, header_crc)));
  return static_cast<std::uint32_t>(::crc32_z(c, reinterpret_cast<const Bytef*>(channel), len));
}

std::uint64_t wall_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

// pread of exactly n bytes; returns the bytes read (fewer at end of file). Throws on an error.
std::size_t pread_full(int fd, void* buf, std::size_t n, std::uint64_t off, const std::string& path) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(buf) + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail_errno(errno, "read recording '" + path + "' at byte " + std::to_string(off + got));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

std::string at(const std::string& path, std::size_t block, std::uint64_t off) {
  return path + ": block " + std::to_string(block) + " at byte " + std::to_string(off);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
RecordingWriter::RecordingWriter(const std::string& path, const RecordingMeta& meta,
                                 const WriterOptions& opts)
    : path_(path), opts_(opts) {
  if (meta.channel.size() > kMaxChannel) {
    throw Error(Errc::invalid_argument, "recording '" + path + "': channel name longer than " +
                                            std::to_string(kMaxChannel) + " bytes");
  }
  if (opts.zstd && (opts.zstd_level < 1 || opts.zstd_level > ZSTD_maxCLevel())) {
    throw Error(Errc::config_error, "zstd_level: " + std::to_string(opts.zstd_level) +
                                        " is outside 1.." + std::to_string(ZSTD_maxCLevel()));
  }
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (opts.force ? O_TRUNC : O_EXCL);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) {
    if (errno == EEXIST) {
      throw Error(Errc::config_error, "recording '" + path + "' exists (--force replaces it)");
    }
    fail_errno(errno, "create recording '" + path + "'");
  }
  if (opts.zstd) {
    cctx_ = ZSTD_createCCtx();
    if (cctx_ == nullptr) throw Error(Errc::invalid_argument, "zstd: cannot create a compression context");
    ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(cctx_), ZSTD_c_compressionLevel, opts.zstd_level);
    packed_.resize(ZSTD_compressBound(kMaxBlockTicks * sizeof(Tick)));
  }
  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, sizeof h.magic);
  h.version = kFormatVersion;
  h.header_size = static_cast<std::uint32_t>(sizeof(FileHeader) + meta.channel.size());
  h.transport = static_cast<std::uint8_t>(meta.transport);
  h.compression = opts.zstd ? 1 : 0;
  h.channel_len = static_cast<std::uint32_t>(meta.channel.size());
  h.cycles_per_ns = meta.cycles_per_ns;
  h.start_ns = meta.start_ns;
  h.start_cycles = meta.start_cycles;
  h.header_crc = file_header_crc(h, meta.channel.data(), meta.channel.size());
  write_all(&h, sizeof h, meta.channel.data(), meta.channel.size(), "header");
}

RecordingWriter::~RecordingWriter() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

void RecordingWriter::write_all(const void* a, std::size_t na, const void* b, std::size_t nb,
                                const char* what) {
  iovec iov[2] = {{const_cast<void*>(a), na}, {const_cast<void*>(b), nb}};
  int first = 0;
  const int count = nb == 0 ? 1 : 2;
  while (first < count) {
    const ssize_t r = ::writev(fd_, iov + first, count - first);
    if (r < 0) {
      if (errno == EINTR) continue;
      failed_ = true;
      fail_errno(errno, "write recording '" + path_ + "' (" + what + ") at byte " +
                             std::to_string(offset_));
    }
    auto left = static_cast<std::size_t>(r);
    offset_ += left;
    while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < count) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

void RecordingWriter::append(std::span<const Tick> ticks, std::uint64_t recv_ns) {
  if (failed_ || fd_ < 0) throw Error(Errc::closed, "recording '" + path_ + "': closed after an error");
  if (ticks.empty() || ticks.size() > kMaxBlockTicks) {
    throw Error(Errc::invalid_argument, "recording: a block holds 1.." + std::to_string(kMaxBlockTicks) + " ticks");
  }
  BlockHeader h{};
  h.magic = kBlockMagic;
  h.count = static_cast<std::uint32_t>(ticks.size());
  h.raw_size = static_cast<std::uint32_t>(ticks.size() * sizeof(Tick));
  h.recv_ns = recv_ns;
  h.first_seq = ticks.front().seq;
  h.last_seq = ticks.back().seq;
  h.min_time = ~std::uint64_t{0};
  std::uint64_t prev = last_seq_;
  for (const Tick& t : ticks) {
    if (t.seq <= prev) {
      throw Error(Errc::invalid_argument, "recording: sequence " + std::to_string(t.seq) +
                                              " after " + std::to_string(prev) + " (must increase)");
    }
    // Gaps the recorder saw: sequence numbers it never received (the first tick starts none).
    if (prev != 0 || blocks_ != 0) missing_ += t.seq - prev - 1;
    prev = t.seq;
    h.min_time = std::min(h.min_time, t.exch_ts);
    h.max_time = std::max(h.max_time, t.exch_ts);
  }
  const void* payload = ticks.data();
  if (cctx_ != nullptr) {
    const std::size_t n = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), packed_.data(), packed_.size(),
                                         ticks.data(), h.raw_size);
    if (ZSTD_isError(n)) throw Error(Errc::invalid_argument, std::string("zstd: ") + ZSTD_getErrorName(n));
    if (n < h.raw_size) {  // incompressible blocks stay raw
      h.flags = kBlockZstd;
      payload = packed_.data();
      h.stored_size = static_cast<std::uint32_t>(n);
    }
  }
  if (h.flags == 0) h.stored_size = h.raw_size;
  h.payload_hash = payload_hash(payload, h.stored_size);
  h.header_crc = crc32(&h, offsetof(BlockHeader, header_crc));
  write_all(&h, sizeof h, payload, h.stored_size, "block");
  last_seq_ = prev;
  ++blocks_;
  ticks_ += ticks.size();
}

void RecordingWriter::close(EndReason reason, std::uint64_t dropped) {
  if (fd_ < 0) return;
  if (failed_) throw Error(Errc::closed, "recording '" + path_ + "': closed after an error");
  Trailer t{};
  t.magic = kTrailerMagic;
  t.end_reason = static_cast<std::uint32_t>(reason);
  t.blocks = blocks_;
  t.ticks = ticks_;
  t.dropped = dropped;
  t.missing = missing_;
  t.end_ns = wall_ns();
  t.trailer_crc = crc32(&t, offsetof(Trailer, trailer_crc));
  write_all(&t, sizeof t, nullptr, 0, "trailer");
  if (::fsync(fd_) != 0) {
    failed_ = true;
    fail_errno(errno, "fsync recording '" + path_ + "'");
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_errno(errno, "close recording '" + path_ + "'");
}

// ---------------------------------------------------------------------------------------------
bool is_recording(const std::string& path) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char m[sizeof kFileMagic] = {};
  const ssize_t r = ::read(fd, m, sizeof m);
  ::close(fd);
  return r == static_cast<ssize_t>(sizeof m) && std::memcmp(m, kFileMagic, sizeof m) == 0;
}

Recording::Recording(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == ENOENT) throw Error(Errc::not_found, "recording '" + path + "' does not exist");
    fail_errno(errno, "open recording '" + path + "'");
  }
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    fail_errno(e, "stat recording '" + path + "'");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  try {
    FileHeader h{};
    const std::size_t got = pread_full(fd_, &h, sizeof h, 0, path);
    if (got < sizeof kFileMagic || std::memcmp(h.magic, kFileMagic, sizeof kFileMagic) != 0) {
      throw Error(Errc::bad_magic, path + ": not a tickrail recording (no TRRECORD magic)");
    }
    if (got < sizeof h) {
      throw Error(Errc::truncated, path + ": file header cut short at byte " + std::to_string(got) +
                                       " (a header is 64 bytes and the channel name)");
    }
    if (h.version != kFormatVersion) {
      throw Error(Errc::version_mismatch, path + ": recording format version " + std::to_string(h.version) +
                                              ", this build reads version " + std::to_string(kFormatVersion));
    }
    if (h.channel_len > kMaxChannel || h.header_size != sizeof h + h.channel_len) {
      throw Error(Errc::parse_error, path + ": file header: bad channel length " + std::to_string(h.channel_len));
    }
    std::string channel(h.channel_len, '\0');
    if (pread_full(fd_, channel.data(), channel.size(), sizeof h, path) != channel.size()) {
      throw Error(Errc::truncated, path + ": file header cut short in the channel name");
    }
    if (file_header_crc(h, channel.data(), channel.size()) != h.header_crc) {
      throw Error(Errc::parse_error, path + ": file header: checksum mismatch");
    }
    if (h.transport > static_cast<std::uint8_t>(TransportKind::ud) || h.compression > 1 ||
        !(h.cycles_per_ns > 0 && h.cycles_per_ns < 1e3)) {
      throw Error(Errc::parse_error, path + ": file header: bad transport, compression or clock rate");
    }
    meta_.channel = std::move(channel);
    meta_.transport = static_cast<TransportKind>(h.transport);
    meta_.cycles_per_ns = h.cycles_per_ns;
    meta_.start_ns = h.start_ns;
    meta_.start_cycles = h.start_cycles;
    meta_.zstd = h.compression == 1;
    dctx_ = ZSTD_createDCtx();
    if (dctx_ == nullptr) throw Error(Errc::invalid_argument, "zstd: cannot create a decompression context");
    scan();
  } catch (...) {
    ::close(fd_);
    ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
    throw;
  }
}

Recording::~Recording() {
  ::close(fd_);
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

// Hops over the block headers; stops at the trailer, the end of the file, or the first header
// that cannot be trusted (everything after it is unreachable: its length is not known).
void Recording::scan() {
  std::uint64_t off = sizeof(FileHeader) + meta_.channel.size();
  std::uint64_t last_seq = 0;
  auto stop = [&](const std::string& why) {
    valid_end_ = off;
    stop_reason_ = why;
  };
  for (;;) {
    if (off == size_) {
      stop("no trailer: the file was not closed (recorder killed, or the disk full); it ends after "
           "block " + std::to_string(blocks_.size()) + " at byte " + std::to_string(off));
      return;
    }
    union {
      BlockHeader b;
      Trailer t;
      std::uint32_t magic;
    } u{};
    const std::size_t got = pread_full(fd_, &u, sizeof(BlockHeader), off, path_);
    if (got >= sizeof(std::uint32_t) && u.magic == kTrailerMagic) {
      if (got < sizeof(Trailer)) {
        stop("trailer cut short at byte " + std::to_string(off));
        return;
      }
      if (crc32(&u.t, offsetof(Trailer, trailer_crc)) != u.t.trailer_crc) {
        stop("trailer at byte " + std::to_string(off) + ": checksum mismatch");
        return;
      }
      trailer_ = u.t;
      clean_ = true;
      valid_end_ = off + sizeof(Trailer);
      if (valid_end_ != size_) {
        clean_ = false;
        stop(std::to_string(size_ - valid_end_) + " bytes after the trailer at byte " + std::to_string(off));
        valid_end_ = off + sizeof(Trailer);
      }
      return;
    }
    if (got < sizeof(BlockHeader)) {
      stop("block " + std::to_string(blocks_.size()) + " cut short at byte " + std::to_string(off) +
           ": " + std::to_string(got) + " of its 80-byte header");
      return;
    }
    const BlockHeader& h = u.b;
    const std::string where = at(path_, blocks_.size(), off);
    if (h.magic != kBlockMagic) {
      stop("block " + std::to_string(blocks_.size()) + " at byte " + std::to_string(off) + ": not a block header");
      return;
    }
    if (crc32(&h, offsetof(BlockHeader, header_crc)) != h.header_crc) {
      stop("block " + std::to_string(blocks_.size()) + " at byte " + std::to_string(off) +
           ": header checksum mismatch");
      return;
    }
    const bool zstd = (h.flags & kBlockZstd) != 0;
    const bool sane = h.count >= 1 && h.count <= kMaxBlockTicks && (h.flags & ~kBlockZstd) == 0 &&
                      h.raw_size == h.count * sizeof(Tick) &&
                      (zstd ? h.stored_size < h.raw_size : h.stored_size == h.raw_size) &&
                      h.first_seq > last_seq && h.last_seq >= h.first_seq &&
                      h.last_seq - h.first_seq >= h.count - 1 && h.min_time <= h.max_time;
    if (!sane) {
      stop("block " + std::to_string(blocks_.size()) + " at byte " + std::to_string(off) +
           ": header fields disagree (count, sizes or sequence numbers)");
      return;
    }
    if (off + sizeof h + h.stored_size > size_) {
      stop("block " + std::to_string(blocks_.size()) + " at byte " + std::to_string(off) + " cut short: " +
           std::to_string(size_ - off - sizeof h) + " of its " + std::to_string(h.stored_size) +
           " payload bytes");
      return;
    }
    if (last_seq != 0 && h.first_seq != last_seq + 1) {
      gaps_.push_back(Gap{last_seq, h.first_seq - last_seq - 1, off});
    }
    if (h.last_seq - h.first_seq != h.count - 1) {
      // Gaps inside the block: where exactly is known only by reading it; the header says how many.
      gaps_.push_back(Gap{h.first_seq, h.last_seq - h.first_seq - (h.count - 1), off});
    }
    last_seq = h.last_seq;
    blocks_.push_back(BlockEntry{off, h});
    ticks_ += h.count;
    off += sizeof h + h.stored_size;
  }
}

std::size_t Recording::seek_seq(std::uint64_t seq) const noexcept {
  // Sequence numbers increase through the file: binary search on the headers.
  const auto it = std::lower_bound(blocks_.begin(), blocks_.end(), seq,
                                   [](const BlockEntry& b, std::uint64_t s) { return b.header.last_seq < s; });
  return static_cast<std::size_t>(it - blocks_.begin());
}

std::size_t Recording::seek_time(std::uint64_t t) const noexcept {
  // Exchange times need not increase (a feed's clock can step back): the first block whose
  // latest time reaches t, by a pass over the headers in memory.
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].header.max_time >= t) return i;
  }
  return blocks_.size();
}

void Recording::read_block(std::size_t i, std::vector<Tick>& out) {
  const BlockEntry& e = blocks_.at(i);
  const BlockHeader& h = e.header;
  stored_.resize(h.stored_size);
  if (pread_full(fd_, stored_.data(), h.stored_size, e.offset + sizeof h, path_) != h.stored_size) {
    throw Error(Errc::truncated, at(path_, i, e.offset) + ": payload cut short (the file shrank)");
  }
  const std::uint64_t hash = payload_hash(stored_.data(), stored_.size());
  if (hash != h.payload_hash) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": checksum mismatch (stored %016llx, computed %016llx)",
                  static_cast<unsigned long long>(h.payload_hash), static_cast<unsigned long long>(hash));
    throw Error(Errc::parse_error, at(path_, i, e.offset) + buf);
  }
  out.resize(h.count);
  if ((h.flags & kBlockZstd) != 0) {
    const std::size_t n = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), out.data(), h.raw_size,
                                              stored_.data(), stored_.size());
    if (ZSTD_isError(n) || n != h.raw_size) {
      throw Error(Errc::parse_error, at(path_, i, e.offset) + ": zstd payload does not decompress to " +
                                         std::to_string(h.raw_size) + " bytes");
    }
  } else {
    std::memcpy(out.data(), stored_.data(), h.raw_size);
  }
  std::uint64_t prev = 0;
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (const Tick& t : out) {
    if (t.seq <= prev) throw Error(Errc::parse_error, at(path_, i, e.offset) + ": sequence numbers do not increase");
    prev = t.seq;
    lo = std::min(lo, t.exch_ts);
    hi = std::max(hi, t.exch_ts);
  }
  if (out.front().seq != h.first_seq || out.back().seq != h.last_seq || lo != h.min_time || hi != h.max_time) {
    throw Error(Errc::parse_error, at(path_, i, e.offset) + ": ticks disagree with the block header");
  }
}

// ---------------------------------------------------------------------------------------------
RecordingSource::RecordingSource(const std::string& path, const Range& range, bool skip_bad)
    : rec_(std::make_unique<Recording>(path)), range_(range), skip_bad_(skip_bad) {
  next_block_ = std::max(rec_->seek_seq(range.from_seq), rec_->seek_time(range.from_time));
  end_block_ = rec_->blocks().size();
}

RecordingSource::~RecordingSource() = default;

std::string RecordingSource::name() const { return "recording " + rec_->path(); }

bool RecordingSource::at_end() const noexcept {
  return pending_error_.empty() && pos_ == buf_.size() &&
         (past_range_ || next_block_ >= end_block_) && (rec_->clean() || tail_reported_ || past_range_);
}

feed::Progress RecordingSource::progress() const noexcept {
  const auto& b = rec_->blocks();
  const std::uint64_t done = next_block_ < b.size() ? b[next_block_].offset : rec_->valid_end();
  return {done, rec_->file_size()};
}

std::size_t RecordingSource::read(std::span<Tick> out) {
  if (!pending_error_.empty()) {
    const std::string e = pending_error_;
    pending_error_.clear();
    tail_reported_ = true;
    throw Error(Errc::parse_error, e);
  }
  std::size_t n = 0;
  while (n < out.size()) {
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
      if (past_range_) break;
      if (next_block_ >= end_block_) {
        if (!rec_->clean() && !tail_reported_) {
          const std::string why = rec_->path() + ": " + rec_->stop_reason();
          if (first_error_.empty()) first_error_ = why;
          ++errors_.truncated;
          pending_error_ = why;
          if (n == 0) return read(out);
        }
        break;
      }
      const std::size_t i = next_block_++;
      const BlockHeader& h = rec_->blocks()[i].header;
      if (h.first_seq > range_.to_seq) {  // sequence numbers increase: nothing further is wanted
        past_range_ = true;
        break;
      }
      if (h.last_seq < range_.from_seq || h.max_time < range_.from_time || h.min_time > range_.to_time) {
        continue;  // nothing of the range in this block: its payload is not read
      }
      try {
        rec_->read_block(i, buf_);
      } catch (const Error& e) {
        buf_.clear();
        if (first_error_.empty()) first_error_ = e.what();
        ++errors_.bad_packet;
        if (skip_bad_) continue;
        pending_error_ = e.what();
        if (n == 0) return read(out);
        break;
      }
      // Keep the range's ticks only, in place.
      if (!range_.all()) {
        std::erase_if(buf_, [&](const Tick& t) { return !range_.contains(t); });
      }
      continue;
    }
    const std::size_t k = std::min(out.size() - n, buf_.size() - pos_);
    std::copy_n(buf_.begin() + static_cast<std::ptrdiff_t>(pos_), k, out.begin() + static_cast<std::ptrdiff_t>(n));
    pos_ += k;
    n += k;
  }
  return n;
}

}  // namespace tickrail::record
