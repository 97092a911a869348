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

#include "../../source_root.hpp"

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

using tickrail::source_tree::itch_data_dir;

}  // namespace tickrail::feed::test
