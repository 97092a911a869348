#include "tickrail/tools/feed/pcap_reader.hpp"

#include <pcap/pcap.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tools/feed/format.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch.hpp"

namespace tickrail::feed {

struct PcapMoldReader::Capture {
  std::string name;
  bool memory = false;
  pcap_t* pcap = nullptr;
  int linktype = 0;
  std::uint64_t size = 0;

  ~Capture() {
    if (pcap != nullptr) ::pcap_close(pcap);  // closes the FILE* it was given too
  }
  [[nodiscard]] std::uint64_t tell() const noexcept {
    const long at = std::ftell(::pcap_file(pcap));
    return at > 0 ? static_cast<std::uint64_t>(at) : 0;
  }
};

namespace {

enum class Walk : std::uint8_t { udp, not_udp, fragment, bad };

struct Walked {
  Walk kind = Walk::bad;
  std::span<const std::uint8_t> payload;
  std::uint16_t dport = 0;
  std::string why;  // set for Walk::bad only (a rare, erroring path)
};

constexpr std::uint16_t kIpv4 = 0x0800;
constexpr std::uint32_t kSkipsPerRead = 1 << 14;  // packets one read() may skip

// Link header -> IPv4 -> UDP. Every length is checked against the captured bytes.
Walked walk(int linktype, const std::uint8_t* d, std::size_t caplen) {
  Walked w;
  std::size_t off = 0;
  std::uint16_t et = 0;
  auto too_short = [&](const char* what) {
    w.kind = Walk::bad;
    w.why = std::string("frame of ") + std::to_string(caplen) + " captured bytes is too short for its " + what;
    return w;
  };
  switch (linktype) {
    case DLT_EN10MB:
      if (caplen < 14) return too_short("Ethernet header");
      et = itch::be16(d + 12);
      off = 14;
      while (et == 0x8100 || et == 0x88a8 || et == 0x9100) {  // 802.1Q / 802.1ad tags
        if (caplen < off + 4) return too_short("VLAN tag");
        et = itch::be16(d + off + 2);
        off += 4;
      }
      break;
    case DLT_LINUX_SLL:
      if (caplen < 16) return too_short("Linux cooked header");
      et = itch::be16(d + 14);
      off = 16;
      break;
    case DLT_LINUX_SLL2:
      if (caplen < 20) return too_short("Linux cooked v2 header");
      et = itch::be16(d);
      off = 20;
      break;
    default:  // DLT_RAW / DLT_IPV4: the packet starts with the IP header
      if (caplen < 1) return too_short("IP header");
      et = (d[0] >> 4) == 4 ? kIpv4 : 0;
      break;
  }
  if (et != kIpv4) {
    w.kind = Walk::not_udp;
    return w;
  }
  if (caplen < off + 20) return too_short("IPv4 header");
  const std::uint8_t* ip = d + off;
  const std::size_t ihl = std::size_t{ip[0] & 0x0fu} * 4;
  const std::size_t total = itch::be16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl) {
    w.why = "IPv4 header is malformed (version " + std::to_string(ip[0] >> 4) + ", header length " +
            std::to_string(ihl) + ", total length " + std::to_string(total) + ")";
    return w;
  }
  if (off + total > caplen) {
    w.why = "IPv4 total length " + std::to_string(total) + " exceeds the " +
            std::to_string(caplen - off) + " bytes captured";
    return w;
  }
  if ((itch::be16(ip + 6) & 0x3fff) != 0) {  // more-fragments flag or a fragment offset
    w.kind = Walk::fragment;
    return w;
  }
  if (ip[9] != 17) {
    w.kind = Walk::not_udp;
    return w;
  }
  if (total < ihl + 8) {
    w.why = "IPv4 packet too short for a UDP header";
    return w;
  }
  const std::uint8_t* udp = ip + ihl;
  const std::size_t ulen = itch::be16(udp + 4);
  if (ulen < 8 || ulen > total - ihl) {
    w.why = "UDP length " + std::to_string(ulen) + " does not fit the IPv4 payload of " +
            std::to_string(total - ihl) + " bytes";
    return w;
  }
  w.kind = Walk::udp;
  w.dport = itch::be16(udp + 2);
  w.payload = {udp + 8, ulen - 8};
  return w;
}

bool supported(int linktype) {
  return linktype == DLT_EN10MB || linktype == DLT_LINUX_SLL || linktype == DLT_LINUX_SLL2 ||
         linktype == DLT_RAW || linktype == DLT_IPV4;
}

}  // namespace

