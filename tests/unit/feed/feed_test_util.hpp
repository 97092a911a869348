// Helpers shared by the feed tests: temporary files, and where the real ITCH excerpts live.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace tickrail::feed::test {

// A file under the system temp dir, removed when the object goes.
class TempFile {
 public:
  explicit TempFile(const std::string& suffix)
      : path_(std::filesystem::temp_directory_path() /
              ("tickrail-feed-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) +
               suffix)) {}
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] std::string path() const { return path_.string(); }
  void write(std::span<const std::uint8_t> bytes) const {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  void write(const std::string& text) const {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f << text;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

// The real excerpts: $TICKRAIL_ITCH_DATA, else ../shared/data/itch beside the source root (found
// from the working directory, which is the build dir or the source root). Empty when absent.
inline std::filesystem::path itch_data_dir() {
  if (const char* env = std::getenv("TICKRAIL_ITCH_DATA"); env != nullptr && *env != '\0') {
    return std::filesystem::is_directory(env) ? std::filesystem::path(env) : std::filesystem::path();
  }
  std::filesystem::path d = std::filesystem::current_path();
  for (int up = 0; up < 3 && !d.empty(); ++up, d = d.parent_path()) {
    if (std::filesystem::exists(d / "include/tickrail/tick.hpp")) {
      const auto data = d.parent_path() / "shared/data/itch";
      return std::filesystem::is_directory(data) ? data : std::filesystem::path();
    }
  }
  return {};
}

}  // namespace tickrail::feed::test
