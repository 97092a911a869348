// libFuzzer target: bytes -> a recording file -> Recording (the index by header hops) and
// RecordingSource (every block: checksum, zstd, content). Whatever the bytes, the reader must
// not crash, must stop where the index stops, and must give only ticks whose sequence numbers
// increase; every failure is an Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "tickrail/error.hpp"
#include "tickrail/tools/record/recording.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tickrail;
  using namespace tickrail::record;
  static const std::string path = "/tmp/tickrail-fuzz-recording-" + std::to_string(::getpid()) + ".rec";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size != 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  for (const bool skip_bad : {false, true}) {
    try {
      RecordingSource src(path, {}, skip_bad);
      const Recording& r = src.recording();
      if (r.valid_end() > r.file_size()) __builtin_trap();
      Tick buf[64];
      std::uint64_t last = 0, n = 0;
      for (int calls = 0; calls < 100000; ++calls) {
        const std::size_t k = src.read(buf);
        for (std::size_t i = 0; i < k; ++i) {
          if (buf[i].seq <= last) __builtin_trap();
          last = buf[i].seq;
        }
        n += k;
        if (k == 0 && src.at_end()) break;
      }
      if (n > r.ticks()) __builtin_trap();
    } catch (const Error&) {
      // Not a recording, another version, a corrupt block, an unclosed file: named, as it must be.
    }
  }
  return 0;
}