PcapMoldReader::PcapMoldReader(const std::string& path, PcapReadOptions opts)
    : opts_(opts), decoder_(opts.decoder), tracker_(opts.max_recorded_gaps),
      cap_(std::make_unique<Capture>()) {
  cap_->name = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_errno(errno, "open capture '" + path + "'");
  cap_->size = static_cast<std::uint64_t>(st.st_size);
  char err[PCAP_ERRBUF_SIZE] = {};
  cap_->pcap = ::pcap_open_offline(path.c_str(), err);
  if (cap_->pcap == nullptr) {
    throw Error(Errc::parse_error, "open capture '" + path + "': " + err);
  }
  open("open capture '" + path + "'");
}

PcapMoldReader::PcapMoldReader(std::span<const std::uint8_t> bytes, std::string name,
                               PcapReadOptions opts)
    : opts_(opts), decoder_(opts.decoder), tracker_(opts.max_recorded_gaps),
      cap_(std::make_unique<Capture>()) {
  cap_->name = std::move(name);
  cap_->memory = true;
  cap_->size = bytes.size();
  const std::string what = "open capture '" + cap_->name + "'";
  if (bytes.empty()) throw Error(Errc::parse_error, what + ": empty");
  // fmemopen never writes through a "r" stream: the const_cast does not make the bytes mutable.
  FILE* f = ::fmemopen(const_cast<std::uint8_t*>(bytes.data()), bytes.size(), "r");
  if (f == nullptr) throw_errno(errno, what + ": fmemopen");
  char err[PCAP_ERRBUF_SIZE] = {};
  cap_->pcap = ::pcap_fopen_offline(f, err);
  if (cap_->pcap == nullptr) {
    std::fclose(f);  // pcap_fopen_offline leaves the stream to us when it fails
    throw Error(Errc::parse_error, what + ": " + err);
  }
  open(what);
}

void PcapMoldReader::open(std::string what) {
  cap_->linktype = ::pcap_datalink(cap_->pcap);
  if (!supported(cap_->linktype)) {
    const char* lt = ::pcap_datalink_val_to_name(cap_->linktype);
    throw Error(Errc::unsupported, what + ": link type " + std::to_string(cap_->linktype) + " (" +
                                       (lt != nullptr ? lt : "?") +
                                       ") is not Ethernet, Linux cooked or raw IP");
  }
}

PcapMoldReader::~PcapMoldReader() = default;

std::string PcapMoldReader::name() const {
  return (cap_->memory ? "capture bytes '" : "capture '") + cap_->name + "'";
}

Progress PcapMoldReader::progress() const noexcept { return {cap_->tell(), cap_->size}; }

bool PcapMoldReader::bad(std::uint64_t& counter, int errc, const std::string& what) {
  ++counter;
  if (first_error_.empty() || !opts_.skip_bad) {
    std::string full = "packet " + std::to_string(packet_no_) + " (file offset " +
                       std::to_string(packet_offset_) + "): " + what;
    if (first_error_.empty()) first_error_ = full;
    if (!opts_.skip_bad) {
      pending_errc_ = errc;
      pending_ = name() + ": " + full;
      return false;
    }
  }
  return true;
}

