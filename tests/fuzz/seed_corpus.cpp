// Writes the fuzzers' seed corpora: small valid (and a few broken) inputs for each target, made
// with the feed's own writers. Run at build time: seed_corpus OUTDIR STAMP (fills OUTDIR/<target>/).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tickrail/tools/feed/itch_writer.hpp"
#include "tickrail/tools/feed/synthetic.hpp"
#include "tickrail/tools/record/recording.hpp"

namespace fs = std::filesystem;
using namespace tickrail;
using namespace tickrail::feed;
using Bytes = std::vector<std::uint8_t>;

namespace {

void put(const fs::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void be16(Bytes& b, std::size_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

ItchWriter every_type() {
  ItchWriter w;
  w.system_event(1, 'O');
  w.stock_directory(1, 2, "AAPL");
  w.begin('H', 1, 3).str("AAPL", 8).ch('T').ch(' ').str("    ", 4).end();
  w.begin('Y', 1, 3).str("AAPL", 8).ch('0').end();
  w.begin('L', 1, 3).str("NSDQ", 4).str("AAPL", 8).ch('Y').ch('N').ch('A').end();
  w.begin('V', 0, 3).u64(1).u64(2).u64(3).end();
  w.begin('W', 0, 3).ch('1').end();
  w.begin('K', 1, 3).str("AAPL", 8).u32(1).ch('A').u32(1).end();
  w.begin('J', 1, 3).str("AAPL", 8).u32(1).u32(2).u32(3).u32(4).end();
  w.begin('h', 1, 3).str("AAPL", 8).ch('Q').ch('H').end();
  w.add_order(1, 4, 1, Side::Buy, 100, "AAPL", 1'000'000);
  w.add_order_mpid(1, 4, 2, Side::Sell, 100, "AAPL", 1'001'000, "GSCO");
  w.order_executed(1, 5, 1, 10, 1);
  w.order_executed_price(1, 5, 1, 10, 2, 'Y', 1'000'100);
  w.order_cancel(1, 6, 1, 10);
  w.order_replace(1, 7, 1, 3, 50, 999'900);
  w.order_delete(1, 8, 3);
  w.trade(1, 9, Side::Buy, 5, "AAPL", 1'000'500, 3);
  w.cross_trade(1, 9, 1000, "AAPL", 1'000'500, 4, 'O');
  w.begin('B', 1, 9).u64(3).end();
  w.begin('I', 1, 9).u64(1).u64(2).ch('B').str("AAPL", 8).u32(1).u32(2).u32(3).ch('O').ch('L').end();
  w.begin('N', 1, 9).str("AAPL", 8).ch('A').end();
  w.begin('O', 1, 9).str("AAPL", 8).ch('Y').u32(1).u32(2).u32(3).u64(4).u32(5).u32(6).end();
  return w;
}

ItchWriter synthetic(std::uint64_t seed, std::uint64_t n) {
  SyntheticConfig c;
  c.seed = seed;
  c.instruments = 3;
  c.limit = n;
  SyntheticFeed f(c);
  ItchWriter w;
  std::vector<Tick> t(n);
  const std::size_t got = f.read(t);
  for (std::size_t i = 0; i < got; ++i) (void)w.append(t[i]);
  return w;
}

Bytes mold(std::uint64_t seq, const ItchWriter& w, int count = -1) {
  Bytes b;
  for (char c : std::string("000010059B")) b.push_back(static_cast<std::uint8_t>(c));
  for (int i = 7; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(seq >> (8 * i)));
  be16(b, count >= 0 ? static_cast<std::size_t>(count) : w.messages());
  b.insert(b.end(), w.bytes().begin(), w.bytes().end());
  return b;
}

Bytes frame(const Bytes& payload, int vlans) {
  Bytes b = {0x01, 0x00, 0x5e, 0x36, 0x0c, 0x6f, 0x02, 0, 0, 0, 0, 1};
  for (int i = 0; i < vlans; ++i) b.insert(b.end(), {0x81, 0x00, 0x00, 0x8d});
  b.insert(b.end(), {0x08, 0x00, 0x45, 0x00});
  be16(b, 28 + payload.size());
  b.insert(b.end(), {0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 233, 54, 12, 111, 0x9c, 0x40, 0x67, 0x6d});
  be16(b, 8 + payload.size());
  b.insert(b.end(), {0, 0});
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes with_mode(std::uint8_t mode, const Bytes& b) {
  Bytes out{mode};
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUTDIR STAMP\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  for (const char* d : {"itch", "moldudp64", "pcap", "csv", "recording"}) fs::create_directories(out / d);

  // Recordings: the synthetic flow in blocks of 16, raw and zstd, closed and cut mid-block.
  for (const bool zstd : {false, true}) {
    const fs::path p = out / "recording" / (zstd ? "zstd" : "raw");
    {
      record::RecordingMeta m;
      m.channel = "fuzz";
      m.zstd = zstd;
      record::RecordingWriter w(p.string(), m, record::WriterOptions{.zstd = zstd, .zstd_level = 1, .force = true});
      SyntheticConfig c;
      c.limit = 100;
      SyntheticFeed gen(c);
      std::vector<Tick> buf(16);
      while (const std::size_t n = gen.read(buf)) w.append(std::span<const Tick>(buf.data(), n), 0);
      w.close(record::EndReason::publisher_gone, 0);
    }
    fs::copy_file(p, out / "recording" / (std::string(zstd ? "zstd" : "raw") + "-cut"),
                  fs::copy_options::overwrite_existing);
    fs::resize_file(out / "recording" / (std::string(zstd ? "zstd" : "raw") + "-cut"), fs::file_size(p) - 100);
  }

  // ITCH: a mode byte, then BinaryFILE bytes.
  const ItchWriter all = every_type();
  const ItchWriter flow = synthetic(1, 200);
  for (std::uint8_t mode = 0; mode < 4; ++mode) {
    put(out / "itch" / ("every-type-" + std::to_string(mode)), with_mode(mode, all.bytes()));
  }
  put(out / "itch" / "flow", with_mode(3, flow.bytes()));
  Bytes cut = all.bytes();
  cut.resize(cut.size() - 3);
  put(out / "itch" / "truncated", with_mode(0, cut));

  // MoldUDP64: packets, each with a 2-byte length.
  Bytes packets;
  std::uint64_t seq = 1;
  for (const ItchWriter* w : {&all, &flow}) {
    const Bytes p = mold(seq, *w);
    be16(packets, p.size());
    packets.insert(packets.end(), p.begin(), p.end());
    seq += w->messages() + 5;  // leave a gap
  }
  const Bytes hb = mold(seq, ItchWriter(), 0);
  be16(packets, hb.size());
  packets.insert(packets.end(), hb.begin(), hb.end());
  const Bytes end = mold(seq, ItchWriter(), 0xffff);
  be16(packets, end.size());
  packets.insert(packets.end(), end.begin(), end.end());
  put(out / "moldudp64" / "session", packets);

  // pcap: mode byte 1 = frames wrapped by the fuzzer (Ethernet); 0 = a whole file.
  Bytes frames;
  int vlans = 0;
  for (const ItchWriter* w : {&all, &flow}) {
    const Bytes f = frame(mold(1 + static_cast<std::uint64_t>(vlans) * 100, *w), vlans);
    be16(frames, f.size());
    frames.insert(frames.end(), f.begin(), f.end());
    ++vlans;
  }
  put(out / "pcap" / "frames", with_mode(1, frames));
  put(out / "pcap" / "frames-skip-bad", with_mode(3, frames));
  Bytes file = {0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0};
  const Bytes f1 = frame(mold(7, all), 1);
  const std::uint32_t n = static_cast<std::uint32_t>(f1.size());
  for (std::uint32_t v : {0u, 0u, n, n}) {
    for (int i = 0; i < 4; ++i) file.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  file.insert(file.end(), f1.begin(), f1.end());
  put(out / "pcap" / "file", with_mode(0, file));

  // CSV: a mode byte, then text.
  const std::string csv =
      "seq,instrument,kind,side,price,qty,order_ref,exch_ts,aux,aux_qty,flags\n"
      "1,7,add,buy,318.7500,100,1,34200000000000,0,0,65\n"
      "2,7,quote,,318.7500,100,0,34200000000001,318.8000,200,65\n"
      "3,7,execute,,0.0000,50,1,34200000000002,9,0,69\n"
      "# comment\n\n"
      "4,7,delete,none,-0.0001,0,1,34200000000003,0,0,68\r\n";
  const std::string odd = "Kind, price ,qty\nTRADE,1.5,10\nstatus,,\nadd,1.23456,1\n";
  put(out / "csv" / "all-columns", with_mode(0, Bytes(csv.begin(), csv.end())));
  put(out / "csv" / "few-columns", with_mode(1, Bytes(odd.begin(), odd.end())));
  const std::string edges =
      "kind,price,qty,aux,flags\n"
      "quote,922337203685477.5807,4294967295,-922337203685477.5808,65535\n"
      "add,-0.0001,0,18446744073709551615,0\n";
  put(out / "csv" / "edges", with_mode(1, Bytes(edges.begin(), edges.end())));
  std::ofstream(argv[2]) << "ok\n";  // tells the build the corpus is written
  return 0;
}
