// Writes a small, valid NASDAQ ITCH 5.0 BinaryFILE for the docs test: a system event, a stock
// directory and the synthetic order flow (adds, executions, cancels, replaces) encoded as ITCH,
// a millisecond of feed time, so that the docs' commands run on a file of the name they give.
//   make_itch PATH [MESSAGES]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch_writer.hpp"
#include "tickrail/tools/feed/synthetic.hpp"

int main(int argc, char** argv) {
  using namespace tickrail::feed;
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: make_itch PATH [MESSAGES]\n");
    return 2;
  }
  const std::uint64_t messages = argc == 3 ? std::strtoull(argv[2], nullptr, 10) : 2000;
  try {
    SyntheticConfig cfg;
    cfg.instruments = 4;
    cfg.limit = messages;
    ItchWriter w;
    w.system_event(cfg.start_ts - 1000, 'O');
    for (std::uint32_t i = 1; i <= cfg.instruments; ++i) {
      w.stock_directory(static_cast<std::uint16_t>(i), cfg.start_ts - 1000, "SYM" + std::to_string(i));
    }
    SyntheticFeed gen(cfg);
    std::vector<tickrail::Tick> buf(256);
    while (const std::size_t n = gen.read(buf)) {
      for (std::size_t k = 0; k < n; ++k) (void)w.append(buf[k], "SYM");
    }
    std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
    const std::span<const std::uint8_t> bytes = w.span();
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::fprintf(stderr, "make_itch: cannot write %s\n", argv[1]);
      return 1;
    }
  } catch (const tickrail::Error& e) {
    std::fprintf(stderr, "make_itch: %s\n", e.what());
    return 1;
  }
  return 0;
}
