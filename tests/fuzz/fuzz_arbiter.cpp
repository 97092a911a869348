// LineArbiter (include/tickrail/line_arbiter.hpp) under any sequence of offers from two lines, in order
// or not, with lines going down and up and holes given up: it must not crash or hang, must
// deliver in strictly increasing order, and its counts must add up.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tickrail/line_arbiter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  tickrail::detail::LineArbiter arb(std::size_t{1} << (data[0] % 8));
  std::uint64_t last_out = 0;
  std::uint64_t out = 0;
  auto deliver = [&](const tickrail::Tick& t) {
    if (t.seq <= last_out) std::abort();  // out of order or twice
    last_out = t.seq;
    ++out;
  };
  std::uint64_t seq[2] = {1, 1};
  std::uint64_t offered[2] = {0, 0};
  const std::uint64_t start = 1 + data[1] % 4;
  arb.start_at(start);
  for (std::size_t i = 2; i + 1 < size; i += 2) {
    const int line = data[i] & 1;
    const std::uint8_t op = data[i] >> 1;
    const std::uint8_t arg = data[i + 1];
    if (op < 100) {  // a line brings its next tick, some ahead or (a broken line) back
      if (arg == 255) {
        seq[line] += std::uint64_t{1} << 40;
      } else if (arg >= 200) {
        seq[line] -= std::min<std::uint64_t>(seq[line], arg - 200u);
      } else {
        seq[line] += arg % 8;
      }
      tickrail::Tick t{};
      t.seq = seq[line];
      arb.offer(line, t, deliver);
      ++offered[line];
    } else if (op < 110) {
      arb.line_down(line, deliver);
    } else if (op < 120) {
      arb.line_up(line);
    } else {
      arb.skip_hole(deliver);
    }
    if (arb.delivered() != out) std::abort();
    for (int l = 0; l < 2; ++l) {  // each tick counted once at most (a leap waiting: not yet)
      const auto& c = arb.line(l);
      if (c.first + c.duplicates + c.refuted > offered[l]) std::abort();
    }
    if (arb.line(0).first + arb.line(1).first != out) std::abort();
    if (arb.next() < start || arb.delivered() + arb.gaps() + arb.skipped() != arb.next() - start) std::abort();
  }
  return 0;
}
