// libFuzzer target: MoldUDP64 packets -> Packet::parse, SequenceTracker, ITCH decoding.
// The input is a sequence of packets, each preceded by a 2-byte big-endian length.
#include <cstddef>
#include <cstdint>

#include "tickrail/tools/feed/itch_decoder.hpp"
#include "tickrail/tools/feed/moldudp64.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tickrail;
  using namespace tickrail::feed;
  mold::SequenceTracker tracker(4);
  ItchDecoder decoder;
  std::uint64_t packet = 0;
  for (std::size_t o = 0; o + 2 <= size;) {
    const std::size_t len = std::size_t{data[o]} << 8 | data[o + 1];
    const std::size_t n = len < size - o - 2 ? len : size - o - 2;
    mold::Packet p;
    std::size_t at = 0;
    const auto st = p.parse(std::span(data + o + 2, n), &at);
    o += 2 + n;
    ++packet;
    if (st != mold::PacketStatus::ok) {
      if (p.remaining() != 0) __builtin_trap();  // a rejected packet yields no messages
      continue;
    }
    const mold::Observation obs = tracker.observe(p.header(), packet);
    if (obs.duplicate > p.header().messages()) __builtin_trap();
    std::span<const std::uint8_t> msg;
    std::uint16_t seen = 0;
    while (p.next(msg)) {
      ++seen;
      Tick t{};
      (void)decoder.decode(msg.data(), msg.size(), t);
    }
    if (seen != p.header().messages()) __builtin_trap();
  }
  if (tracker.gaps().size() > 4) __builtin_trap();
  return 0;
}
