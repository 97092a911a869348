// libFuzzer target: CSV text -> CsvTickReader. Every tick it accepts must survive a round trip
// through CsvTickWriter's format and a second parse unchanged.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tickrail/error.hpp"
#include "tickrail/tools/feed/csv_reader.hpp"
#include "tickrail/tools/feed/csv_writer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tickrail;
  using namespace tickrail::feed;
  if (size == 0) return 0;
  const bool skip_bad = (data[0] & 1) != 0;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<Tick> got;
  try {
    CsvTickReader r(std::move(text), "fuzz.csv", CsvReadOptions{skip_bad});
    Tick ticks[3];
    for (std::size_t n = 0; (n = r.read(ticks)) != 0 || !r.at_end();) got.insert(got.end(), ticks, ticks + n);
  } catch (const Error&) {
    // A bad header, or a bad line without skip_bad: an Error naming the line, as it must be.
  }
  std::string again = CsvTickWriter::kHeader;
  again += '\n';
  for (Tick& t : got) {
    t.send_ts = 0;  // the writer leaves the publisher's stamp out
    CsvTickWriter::format(t, again);
  }
  CsvTickReader back(again, "again.csv", CsvReadOptions{});  // must not throw: trap if it does
  std::vector<Tick> round(got.size() + 1);
  std::size_t count = 0;
  while (!back.at_end() && count < round.size()) count += back.read(std::span(round).subspan(count));
  if (count != got.size()) __builtin_trap();
  if (count != 0 && std::memcmp(round.data(), got.data(), count * sizeof(Tick)) != 0) __builtin_trap();
  return 0;
}
