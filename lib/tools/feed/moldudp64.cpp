#include "tickrail/tools/feed/moldudp64.hpp"

#include <algorithm>
#include <cstring>

#include "tickrail/tools/feed/itch.hpp"

namespace tickrail::feed::mold {

const char* to_string(PacketStatus s) noexcept {
  switch (s) {
    case PacketStatus::ok: return "ok";
    case PacketStatus::short_header: return "shorter than the 20-byte MoldUDP64 header";
    case PacketStatus::message_overrun: return "a message runs past the end of the packet";
    case PacketStatus::trailing_bytes: return "bytes left after the last message";
    case PacketStatus::data_in_control: return "a heartbeat or end-of-session packet carries data";
  }
  return "unknown";
}

PacketStatus Packet::parse(std::span<const std::uint8_t> payload,
                           std::size_t* bad_message) noexcept {
  left_ = 0;
  if (payload.size() < kHeaderLength) return PacketStatus::short_header;
  const std::uint8_t* p = payload.data();
  std::memcpy(header_.session.data(), p, kSessionLength);
  header_.seq = itch::be64(p + 10);
  header_.count = itch::be16(p + 18);
  const std::uint8_t* const end = p + payload.size();
  const std::uint8_t* q = p + kHeaderLength;
  const std::uint16_t n = header_.messages();
  if (n == 0) return q == end ? PacketStatus::ok : PacketStatus::data_in_control;
  for (std::uint16_t i = 0; i < n; ++i) {
    if (end - q < 2 || static_cast<std::size_t>(end - q) - 2 < itch::be16(q)) {
      if (bad_message != nullptr) *bad_message = i;
      return PacketStatus::message_overrun;
    }
    q += 2 + itch::be16(q);
  }
  if (q != end) return PacketStatus::trailing_bytes;
  pos_ = p + kHeaderLength;
  left_ = n;
  return PacketStatus::ok;
}

SequenceTracker::SequenceTracker(std::size_t max_recorded_gaps) : max_gaps_(max_recorded_gaps) {
  sessions_.reserve(8);
  gaps_.reserve(max_gaps_);
}

Observation SequenceTracker::observe(const Header& h, std::uint64_t packet) {
  Observation o;
  if (h.heartbeat()) ++heartbeats_;
  if (h.end_of_session()) ++ends_;
  auto it = std::find_if(sessions_.begin(), sessions_.end(),
                         [&](const auto& s) { return s.first == h.session; });
  const std::uint64_t next = h.seq + h.messages();
  if (it == sessions_.end()) {
    o.new_session = true;
    sessions_.emplace_back(h.session, next);
    return o;
  }
  std::uint64_t& expected = it->second;
  if (h.seq > expected) {
    o.missing = h.seq - expected;
    ++gap_count_;
    missing_ += o.missing;
    if (gaps_.size() < max_gaps_) gaps_.push_back(Gap{h.session, expected, h.seq, packet});
  } else if (h.seq < expected) {
    const std::uint64_t seen = std::min<std::uint64_t>(expected - h.seq, h.messages());
    o.duplicate = static_cast<std::uint16_t>(seen);
    duplicates_ += seen;
  }
  expected = std::max(expected, next);
  return o;
}

std::string session_string(const Session& s) {
  std::string out;
  for (char c : s) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

}  // namespace tickrail::feed::mold
