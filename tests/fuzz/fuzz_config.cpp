// libFuzzer target: TOML text -> ConfigFile -> PublisherConfig, SubscriberConfig and a program
// section. Whatever the bytes, the loader either fills the configs or throws tickrail::Error
// (config_error) whose message names the file; any other exception or a crash is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tickrail/tools/config_file.hpp"
#include "tickrail/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tickrail;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    ConfigFile f(text, "fuzz.toml");
    PublisherConfig pc;
    read_publisher_config(f, pc);
    SubscriberConfig sc;
    read_subscriber_config(f, sc);
    ConfigFile::Section app = f.section("replay");
    double rate = 0;
    std::uint64_t count = 0;
    std::string input;
    bool book = false;
    app.get("rate", rate);
    app.get("count", count);
    app.get("input", input);
    app.get("book", book);
    f.check_all_read({"jitter"});
  } catch (const Error& e) {
    if (e.code() != make_error_code(Errc::config_error)) __builtin_trap();
    if (std::string_view(e.what()).find("fuzz.toml") == std::string_view::npos) __builtin_trap();
  }
  return 0;
}
