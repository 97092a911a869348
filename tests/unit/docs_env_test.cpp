// Every environment variable the library and the programs read is in docs/apps.md's table: the
// sources of lib/ and apps/ are scanned for "TICKRAIL_..." string literals (getenv, env(),
// os.environ), so a new variable without its line fails here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "docs_check.hpp"

using namespace tickrail::test;
namespace fs = std::filesystem;

namespace {

std::set<std::string> variables_read_by_sources() {
  const std::regex literal(R"re(["'](TICKRAIL_[A-Z0-9_]+)["'])re");
  std::set<std::string> names;
  for (const char* dir : {"lib", "apps", "include"}) {
    for (const auto& e : fs::recursive_directory_iterator(source_root() / dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".py")) continue;
      const std::string text = read_file(e.path());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), literal); it != std::sregex_iterator(); ++it) {
        names.insert((*it)[1].str());
      }
    }
  }
  return names;
}

}  // namespace

TEST_CASE("everyEnvironmentVariableReadIsDocumented") {
  const std::set<std::string> names = variables_read_by_sources();
  // The scan itself works: the library's four are found.
  for (const char* known : {"TICKRAIL_LOG", "TICKRAIL_CLOCK", "TICKRAIL_STATS", "TICKRAIL_STAT_DIR"}) {
    INFO(known);
    CHECK(names.count(known) == 1);
  }
  const std::vector<std::string> missing = undocumented(names, docs_section("## Environment variables"));
  std::string list;
  for (const std::string& n : missing) list += " " + n;
  INFO("environment variables missing from docs/apps.md's table:" << list);
  CHECK(missing.empty());
}

TEST_CASE("docsSectionStopsAtTheNextHeadingOfItsLevel") {
  const std::string s = docs_section("### JSON of tickrail-jitter");
  CHECK(s.find("`out_of_order`") != std::string::npos);
  CHECK(s.find("### JSON of tickrail-stat") == std::string::npos);
  CHECK(undocumented({"negative", "no_such_key_anywhere"}, s) == std::vector<std::string>{"no_such_key_anywhere"});
}
