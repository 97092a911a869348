#include "core/process_identity.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace tickrail::detail {

namespace {
std::string proc_file(const std::string& root, int pid, const char* name) {
  std::string path = root.empty() ? std::string("/") : root;
  if (path.back() != '/') path += '/';
  return path + "proc/" + std::to_string(pid) + "/" + name;
}
}  // namespace

std::optional<std::uint64_t> parse_start_time(std::string_view text) noexcept {
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::size_t pos = close + 1;
  for (int field = 3; field <= 22; ++field) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    const std::size_t end = std::min(text.find(' ', pos), text.size());
    if (pos >= end) return std::nullopt;
    if (field == 22) {
      std::uint64_t v = 0;
      const auto [p, ec] = std::from_chars(text.data() + pos, text.data() + end, v);
      if (ec != std::errc() || p != text.data() + end) return std::nullopt;
      return v;
    }
    pos = end;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> process_start_time(int pid, const std::string& root) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in(proc_file(root, pid, "stat"));
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  return parse_start_time(text);
}

std::vector<uid_t> process_uids(int pid, const std::string& root) {
  if (pid <= 0) return {};
  std::ifstream in(proc_file(root, pid, "status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    std::vector<uid_t> uids;
    unsigned long u = 0;
    while (fields >> u) uids.push_back(static_cast<uid_t>(u));
    return uids;
  }
  return {};
}

}  // namespace tickrail::detail
