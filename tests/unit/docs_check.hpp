// Checks that what the programs emit is documented in docs/apps.md: every JSON key of a run,
// every metric name, every environment variable. The source tree is found through
// TICKRAIL_SOURCE_ROOT (set by meson test), so a build directory anywhere works.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace tickrail::test {

inline std::filesystem::path source_root() {
  const char* p = std::getenv("TICKRAIL_SOURCE_ROOT");
  REQUIRE(p != nullptr);
  REQUIRE(std::filesystem::is_regular_file(std::filesystem::path(p) / "docs" / "apps.md"));
  return p;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The text of docs/apps.md from the heading that starts with `heading` to the next heading of
// the same or a higher level.
inline std::string docs_section(const std::string& heading) {
  const std::string doc = read_file(source_root() / "docs" / "apps.md");
  const std::size_t at = doc.find("\n" + heading);
  INFO("docs/apps.md has no heading '" << heading << "'");
  REQUIRE(at != std::string::npos);
  const std::string level = heading.substr(0, heading.find(' ') + 1);  // "### "
  std::size_t end = at + 1;
  for (;;) {
    end = doc.find("\n#", end + 1);
    if (end == std::string::npos) break;
    const std::size_t hashes = doc.find_first_not_of('#', end + 1) - (end + 1);
    if (hashes <= level.size() - 1 && doc[end + 1 + hashes] == ' ') break;
  }
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Every object key in j, at any depth. The keys of objects named in `maps` are data (ITCH type
// codes, tick kinds), not names: their values are walked, not their keys.
inline void json_keys(const nlohmann::json& j, std::set<std::string>& out,
                      const std::set<std::string>& maps = {}, bool data_keys = false) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!data_keys) out.insert(it.key());
      json_keys(it.value(), out, maps, maps.count(it.key()) != 0 && !data_keys);
    }
  } else if (j.is_array()) {
    for (const auto& e : j) json_keys(e, out, maps);
  }
}

// The names of `names` that the text does not show in backquotes.
inline std::vector<std::string> undocumented(const std::set<std::string>& names, const std::string& text) {
  std::vector<std::string> missing;
  for (const std::string& n : names) {
    if (text.find("`" + n + "`") == std::string::npos) missing.push_back(n);
  }
  return missing;
}

// Fails naming every key of `j` that the section `heading` of docs/apps.md does not document.
inline void require_json_documented(const nlohmann::json& j, const std::string& heading,
                                    const std::set<std::string>& maps = {}) {
  std::set<std::string> keys;
  json_keys(j, keys, maps);
  REQUIRE(!keys.empty());
  const std::vector<std::string> missing = undocumented(keys, docs_section(heading));
  std::string list;
  for (const std::string& k : missing) list += " " + k;
  INFO("JSON keys not documented under '" << heading << "' in docs/apps.md:" << list);
  CHECK(missing.empty());
}

}  // namespace tickrail::test
