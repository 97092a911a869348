// libFuzzer target: capture bytes -> PcapMoldReader (libpcap through fmemopen) -> ticks.
// First byte even: the rest is a whole capture file, pcap or pcapng. Odd: the rest is a list of
// frames (2-byte big-endian length + bytes) wrapped here in a valid pcap file, so mutations land
// on the Ethernet/VLAN/IPv4/UDP/MoldUDP64 walk rather than on libpcap's file header.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/tools/feed/pcap_reader.hpp"

namespace {

void le32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::vector<std::uint8_t> wrap(const std::uint8_t* d, std::size_t size, std::uint32_t linktype) {
  std::vector<std::uint8_t> b;
  le32(b, 0xa1b2c3d4);
  le32(b, 0x00040002);  // version 2.4
  le32(b, 0);
  le32(b, 0);
  le32(b, 65535);
  le32(b, linktype);
  for (std::size_t o = 0; o + 2 <= size;) {
    const std::size_t len = std::size_t{d[o]} << 8 | d[o + 1];
    const std::size_t n = len < size - o - 2 ? len : size - o - 2;
    le32(b, 0);
    le32(b, 0);
    le32(b, static_cast<std::uint32_t>(n));
    le32(b, static_cast<std::uint32_t>(n));
    b.insert(b.end(), d + o + 2, d + o + 2 + n);
    o += 2 + n;
  }
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tickrail;
  using namespace tickrail::feed;
  if (size == 0) return 0;
  PcapReadOptions opts;
  opts.skip_bad = (data[0] & 2) != 0;
  opts.udp_port = (data[0] & 4) != 0 ? 26477 : 0;
  std::vector<std::uint8_t> file;
  if ((data[0] & 1) != 0) {
    static constexpr std::uint32_t kLinks[] = {1, 113, 276, 101};  // Ethernet, SLL, SLL2, raw
    file = wrap(data + 1, size - 1, kLinks[(data[0] >> 3) & 3]);
  } else {
    file.assign(data + 1, data + size);
  }
  try {
    PcapMoldReader r(file, "fuzz", opts);
    Tick ticks[5];
    while (r.read(ticks) != 0 || !r.at_end()) {
    }
    if (r.capture_counts().mold_messages < r.counts().messages) __builtin_trap();
  } catch (const Error&) {
    // Not a capture, or bad input without skip_bad: reported as an Error, as it must be.
  }
  return 0;
}
