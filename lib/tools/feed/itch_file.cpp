#include "tickrail/tools/feed/itch_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "tools/feed/format.hpp"
#include "tickrail/error.hpp"

namespace tickrail::feed {

struct ItchFileReader::Input {
  std::string name;
  bool file = false;  // false: caller's memory
  // Mapped file or caller's memory.
  const std::uint8_t* base = nullptr;
  std::size_t size = 0;
  void* map = nullptr;
  // Streamed (gzip, or a pipe read transparently by zlib).
  gzFile gz = nullptr;
  bool gzip = false;
  std::unique_ptr<std::uint8_t[]> buf;
  std::size_t cap = 0;
  std::uint64_t buf_base = 0;  // stream offset of buf[0]
  std::uint64_t file_size = 0;
  bool eof = false;
  // The stream ended early (cut) or on corrupt data: reported once the bytes before it are
  // decoded, as `stream_error`.
  bool stream_failed = false;
  bool stream_corrupt = false;  // corrupt compressed data, not a cut file
  std::string stream_error;

  ~Input() {
    if (map != nullptr) ::munmap(map, size);
    if (gz != nullptr) ::gzclose(gz);
  }

  [[nodiscard]] std::uint64_t offset_of(const std::uint8_t* p) const noexcept {
    return gz != nullptr ? buf_base + static_cast<std::uint64_t>(p - buf.get())
                         : static_cast<std::uint64_t>(p - base);
  }
};

namespace {

constexpr std::size_t kMinGzipBuffer = 1 << 17;  // holds the largest frame (2 + 65535) twice
// Messages one read() call may skip (bad, or not a tick) before it returns to its caller.
constexpr std::uint32_t kSkipsPerRead = 1 << 16;

}  // namespace

ItchFileReader::ItchFileReader(const std::string& path, ItchReadOptions opts)
    : opts_(opts), decoder_(opts.decoder), in_(std::make_unique<Input>()) {
  in_->name = path;
  in_->file = true;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "open ITCH file '" + path + "'");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno(err, "stat ITCH file '" + path + "'");
  }
  std::uint8_t magic[2] = {0, 0};
  const bool regular = S_ISREG(st.st_mode);
  if (regular && ::pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    in_->gzip = true;
  }
  if (regular && !in_->gzip) {
    in_->size = static_cast<std::size_t>(st.st_size);
    if (in_->size > 0) {
      void* m = ::mmap(nullptr, in_->size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw_errno(err, "mmap ITCH file '" + path + "'");
      }
      ::madvise(m, in_->size, MADV_SEQUENTIAL);
      in_->map = m;
      in_->base = static_cast<const std::uint8_t*>(m);
    }
    ::close(fd);
    cur_ = in_->base;
    end_ = in_->base + in_->size;
    return;
  }
  // gzip, or a pipe/FIFO: zlib reads plain bytes through unchanged when there is no gzip header.
  in_->file_size = regular ? static_cast<std::uint64_t>(st.st_size) : 0;
  in_->gz = ::gzdopen(fd, "rb");
  if (in_->gz == nullptr) {
    ::close(fd);
    throw Error(Errc::parse_error, "open ITCH file '" + path + "': zlib cannot open it");
  }
  ::gzbuffer(in_->gz, 1 << 18);
  in_->cap = std::max(opts_.gzip_buffer, kMinGzipBuffer);
  in_->buf = std::make_unique<std::uint8_t[]>(in_->cap);
  cur_ = end_ = in_->buf.get();
}

ItchFileReader::ItchFileReader(std::span<const std::uint8_t> bytes, std::string name,
                               ItchReadOptions opts)
    : opts_(opts), decoder_(opts.decoder), in_(std::make_unique<Input>()) {
  in_->name = std::move(name);
  in_->base = bytes.data();
  in_->size = bytes.size();
  cur_ = in_->base;
  end_ = in_->base + in_->size;
}

ItchFileReader::~ItchFileReader() = default;

bool ItchFileReader::compressed() const noexcept { return in_->gzip; }

std::uint64_t ItchFileReader::offset() const noexcept { return in_->offset_of(cur_); }

std::string ItchFileReader::name() const {
  if (!in_->file) return "ITCH bytes '" + in_->name + "'";
  return "ITCH file '" + in_->name + "'" + (in_->gzip ? " (gzip)" : "");
}

Progress ItchFileReader::progress() const noexcept {
  if (in_->gz != nullptr) {
    const z_off_t done = ::gzoffset(in_->gz);
    return {done > 0 ? static_cast<std::uint64_t>(done) : 0, in_->file_size};
  }
  return {static_cast<std::uint64_t>(cur_ - in_->base), in_->size};
}

void ItchFileReader::fail(int errc, std::string what) {
  if (first_error_.empty()) first_error_ = what;
  pending_errc_ = errc;
  pending_ = name() + ": " + what;
}

bool ItchFileReader::on_bad(Decoded d, const std::uint8_t* frame, std::size_t len) {
  if (d == Decoded::unknown_type) {
    ++errors_.unknown_type;
  } else {
    ++errors_.bad_length;
  }
  if (first_error_.empty() || !opts_.skip_bad) {
    const std::uint64_t off = in_->offset_of(frame);
    std::string what;
    if (len == 0) {
      what = "empty message (length 0) at byte offset " + std::to_string(off);
    } else if (d == Decoded::unknown_type) {
      what = "unknown message type " + describe_byte(frame[2]) + " at byte offset " +
             std::to_string(off);
    } else {
      what = "message type " + describe_byte(frame[2]) + " (" + itch::type_name(frame[2]) +
             ") at byte offset " + std::to_string(off) + " has length " + std::to_string(len) +
             ", expected " + std::to_string(itch::length_of(frame[2]));
    }
    if (!opts_.skip_bad) {
      fail(static_cast<int>(Errc::parse_error), std::move(what));
      return false;
    }
    first_error_ = std::move(what);
  }
  return true;
}