bool PcapMoldReader::next_packet() {
  // Packets skipped here (other traffic, bad packets under skip_bad) are bounded per call, so
  // that read() returns to its caller regularly.
  for (std::uint32_t skipped = 0; skipped < kSkipsPerRead; ++skipped) {
    packet_offset_ = cap_->tell();
    pcap_pkthdr* h = nullptr;
    const u_char* data = nullptr;
    const int rc = ::pcap_next_ex(cap_->pcap, &h, &data);
    if (rc == PCAP_ERROR_BREAK) {  // end of the capture
      eof_ = true;
      return false;
    }
    ++packet_no_;
    if (rc != 1) {
      eof_ = true;
      // libpcap cannot resynchronise after a damaged record: this ends the capture either way.
      const std::string msg = ::pcap_geterr(cap_->pcap);
      const bool cut = msg.find("truncated") != std::string::npos;
      bad(cut ? errors_.truncated : errors_.bad_packet,
          static_cast<int>(cut ? Errc::truncated : Errc::parse_error), "corrupt capture: " + msg);
      return false;
    }
    ++capture_.packets;
    Walked w = walk(cap_->linktype, data, h->caplen);
    switch (w.kind) {
      case Walk::not_udp:
        ++capture_.not_udp;
        continue;
      case Walk::fragment:
        ++capture_.fragments;
        continue;
      case Walk::bad:
        if (!bad(errors_.bad_packet, static_cast<int>(Errc::parse_error), w.why)) return false;
        continue;
      case Walk::udp:
        break;
    }
    if (opts_.udp_port != 0 && w.dport != opts_.udp_port) {
      ++capture_.other_port;
      continue;
    }
    std::size_t at = 0;
    const mold::PacketStatus st = packet_.parse(w.payload, &at);
    if (st != mold::PacketStatus::ok) {
      std::string what = std::string("MoldUDP64 packet of ") + std::to_string(w.payload.size()) +
                         " bytes: " + mold::to_string(st);
      if (st == mold::PacketStatus::message_overrun) {
        what += " (message " + std::to_string(at + 1) + " of " +
                std::to_string(packet_.header().count) + ")";
      }
      if (!bad(errors_.bad_packet, static_cast<int>(Errc::parse_error), what)) return false;
      continue;
    }
    ++capture_.mold_packets;
    const mold::Observation o = tracker_.observe(packet_.header(), packet_no_);
    msg_seq_ = packet_.header().seq;
    std::span<const std::uint8_t> skip;
    for (std::uint16_t i = 0; i < o.duplicate && packet_.next(skip); ++i) ++msg_seq_;
    if (packet_.remaining() > 0) return true;
  }
  return false;
}

bool PcapMoldReader::at_end() const noexcept {
  return eof_ && pending_errc_ == 0 && packet_.remaining() == 0;
}

std::size_t PcapMoldReader::read(std::span<Tick> out) {
  if (pending_errc_ != 0) throw Error(static_cast<Errc>(pending_errc_), pending_);
  const std::size_t want = out.size();
  std::size_t n = 0;
  std::uint32_t packets = 0;  // bounded: packets of messages that are not ticks
  while (n < want) {
    if (packet_.remaining() == 0 && (++packets > kSkipsPerRead || !next_packet())) break;
    std::span<const std::uint8_t> msg;
    bool stop = false;
    while (n < want && packet_.next(msg)) {
      const std::uint64_t seq = msg_seq_++;
      ++capture_.mold_messages;
      const Decoded d = decoder_.decode(msg.data(), msg.size(), out[n]);
      if (d == Decoded::tick) {
        out[n].seq = seq;
        ++n;
      } else if (d == Decoded::unknown_type || d == Decoded::bad_length) {
        std::string what = "MoldUDP64 sequence " + std::to_string(seq) + ": ";
        if (msg.empty()) {
          what += "empty message";
        } else if (d == Decoded::unknown_type) {
          what += "unknown message type " + describe_byte(msg[0]);
        } else {
          what += "message type " + describe_byte(msg[0]) + " has length " +
                  std::to_string(msg.size()) + ", expected " +
                  std::to_string(itch::length_of(msg[0]));
        }
        std::uint64_t& counter =
            d == Decoded::unknown_type ? errors_.unknown_type : errors_.bad_length;
        if (!bad(counter, static_cast<int>(Errc::parse_error), what)) {
          stop = true;
          break;
        }
      }
    }
    if (stop) break;
  }
  if (n == 0 && pending_errc_ != 0) throw Error(static_cast<Errc>(pending_errc_), pending_);
  return n;
}

}  // namespace tickrail::feed
