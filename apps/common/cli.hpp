// The command line shared by every tickrail program: --help and --version, -c/--config, the one
// precedence rule, checked numbers and output paths, stop signals and the exit statuses.
//
// Precedence, lowest to highest: built-in defaults < config files in the order given <
// environment (TICKRAIL_STATS, TICKRAIL_STAT_DIR: read by the library) < command line. A
// program declares its options through Cli: the values given on the command line are kept
// aside while the config files are read, and apply_overrides() writes them last, so a flag
// beats every config file whatever the order of the arguments.
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/error.hpp"
#include "tickrail/subscriber.hpp"
#include "tickrail/tools/record/range.hpp"

namespace tickrail::cli {

// The exit statuses of every program (docs/apps.md "Exit status", and each --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;       // the run failed (transport, input, device...)
inline constexpr int kExitUsage = 2;         // bad command line, config file or output path
inline constexpr int kExitInterrupted = 130;  // SIGINT or SIGTERM; the report is still written
// A report that could not be written to stdout (a full disk, a closed pipe: SIGPIPE is ignored)
// is a failed run: kExitFailure, unless the run had already failed or was interrupted.

// Checked conversions of command-line text: the whole text must be a number within [min, max]
// (finite for doubles); otherwise Error(config_error) "option: 'text' is not ...".
std::int64_t parse_integer(std::string_view text, std::string_view option, std::int64_t min,
                           std::int64_t max);
std::uint64_t parse_unsigned(std::string_view text, std::string_view option,
                             std::uint64_t max = std::numeric_limits<std::uint64_t>::max());
double parse_real(std::string_view text, std::string_view option, double min, double max);
// Seconds, possibly fractional (0.5), from 0 to kMaxDuration (config.hpp), to milliseconds.
std::chrono::milliseconds parse_seconds(std::string_view text, std::string_view option);
// Milliseconds from 0 to kMaxDuration.
std::chrono::milliseconds parse_milliseconds(std::string_view text, std::string_view option);
// A cpu list ("2-3,6") of cpus this process may use, returned as given once checked; "" is the
// empty list.
std::string parse_cpu_list_text(std::string_view text, std::string_view option);

// A config key (or option) whose value cannot work: throws Error(config_error) "key: why".
[[noreturn]] void bad_value(std::string_view key, const std::string& why);

// Makes sure `path` can be written before the run starts: opens it for writing without
// truncating it (a file created by the check is removed again). Throws Error(config_error)
// "option: cannot write 'path': why".
void check_writable(const std::string& path, std::string_view option);

// SIGINT and SIGTERM set a flag the program polls; a second SIGINT ends it at once.
void install_stop_signals();
[[nodiscard]] const std::atomic<bool>& stop_flag() noexcept;
[[nodiscard]] bool stop_requested() noexcept;
// Writes `text` to stdout and flushes it; false when that failed (the reason is kept for
// Cli::run(), which then says it: the programs' reports go through this).
bool print(const std::string& text);

// Sleeps for `d`, or less when a stop is requested.
void sleep_unless_stopped(std::chrono::duration<double> d);

// Thrown by attach_subscriber() when a stop is requested while it waits for the channel.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted while waiting for the channel") {}
};
// A between_attempts hook for the library's attach waits: throws Interrupted once `stop` is set,
// else calls `then` (when given).
std::function<void()> interrupt_hook(const std::atomic<bool>& stop, std::function<void()> then = {});
// Subscriber(sc, between) waiting up to sc.attach_timeout for its channel, and ending the wait
// with Interrupted once `stop` is set.
Subscriber attach_subscriber(const SubscriberConfig& sc, const std::atomic<bool>& stop,
                             const std::function<void()>& between = {});

