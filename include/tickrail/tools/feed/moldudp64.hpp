// MoldUDP64: the packet framing NASDAQ uses to multicast ITCH, and sequence-gap detection.
//
// A packet is a 20-byte header (session: 10 ASCII bytes; sequence number of its first message:
// u64; message count: u16, 0 = heartbeat, 0xFFFF = end of session) followed by `count` messages,
// each a 2-byte big-endian length and the message. Packet::parse() validates a whole payload
// before anything is read from it, so iterating a parsed packet never reads out of bounds.
// Nothing here allocates, except SequenceTracker meeting more sessions than it reserved.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tickrail::feed::mold {

inline constexpr std::size_t kHeaderLength = 20;
inline constexpr std::size_t kSessionLength = 10;
inline constexpr std::uint16_t kEndOfSession = 0xffff;

using Session = std::array<char, kSessionLength>;

struct Header {
  Session session{};
  std::uint64_t seq = 0;    // sequence number of the first message (of the next, if none)
  std::uint16_t count = 0;  // messages in the packet, or 0 / kEndOfSession

  [[nodiscard]] bool heartbeat() const noexcept { return count == 0; }
  [[nodiscard]] bool end_of_session() const noexcept { return count == kEndOfSession; }
  [[nodiscard]] std::uint16_t messages() const noexcept { return end_of_session() ? 0 : count; }
  [[nodiscard]] std::string_view session_name() const noexcept {
    return {session.data(), session.size()};
  }
};

enum class PacketStatus : std::uint8_t {
  ok,
  short_header,      // fewer than 20 bytes
  message_overrun,   // a message length runs past the end of the payload
  trailing_bytes,    // bytes left after `count` messages
  data_in_control,   // a heartbeat or end-of-session packet that carries bytes
};

[[nodiscard]] const char* to_string(PacketStatus s) noexcept;

class Packet {
 public:
  // Validates `payload` and, when ok, makes this packet iterate it. `bad_message` receives the
  // 0-based index of the message that overruns (message_overrun only).
  [[nodiscard]] PacketStatus parse(std::span<const std::uint8_t> payload,
                                   std::size_t* bad_message = nullptr) noexcept;

  [[nodiscard]] const Header& header() const noexcept { return header_; }
  // Next message (without its length) into `msg`; false after the last one.
  bool next(std::span<const std::uint8_t>& msg) noexcept {
    if (left_ == 0) return false;
    const std::size_t len = (std::size_t{pos_[0]} << 8) | pos_[1];
    msg = {pos_ + 2, len};
    pos_ += 2 + len;
    --left_;
    return true;
  }
  [[nodiscard]] std::uint16_t remaining() const noexcept { return left_; }

 private:
  Header header_;
  const std::uint8_t* pos_ = nullptr;
  std::uint16_t left_ = 0;
};

// One sequence gap: messages [expected, received) of a session never arrived.
struct Gap {
  Session session{};
  std::uint64_t expected = 0;
  std::uint64_t received = 0;
  std::uint64_t packet = 0;  // the caller's packet number where it showed
  [[nodiscard]] std::uint64_t missing() const noexcept { return received - expected; }
};

struct Observation {
  std::uint64_t missing = 0;   // messages lost just before this packet (0: none)
  std::uint16_t duplicate = 0; // leading messages of this packet already seen: skip them
  bool new_session = false;    // first packet of its session (no gap can be judged)
};

// Tracks the next expected sequence number of each session. The first packet of a session sets
// it (a capture may start mid-session: that is no gap). Packets entirely or partly older than
// expected are duplicates (A/B line arbitration, retransmissions), reported for skipping.
class SequenceTracker {
 public:
  explicit SequenceTracker(std::size_t max_recorded_gaps = 1024);

  // Accounts for a validated packet; `packet` is recorded in any gap it reveals. Allocates only
  // when a ninth session appears.
  Observation observe(const Header& h, std::uint64_t packet);

  [[nodiscard]] std::uint64_t gap_count() const noexcept { return gap_count_; }
  [[nodiscard]] std::uint64_t missing() const noexcept { return missing_; }
  [[nodiscard]] std::uint64_t duplicates() const noexcept { return duplicates_; }
  [[nodiscard]] std::uint64_t heartbeats() const noexcept { return heartbeats_; }
  [[nodiscard]] std::uint64_t ends_of_session() const noexcept { return ends_; }
  // The first max_recorded_gaps gaps, in order of detection (gap_count() has them all).
  [[nodiscard]] const std::vector<Gap>& gaps() const noexcept { return gaps_; }
  // Next expected sequence number per session seen.
  [[nodiscard]] const std::vector<std::pair<Session, std::uint64_t>>& sessions() const noexcept {
    return sessions_;
  }

 private:
  std::vector<std::pair<Session, std::uint64_t>> sessions_;
  std::vector<Gap> gaps_;
  std::size_t max_gaps_;
  std::uint64_t gap_count_ = 0;
  std::uint64_t missing_ = 0;
  std::uint64_t duplicates_ = 0;
  std::uint64_t heartbeats_ = 0;
  std::uint64_t ends_ = 0;
};

// Renders a session for reports: its ASCII, trailing spaces kept visible as in the feed.
[[nodiscard]] std::string session_string(const Session& s);

}  // namespace tickrail::feed::mold