void ItchFileReader::on_truncated(const std::uint8_t* frame) {
  ++errors_.truncated;
  const std::uint64_t off = in_->offset_of(frame);
  const auto left = static_cast<std::size_t>(end_ - frame);
  std::string what = left < 2
      ? "truncated: " + std::to_string(left) + " byte at byte offset " + std::to_string(off) +
            " cannot hold a message length"
      : "truncated: message at byte offset " + std::to_string(off) + " has length " +
            std::to_string(itch::be16(frame)) + " but only " + std::to_string(left - 2) +
            " bytes remain";
  if (opts_.skip_bad) {
    if (first_error_.empty()) first_error_ = std::move(what);
    cur_ = end_;
  } else {
    fail(static_cast<int>(Errc::truncated), std::move(what));
  }
}

bool ItchFileReader::refill() {
  Input& in = *in_;
  if (in.gz == nullptr || in.eof) return false;
  const auto keep = static_cast<std::size_t>(end_ - cur_);
  in.buf_base += static_cast<std::uint64_t>(cur_ - in.buf.get());
  std::memmove(in.buf.get(), cur_, keep);
  std::size_t have = keep;
  while (have < in.cap) {
    const auto ask = static_cast<unsigned>(std::min<std::size_t>(in.cap - have, INT_MAX));
    const int got = ::gzread(in.gz, in.buf.get() + have, ask);
    if (got > 0) {
      have += static_cast<std::size_t>(got);
      continue;
    }
    // The end, clean or not. What was inflated before a failure is good data: it is decoded
    // first, and the failure reported after it (read()).
    in.eof = true;
    int zerr = Z_OK;
    const char* msg = ::gzerror(in.gz, &zerr);
    if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
      // zlib names the stream "<fd:N>" (we opened it by descriptor): the reader names the file.
      std::string why = msg != nullptr ? msg : "?";
      if (why.rfind("<fd:", 0) == 0 && why.find(": ") != std::string::npos) {
        why.erase(0, why.find(": ") + 2);
      }
      in.stream_failed = true;
      in.stream_corrupt = got < 0;
      in.stream_error = std::string(got < 0 ? "gzip stream corrupt near uncompressed byte offset "
                                            : "gzip stream ends early after uncompressed byte offset ") +
                        std::to_string(in.buf_base + have) + ": " + why;
    }
    break;
  }
  const bool grew = have > keep;
  cur_ = in.buf.get();
  end_ = cur_ + have;
  return grew;
}

void ItchFileReader::on_stream_failed() {
  Input& in = *in_;
  in.stream_failed = false;  // reported once
  std::string what = std::move(in.stream_error);
  if (cur_ != end_) {
    what += "; the " + std::to_string(end_ - cur_) + " bytes from byte offset " +
            std::to_string(in.offset_of(cur_)) + " are the start of a cut message";
  }
  cur_ = end_;
  if (in.stream_corrupt) {
    ++errors_.bad_packet;  // no way to resynchronise, even with skip_bad
    fail(static_cast<int>(Errc::parse_error), std::move(what));
    return;
  }
  ++errors_.truncated;
  if (opts_.skip_bad) {
    if (first_error_.empty()) first_error_ = std::move(what);
  } else {
    fail(static_cast<int>(Errc::truncated), std::move(what));
  }
}

bool ItchFileReader::at_end() const noexcept {
  return pending_errc_ == 0 && cur_ == end_ && (in_->gz == nullptr || in_->eof) &&
         !in_->stream_failed;
}

std::size_t ItchFileReader::read(std::span<Tick> out) {
  if (pending_errc_ != 0) throw Error(static_cast<Errc>(pending_errc_), pending_);
  const std::size_t want = out.size();
  Tick* const t = out.data();
  std::size_t n = 0;
  std::uint32_t skips = 0;  // messages skipped by this call: bounded, then back to the caller
  for (;;) {
    const std::uint8_t* p = cur_;
    const std::uint8_t* const end = end_;
    bool stop = false;
    // The hot loop: one bounds check per frame, decode in place into the caller's buffer.
    while (n < want && end - p >= 2) {
      const std::size_t len = itch::be16(p);
      if (static_cast<std::size_t>(end - p) - 2 < len) break;
      const Decoded d = decoder_.decode(p + 2, len, t[n]);
      if (d == Decoded::tick) {
        t[n].seq = ++seq_;
        ++n;
      } else if (d == Decoded::skipped) {
        ++seq_;
        ++skips;
      } else if (!on_bad(d, p, len)) {
        stop = true;
        break;
      } else {
        ++skips;
      }
      p += 2 + len;
      if (skips >= kSkipsPerRead) [[unlikely]] {
        stop = true;
        break;
      }
    }
    cur_ = p;
    if (stop || n == want) break;
    if (!refill()) {
      if (pending_errc_ == 0) {
        if (in_->stream_failed) {
          on_stream_failed();
        } else if (cur_ != end_) {
          on_truncated(cur_);
        }
      }
      break;
    }
  }
  if (n == 0 && pending_errc_ != 0) throw Error(static_cast<Errc>(pending_errc_), pending_);
  return n;
}

}  // namespace tickrail::feed