class Cli {
 public:
  // `name` is the program ("tickrail-replay"): it prefixes every message.
  Cli(std::string name, const std::string& description);
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  [[nodiscard]] CLI::App& app() noexcept { return app_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

  // -c/--config FILE: one file per occurrence, repeatable, read in order.
  void add_config(const std::string& help);
  [[nodiscard]] const std::vector<std::string>& configs() const noexcept { return configs_; }

  // An option whose value, when given, is handed to `apply` by apply_overrides(). `apply` parses
  // and checks the text (the parse_* functions above) and stores it.
  CLI::Option* option(const std::string& names, const std::string& help,
                      std::function<void(const std::string&)> apply);
  // Names the values in --help: {{"--count", "N"}, {"--duration", "S"}}.
  void value_names(std::initializer_list<std::pair<const char*, const char*>> names);
  // A flag: `apply` runs by apply_overrides() when it was given.
  CLI::Option* flag(const std::string& names, const std::string& help, std::function<void()> apply);
  // An output file option: as option(), and its path is checked by check_outputs().
  CLI::Option* output(const std::string& names, const std::string& help, std::string& target);

  // Parses the command line. Returns the exit status when the program must end now: 0 after
  // --help or --version, kExitUsage (message on stderr) after a usage error.
  [[nodiscard]] std::optional<int> parse(int argc, char** argv);

  // The precedence rule: `read_file` reads each config file in the order given (over the
  // defaults; any error it throws becomes Error(config_error)), then the command-line values
  // are written over them. The environment is read by the library when it uses it.
  void resolve(const std::function<void(const std::string& path)>& read_file) const;
  // The command-line half of resolve(), for programs without config files.
  void apply_overrides() const;

  // check_writable() on every output path in `paths` that is not empty (after the overrides, so
  // that paths from config files are checked too).
  void check_outputs(std::initializer_list<std::pair<std::string_view, const std::string*>> paths) const;

  // Runs `body`, turning what it throws into "name: error: what" on stderr and an exit status:
  // kExitUsage for Errc::config_error (bad option, config or output path), kExitFailure for
  // anything else.
  // Then a report that could not be written to stdout is said, and kExitOk becomes kExitFailure.
  [[nodiscard]] int run(const std::function<int()>& body) const;

  // "name: text" on stderr.
  void note(const std::string& text) const;

 private:
  struct Given {
    CLI::Option* opt;
    std::shared_ptr<std::string> text;  // nullptr for a flag
    std::function<void(const std::string&)> apply;
  };
  [[nodiscard]] int check_stdout(int status) const;

  std::string name_;
  CLI::App app_;
  std::vector<std::string> configs_;
  std::vector<Given> given_;
};

// The options of a program that subscribes to a channel (tickrail-jitter, tickrail-record):
// --transport, --channel, --policy, --attach-timeout-ms and --housekeeping-cpus, written into `sc`.
void add_subscriber_options(Cli& cli, SubscriberConfig& sc);

// An exchange time (Tick::exch_ts): nanoseconds ("34200000000000"), or a time of day
// "HH:MM:SS[.fraction]" as ITCH counts it, in nanoseconds since midnight. Error(config_error)
// naming `option` otherwise.
std::uint64_t parse_exchange_time(std::string_view text, std::string_view option);
// --from-seq, --to-seq, --from-time and --to-time (bounds inclusive; time is exch_ts), into `r`.
void add_range_options(Cli& cli, record::Range& r);

// what() without tickrail's own category text that std::system_error appends (": not found"):
// the message alone says what and where. The OS's reason for an errno code ("No such file or
// directory") stays, once: a message that already ends with it (recording.cpp) keeps one copy.
[[nodiscard]] std::string message_of(const Error& e);

// Parses a plain CLI::App's command line (tools without config files): as Cli::parse.
[[nodiscard]] std::optional<int> parse_app(CLI::App& app, const std::string& name, int argc, char** argv);

// The exit-status table printed at the end of every --help.
[[nodiscard]] std::string exit_status_help();


}  // namespace tickrail::cli
