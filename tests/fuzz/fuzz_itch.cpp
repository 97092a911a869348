// libFuzzer target: BinaryFILE ITCH bytes -> ItchFileReader -> ticks -> OrderBook.
// The first byte picks the options (skip_bad, status ticks); bad input must end in
// tickrail::Error, never in a crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/order_book.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tickrail;
  using namespace tickrail::feed;
  if (size == 0) return 0;
  ItchReadOptions opts;
  opts.skip_bad = (data[0] & 1) != 0;
  opts.decoder.status_ticks = (data[0] & 2) != 0;
  // One book for the process, emptied per input: allocating it per input would dominate.
  static OrderBook book(BookConfig{.expected_orders = 256, .max_instrument = 1023});
  book.clear();
  ItchFileReader r(std::span(data + 1, size - 1), "fuzz", opts);
  Tick ticks[7];  // an odd batch: frames land across batch boundaries
  std::uint64_t total = 0;
  try {
    for (std::size_t n = 0; (n = r.read(ticks)) != 0 || !r.at_end();) {
      total += n;
      for (std::size_t i = 0; i < n; ++i) {
        Tick q{};
        (void)book.apply(ticks[i], q);
      }
    }
  } catch (const Error&) {
    if (opts.skip_bad) __builtin_trap();  // skip_bad never throws on bad ITCH in memory
  }
  if (total > r.counts().messages) __builtin_trap();  // a tick per valid message at most
  return 0;
}
