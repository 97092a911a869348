// The recording file format (docs/recording.md describes it byte by byte): a file header, then
// blocks of ticks as received, each behind an 80-byte block header, then a trailer when the file
// was closed cleanly. Every integer is little-endian (the host's: x86-64 and aarch64 Linux).
//
// The block headers are the index: each carries its ticks' first and last sequence numbers and
// their earliest and latest exchange timestamps, so a reader seeks by hopping from header to
// header (offset + 80 + stored_size) without reading or decompressing any payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tickrail::record {

inline constexpr char kFileMagic[8] = {'T', 'R', 'R', 'E', 'C', 'O', 'R', 'D'};
inline constexpr std::uint32_t kFormatVersion = 2;
inline constexpr std::uint32_t kBlockMagic = 0x4B4C4254;    // "TBLK"
inline constexpr std::uint32_t kTrailerMagic = 0x444E4554;  // "TEND"
inline constexpr std::uint32_t kBlockZstd = 1;               // BlockHeader::flags: zstd payload
inline constexpr std::size_t kMaxChannel = 255;
// A block holds at most this many ticks (4 MiB raw): a reader's buffers are bounded by it.
inline constexpr std::uint32_t kMaxBlockTicks = 65536;

// Why a recording ended (Trailer::end_reason).
enum class EndReason : std::uint32_t {
  stopped = 0,         // the recorder was stopped (signal, --count, --duration, close())
  publisher_gone = 1,  // the publisher closed the channel or went silent
  evicted = 2,         // the publisher evicted the recorder's subscriber
  write_error = 3,     // never written: a failed write leaves no trailer
};
[[nodiscard]] const char* to_string(EndReason r) noexcept;

struct FileHeader {
  char magic[8];                // kFileMagic
  std::uint32_t version;        // kFormatVersion
  std::uint32_t header_size;    // sizeof(FileHeader) + channel_len: where the first block starts
  std::uint8_t transport;       // tickrail::TransportKind of the recorded subscriber
  std::uint8_t compression;     // 0 none, 1 zstd: what the recorder was asked for (per block: flags)
  std::uint16_t reserved0;
  std::uint32_t channel_len;    // bytes of channel name after this header (<= kMaxChannel)
  double cycles_per_ns;         // the recording host's Clock rate: Tick::send_ts is in its cycles
  std::uint64_t start_ns;       // wall clock (CLOCK_REALTIME) when recording started, ns
  std::uint64_t start_cycles;   // Clock::now() at that same moment
  std::uint64_t reserved1;
  std::uint32_t header_crc;     // crc32 of bytes [0, 56) and the channel name
  std::uint32_t reserved2;
};
static_assert(sizeof(FileHeader) == 64);
static_assert(offsetof(FileHeader, cycles_per_ns) == 24);
static_assert(offsetof(FileHeader, header_crc) == 56);

struct BlockHeader {
  std::uint32_t magic;          // kBlockMagic
  std::uint32_t flags;          // kBlockZstd
  std::uint32_t count;          // ticks in the block, 1..kMaxBlockTicks
  std::uint32_t raw_size;       // count * 64
  std::uint32_t stored_size;    // payload bytes after this header (raw_size when not compressed)
  std::uint32_t reserved1;
  std::uint64_t recv_ns;        // wall clock when the block's first tick was received, ns
  std::uint64_t first_seq;      // sequence numbers of the first and last tick
  std::uint64_t last_seq;
  std::uint64_t min_time;       // earliest and latest Tick::exch_ts in the block
  std::uint64_t max_time;
  std::uint64_t payload_hash;   // XXH3-64 of the stored payload
  std::uint32_t header_crc;     // crc32 of bytes [0, 72)
  std::uint32_t reserved2;
};
static_assert(sizeof(BlockHeader) == 80);
static_assert(offsetof(BlockHeader, recv_ns) == 24);
static_assert(offsetof(BlockHeader, payload_hash) == 64);
static_assert(offsetof(BlockHeader, header_crc) == 72);

struct Trailer {
  std::uint32_t magic;          // kTrailerMagic
  std::uint32_t end_reason;     // EndReason
  std::uint64_t blocks;
  std::uint64_t ticks;          // ticks in the file
  std::uint64_t dropped;        // ticks received that the recorder could not keep
  std::uint64_t missing;        // sequence numbers the recorder never saw (gaps)
  std::uint64_t end_ns;         // wall clock at close, ns
  std::uint64_t reserved0;
  std::uint32_t trailer_crc;    // crc32 of bytes [0, 56)
  std::uint32_t reserved1;
};
static_assert(sizeof(Trailer) == 64);
static_assert(offsetof(Trailer, trailer_crc) == 56);

static_assert(std::is_trivially_copyable_v<FileHeader> && std::is_trivially_copyable_v<BlockHeader> &&
              std::is_trivially_copyable_v<Trailer>);

// crc32 (zlib's crc32_z) of `n` bytes: the headers' checksum.
[[nodiscard]] std::uint32_t crc32(const void* data, std::size_t n) noexcept;
// XXH3-64 (xxHash) of `n` bytes: the payloads' checksum, 3.6x faster than crc32_z here (a
// payload is hashed by the recorder's writer thread and again by every reader).
[[nodiscard]] std::uint64_t payload_hash(const void* data, std::size_t n) noexcept;

}  // namespace tickrail::record
