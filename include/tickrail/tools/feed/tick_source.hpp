// TickSource: what every feed (ITCH file, pcap of MoldUDP64, CSV, synthetic) offers the replay
// publisher: ticks in batches, progress through the input, and counts of bad input skipped.
//
// read() is the data path: it never allocates and fills the caller's buffer, and it returns to
// the caller after a bounded amount of work (so that a reading loop sees its stop request even
// on endless junk read with skip_bad). Bad input follows
// one rule in every source: without skip_bad, read() returns the ticks decoded before the bad
// item, and the next call throws tickrail::Error naming the input and where (byte offset,
// packet number or line); the error is sticky. With skip_bad, the item is counted in errors()
// and reading goes on. Sources are not thread-safe: one thread reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tickrail/tick.hpp"

namespace tickrail::feed {

// Bad input, by kind.
struct ErrorCounts {
  std::uint64_t truncated = 0;     // a message or record that runs past the end of its input
  std::uint64_t bad_length = 0;    // a message whose length is not its type's
  std::uint64_t unknown_type = 0;  // a message type the protocol does not define
  std::uint64_t bad_packet = 0;    // a capture packet or MoldUDP64 packet that does not decode
  std::uint64_t bad_line = 0;      // a CSV line that does not parse

  [[nodiscard]] std::uint64_t total() const noexcept {
    return truncated + bad_length + unknown_type + bad_packet + bad_line;
  }
};

struct Progress {
  std::uint64_t done = 0;   // bytes of input consumed (compressed bytes for gzip)
  std::uint64_t total = 0;  // input size in bytes; 0 when unknown or endless
};

class TickSource {
 public:
  virtual ~TickSource() = default;
  TickSource() = default;
  TickSource(const TickSource&) = delete;
  TickSource& operator=(const TickSource&) = delete;

  // Fills `out` from the front with up to out.size() ticks; returns how many. 0 with at_end():
  // the input is exhausted. 0 otherwise: the call did its bounded share of work (skipping bad
  // input, non-tick messages or other packets) without finding a tick; call again.
  [[nodiscard]] virtual std::size_t read(std::span<Tick> out) = 0;
  // True once every tick was returned and no error is pending: read() has nothing more to give.
  [[nodiscard]] virtual bool at_end() const noexcept = 0;
  [[nodiscard]] virtual Progress progress() const noexcept = 0;
  [[nodiscard]] virtual const ErrorCounts& errors() const noexcept = 0;
  // Describes the first bad input met ("" if none), also when skip_bad went past it.
  [[nodiscard]] virtual const std::string& first_error() const noexcept = 0;
  // What is being read, for reports ("ITCH file day.itch.gz (gzip)").
  [[nodiscard]] virtual std::string name() const = 0;
};

}  // namespace tickrail::feed
