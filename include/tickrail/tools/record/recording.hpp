// Writing and reading recording files (format.hpp; docs/recording.md). Control plane and the
// recorder's writer thread: everything here may allocate and throw tickrail::Error, whose message
// names the file and the byte offset of what went wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/tick.hpp"
#include "tickrail/tools/feed/tick_source.hpp"
#include "tickrail/tools/record/format.hpp"
#include "tickrail/tools/record/range.hpp"

namespace tickrail::record {

// What the file header says of the recorded channel.
struct RecordingMeta {
  std::string channel;
  TransportKind transport = TransportKind::shm;
  double cycles_per_ns = 1.0;     // Clock rate of the recording host (Tick::send_ts units)
  std::uint64_t start_ns = 0;     // wall clock at the start, ns since the epoch
  std::uint64_t start_cycles = 0; // Clock::now() at the start
  bool zstd = false;              // blocks are compressed (each block says so in its flags)
};

struct WriterOptions {
  bool zstd = false;
  int zstd_level = 1;   // 1 (fast) .. 19
  bool force = false;   // replace an existing file; without it an existing file is an error
};

// Appends blocks to a new file. A block reaches the file in one write; fsync only at close().
// After a failed write (full disk, I/O error) the writer throws and takes no more blocks: what
// is on disk is a valid prefix without a trailer (readers say where it stops).
class RecordingWriter {
 public:
  // Creates `path` and writes the header. Throws Error(config_error) when the file exists and
  // !opts.force, Error with the errno's text when it cannot be created or written.
  RecordingWriter(const std::string& path, const RecordingMeta& meta, const WriterOptions& opts);
  ~RecordingWriter();  // closes without a trailer unless close() ran (a crash-like end)
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  // One block: 1..kMaxBlockTicks ticks whose sequence numbers increase. `recv_ns`: wall clock
  // when its first tick was received. Throws Error(invalid_argument) for an empty, oversized or
  // out-of-order block, Error(errno) for a failed write.
  void append(std::span<const Tick> ticks, std::uint64_t recv_ns);
  // Writes the trailer, fsyncs and closes. Throws on a failed write or fsync.
  void close(EndReason reason, std::uint64_t dropped);

  [[nodiscard]] std::uint64_t bytes() const noexcept { return offset_; }
  [[nodiscard]] std::uint64_t blocks() const noexcept { return blocks_; }
  [[nodiscard]] std::uint64_t ticks() const noexcept { return ticks_; }
  [[nodiscard]] std::uint64_t missing() const noexcept { return missing_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  void write_all(const void* a, std::size_t na, const void* b, std::size_t nb, const char* what);

  std::string path_;
  int fd_ = -1;
  bool failed_ = false;
  WriterOptions opts_;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  std::vector<char> packed_;
  std::uint64_t offset_ = 0, blocks_ = 0, ticks_ = 0, missing_ = 0, last_seq_ = 0;
};

// One block header and where it sits.
struct BlockEntry {
  std::uint64_t offset = 0;  // of the block header
  BlockHeader header{};
};

// A sequence-number gap between consecutive ticks of the file.
struct Gap {
  std::uint64_t after_seq = 0;  // the last sequence number before the gap
  std::uint64_t missing = 0;    // sequence numbers absent
  std::uint64_t offset = 0;     // of the block holding the tick after the gap
};

// A file's header and index, read by hopping over the block headers. Opening never throws for
// a damaged tail: the index holds every block up to the first that cannot be trusted, and
// clean()/stop_reason() say where the file stops and why. It throws Error for a file that is
// not a recording at all (not_found, bad_magic, version_mismatch, truncated header).
class Recording {
 public:
  explicit Recording(const std::string& path);
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] const RecordingMeta& meta() const noexcept { return meta_; }
  [[nodiscard]] std::uint32_t version() const noexcept { return kFormatVersion; }
  [[nodiscard]] const std::vector<BlockEntry>& blocks() const noexcept { return blocks_; }
  [[nodiscard]] std::uint64_t file_size() const noexcept { return size_; }
  [[nodiscard]] std::uint64_t ticks() const noexcept { return ticks_; }
  [[nodiscard]] const std::vector<Gap>& gaps() const noexcept { return gaps_; }
  // True when a valid trailer ends the file; then trailer() is it.
  [[nodiscard]] bool clean() const noexcept { return clean_; }
  [[nodiscard]] const Trailer& trailer() const noexcept { return trailer_; }
  // Where the valid part ends (byte offset) and, when !clean(), why (in words).
  [[nodiscard]] std::uint64_t valid_end() const noexcept { return valid_end_; }
  [[nodiscard]] const std::string& stop_reason() const noexcept { return stop_reason_; }

  // Index of the first block that may hold a tick with seq >= `seq` (blocks().size(): none).
  [[nodiscard]] std::size_t seek_seq(std::uint64_t seq) const noexcept;
  // Index of the first block that may hold a tick with exch_ts >= `t`.
  [[nodiscard]] std::size_t seek_time(std::uint64_t t) const noexcept;

  // Reads block `i`'s ticks into `out` (resized), checking its checksum and content. Throws
  // Error(parse_error) "path: block N at byte X: why" for a corrupt block.
  void read_block(std::size_t i, std::vector<Tick>& out);

 private:
  void scan();
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  RecordingMeta meta_;
  std::vector<BlockEntry> blocks_;
  std::vector<Gap> gaps_;
  std::uint64_t ticks_ = 0;
  bool clean_ = false;
  Trailer trailer_{};
  std::uint64_t valid_end_ = 0;
  std::string stop_reason_;
  void* dctx_ = nullptr;  // ZSTD_DCtx
  std::vector<char> stored_;
};

// A recording as a TickSource (tickrail-replay, the CSV export): the ticks of `range`, block by
// block, following tick_source.hpp's rule for bad input: a corrupt block is an error naming it
// (skipped and counted in errors().bad_packet with skip_bad); a file that was not closed cleanly
// gives its valid prefix and then the error saying where and why it stops (skip_bad does not
// hide that: it is not a skippable item).
class RecordingSource final : public feed::TickSource {
 public:
  RecordingSource(const std::string& path, const Range& range = {}, bool skip_bad = false);
  ~RecordingSource() override;

  [[nodiscard]] std::size_t read(std::span<Tick> out) override;
  [[nodiscard]] bool at_end() const noexcept override;
  [[nodiscard]] feed::Progress progress() const noexcept override;
  [[nodiscard]] const feed::ErrorCounts& errors() const noexcept override { return errors_; }
  [[nodiscard]] const std::string& first_error() const noexcept override { return first_error_; }
  [[nodiscard]] std::string name() const override;

  [[nodiscard]] const Recording& recording() const noexcept { return *rec_; }
  // Blocks skipped for a bad checksum or content (skip_bad).
  [[nodiscard]] std::uint64_t bad_blocks() const noexcept { return errors_.bad_packet; }

 private:
  std::unique_ptr<Recording> rec_;
  Range range_;
  bool skip_bad_;
  std::size_t next_block_ = 0, end_block_ = 0;
  std::vector<Tick> buf_;
  std::size_t pos_ = 0;
  std::string pending_error_;  // thrown by the next read()
  bool tail_reported_ = false;
  bool past_range_ = false;
  feed::ErrorCounts errors_;
  std::string first_error_;
};

// True when the file starts with kFileMagic (throws nothing; false when it cannot be read).
[[nodiscard]] bool is_recording(const std::string& path) noexcept;

}  // namespace tickrail::record
