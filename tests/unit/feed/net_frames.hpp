// Test data: MoldUDP64 payloads and the Ethernet/VLAN/IPv4/UDP frames that carry them, built by
// hand, and capture files (pcap through libpcap's pcap_dump, pcapng block by block).
#pragma once

#include <pcap/pcap.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tickrail/tools/feed/itch_writer.hpp"

namespace tickrail::feed::test {

using Bytes = std::vector<std::uint8_t>;

inline void put16(Bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}
inline void put32(Bytes& b, std::uint32_t v) {
  put16(b, static_cast<std::uint16_t>(v >> 16));
  put16(b, static_cast<std::uint16_t>(v));
}
inline void put64(Bytes& b, std::uint64_t v) {
  put32(b, static_cast<std::uint32_t>(v >> 32));
  put32(b, static_cast<std::uint32_t>(v));
}

// A MoldUDP64 packet: header, then the framed messages an ItchWriter holds (already framed the
// same way: 2-byte length + message). `count` overrides the header's count when >= 0.
inline Bytes mold_packet(std::string_view session, std::uint64_t seq, const ItchWriter& msgs,
                         int count = -1) {
  Bytes b;
  for (std::size_t i = 0; i < 10; ++i) b.push_back(static_cast<std::uint8_t>(i < session.size() ? session[i] : ' '));
  put64(b, seq);
  put16(b, static_cast<std::uint16_t>(count >= 0 ? count : static_cast<int>(msgs.messages())));
  b.insert(b.end(), msgs.bytes().begin(), msgs.bytes().end());
  return b;
}

struct FrameSpec {
  int vlans = 1;               // 802.1Q tags
  std::uint8_t protocol = 17;  // IPv4 protocol
  std::uint16_t ethertype = 0x0800;
  std::uint16_t dport = 26477;
  std::uint16_t frag = 0x4000;  // DF set, no fragment
  int ip_total_delta = 0;       // corrupts the IPv4 total length
};

inline Bytes frame(const Bytes& payload, const FrameSpec& s = {}) {
  Bytes b = {0x01, 0x00, 0x5e, 0x36, 0x0c, 0x6f, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  for (int i = 0; i < s.vlans; ++i) {
    put16(b, 0x8100);
    put16(b, static_cast<std::uint16_t>(100 + i));
  }
  put16(b, s.ethertype);
  const auto total = static_cast<std::uint16_t>(20 + 8 + payload.size() + static_cast<std::size_t>(s.ip_total_delta));
  b.push_back(0x45);
  b.push_back(0);
  put16(b, total);
  put16(b, 1);
  put16(b, s.frag);
  b.push_back(64);
  b.push_back(s.protocol);
  put16(b, 0);  // checksum: not checked by readers of captures
  put32(b, 0x0a000001);
  put32(b, 0xe9360c6f);
  put16(b, 40000);
  put16(b, s.dport);
  put16(b, static_cast<std::uint16_t>(8 + payload.size()));
  put16(b, 0);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// Writes frames as a classic pcap file with libpcap itself.
inline void write_pcap(const std::string& path, const std::vector<Bytes>& frames) {
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  std::uint32_t sec = 1'692'711'000;
  for (const auto& f : frames) {
    pcap_pkthdr h{};
    h.ts.tv_sec = sec++;
    h.caplen = static_cast<bpf_u_int32>(f.size());
    h.len = h.caplen;
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
}

// The same frames as pcapng bytes (section header, one Ethernet interface, enhanced packets).
inline Bytes pcapng(const std::vector<Bytes>& frames) {
  auto le32 = [](Bytes& b, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  auto le16 = [](Bytes& b, std::uint16_t v) {
    b.push_back(static_cast<std::uint8_t>(v));
    b.push_back(static_cast<std::uint8_t>(v >> 8));
  };
  Bytes b;
  le32(b, 0x0a0d0d0a);  // section header block
  le32(b, 28);
  le32(b, 0x1a2b3c4d);
  le16(b, 1);
  le16(b, 0);
  le32(b, 0xffffffff);  // section length: unknown
  le32(b, 0xffffffff);
  le32(b, 28);
  le32(b, 1);  // interface description block
  le32(b, 20);
  le16(b, 1);  // LINKTYPE_ETHERNET
  le16(b, 0);
  le32(b, 65535);
  le32(b, 20);
  for (const auto& f : frames) {
    const auto padded = static_cast<std::uint32_t>((f.size() + 3) & ~std::size_t{3});
    const std::uint32_t len = 32 + padded;
    le32(b, 6);  // enhanced packet block
    le32(b, len);
    le32(b, 0);  // interface 0
    le32(b, 0);
    le32(b, 0);
    le32(b, static_cast<std::uint32_t>(f.size()));
    le32(b, static_cast<std::uint32_t>(f.size()));
    b.insert(b.end(), f.begin(), f.end());
    b.resize(b.size() + (padded - f.size()), 0);
    le32(b, len);
  }
  return b;
}

}  // namespace tickrail::feed::test
