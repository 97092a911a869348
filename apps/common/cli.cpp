#include "cli.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tickrail/affinity.hpp"
#include "tickrail/version.hpp"

namespace tickrail::cli {

void bad_value(std::string_view key, const std::string& why) {
  throw Error(Errc::config_error, std::string(key) + ": " + why);
}

namespace {

[[noreturn]] void bad(std::string_view option, std::string_view text, const std::string& why) {
  bad_value(option, "'" + std::string(text) + "' " + why);
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::atomic<bool> g_stop{false};
int g_stdout_errno = 0;  // the first failed write's, as errno is gone by the end of the run

extern "C" void on_stop_signal(int sig) {
  g_stop.store(true, std::memory_order_relaxed);
  if (sig == SIGINT) std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends at once
}

}  // namespace

std::int64_t parse_integer(std::string_view text, std::string_view option, std::int64_t min,
                           std::int64_t max) {
  const std::string_view t = trimmed(text);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec == std::errc::invalid_argument || end != t.data() + t.size()) {
    bad(option, text, "is not a whole number");
  }
  if (ec == std::errc::result_out_of_range || v < min || v > max) {
    bad(option, text, "is outside " + std::to_string(min) + ".." + std::to_string(max));
  }
  return v;
}

std::uint64_t parse_unsigned(std::string_view text, std::string_view option, std::uint64_t max) {
  const std::string_view t = trimmed(text);
  if (!t.empty() && t.front() == '-') bad(option, text, "is negative: expected 0.." + std::to_string(max));
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec == std::errc::invalid_argument || end != t.data() + t.size()) {
    bad(option, text, "is not a whole number");
  }
  if (ec == std::errc::result_out_of_range || v > max) {
    bad(option, text, "is outside 0.." + std::to_string(max));
  }
  return v;
}

double parse_real(std::string_view text, std::string_view option, double min, double max) {
  const std::string t(trimmed(text));
  char* end = nullptr;
  errno = 0;
  const double v = t.empty() ? 0.0 : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size()) bad(option, text, "is not a number");
  if (!std::isfinite(v)) bad(option, text, "is not a finite number");
  if (v < min || v > max) {
    char range[96];
    std::snprintf(range, sizeof range, "is outside %g..%g", min, max);
    bad(option, text, range);
  }
  return v;
}

std::chrono::milliseconds parse_seconds(std::string_view text, std::string_view option) {
  const double max_s = static_cast<double>(kMaxDuration.count()) / 1e3;
  const double s = parse_real(text, option, 0, max_s);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(s * 1e3)));
}

std::chrono::milliseconds parse_milliseconds(std::string_view text, std::string_view option) {
  return std::chrono::milliseconds(parse_integer(text, option, 0, kMaxDuration.count()));
}

std::string parse_cpu_list_text(std::string_view text, std::string_view option) {
  std::vector<int> cpus;
  try {
    cpus = parse_cpu_list(text);
  } catch (const Error&) {
    bad_value(option, "'" + std::string(text) + "' is not a cpu list like 2-3,6");
  }
  if (const std::string why = unusable_cpus(cpus); !why.empty()) {
    bad_value(option, "'" + std::string(text) + "': " + why);
  }
  return std::string(text);
}

void check_writable(const std::string& path, std::string_view option) {
  const auto fail = [&](int err) {
    throw Error(Errc::config_error,
                std::string(option) + ": cannot write '" + path + "': " + std::strerror(err));
  };
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) fail(EISDIR);
  // A FIFO or a device (/dev/stdout): opening a FIFO would wait for a reader; ask instead.
  if (exists && !S_ISREG(st.st_mode)) {
    if (::access(path.c_str(), W_OK) != 0) fail(errno);
    return;
  }
  // Without O_TRUNC: the file keeps what it holds until the report replaces it.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path.c_str());  // created by the check: the run writes it at its end
    return;
  }
  if (errno != EEXIST) fail(errno);
  const int existing = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (existing < 0) fail(errno);
  ::close(existing);
}

void install_stop_signals() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

const std::atomic<bool>& stop_flag() noexcept { return g_stop; }

bool print(const std::string& text) {
  errno = 0;
  if (std::fputs(text.c_str(), stdout) >= 0 && std::fflush(stdout) == 0) return true;
  if (g_stdout_errno == 0) g_stdout_errno = errno;
  return false;
}

bool stop_requested() noexcept { return g_stop.load(std::memory_order_relaxed); }

void sleep_unless_stopped(std::chrono::duration<double> d) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(d);
  while (!stop_requested()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(end - now, std::chrono::milliseconds(50)));
  }
}

std::string message_of(const Error& e) {
  std::string m = e.what();
  const std::string tail = ": " + e.code().message();
  if (m.size() <= tail.size() || !m.ends_with(tail)) return m;
  const std::string_view rest(m.data(), m.size() - tail.size());
  // tickrail's own category says nothing the message does not ("not found"); an OS reason does,
  // unless the message carries it already.
  if (e.code().category() == tickrail_category() || rest.ends_with(tail)) m.resize(rest.size());
  return m;
}

std::function<void()> interrupt_hook(const std::atomic<bool>& stop, std::function<void()> then) {
  return [&stop, then = std::move(then)] {
    if (stop.load(std::memory_order_relaxed)) throw Interrupted();
    if (then) then();
  };
}

Subscriber attach_subscriber(const SubscriberConfig& sc, const std::atomic<bool>& stop,
                             const std::function<void()>& between) {
  if (stop.load(std::memory_order_relaxed)) throw Interrupted();
  return Subscriber(sc, interrupt_hook(stop, between));
}

std::string exit_status_help() {
  return "Exit status: 0 ok; 1 the run failed (transport, device, input, or the report could not\n"
         "be written to stdout); 2 bad command line, config file or output path; 130 interrupted by\n"
         "SIGINT or SIGTERM, waiting for a channel too (the report and the output files are still\n"
         "written).";
}

// ---------------------------------------------------------------------------------------------
Cli::Cli(std::string name, const std::string& description)
    : name_(std::move(name)), app_(description, name_) {
  app_.set_version_flag("--version", name_ + " " + tickrail::version());
  app_.footer("\n" + exit_status_help());
  // A reader that went away (| head) makes the next write fail with EPIPE, seen by run(),
  // instead of killing the program before it cleans up (its live-counters file).
  std::signal(SIGPIPE, SIG_IGN);
}

void Cli::add_config(const std::string& help) {
  // One file per occurrence: a positional argument after -c FILE is never taken for a config.
  app_.add_option("-c,--config", configs_, help)
      ->check(CLI::Validator(CLI::ExistingFile).description(""))
      ->allow_extra_args(false)
      ->type_name("FILE");
}

CLI::Option* Cli::option(const std::string& names, const std::string& help,
                         std::function<void(const std::string&)> apply) {
  auto text = std::make_shared<std::string>();
  CLI::Option* o = app_.add_option(names, *text, help);
  given_.push_back({o, std::move(text), std::move(apply)});
  return o;
}

void Cli::value_names(std::initializer_list<std::pair<const char*, const char*>> names) {
  for (const auto& [option, value] : names) app_.get_option(option)->type_name(value);
}

CLI::Option* Cli::flag(const std::string& names, const std::string& help, std::function<void()> apply) {
  CLI::Option* o = app_.add_flag(names, help);
  given_.push_back({o, nullptr, [apply = std::move(apply)](const std::string&) { apply(); }});
  return o;
}

CLI::Option* Cli::output(const std::string& names, const std::string& help, std::string& target) {
  return option(names, help, [&target](const std::string& v) { target = v; })->type_name("FILE");
}

std::optional<int> parse_app(CLI::App& app, const std::string& name, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    app.exit(e);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\nRun with --help for the options.\n", name.c_str(), e.what());
    return kExitUsage;
  }
  return std::nullopt;
}

std::optional<int> Cli::parse(int argc, char** argv) { return parse_app(app_, name_, argc, argv); }

void Cli::resolve(const std::function<void(const std::string& path)>& read_file) const {
  for (const std::string& path : configs_) {
    try {
      read_file(path);
    } catch (const Error& e) {
      if (e.code() == make_error_code(Errc::config_error)) throw;
      throw Error(Errc::config_error, message_of(e));  // e.g. a file that cannot be read
    }
  }
  apply_overrides();
}

void Cli::apply_overrides() const {
  for (const Given& g : given_) {
    if (g.opt->count() > 0) g.apply(g.text ? *g.text : std::string());
  }
}

void Cli::check_outputs(std::initializer_list<std::pair<std::string_view, const std::string*>> paths) const {
  for (const auto& [option, path] : paths) {
    if (!path->empty()) check_writable(*path, option);
  }
}

int Cli::run(const std::function<int()>& body) const {
  int status = kExitFailure;
  try {
    status = body();
  } catch (const Interrupted& e) {
    note(e.what());
    status = kExitInterrupted;
  } catch (const Error& e) {
    note("error: " + message_of(e));
    status = e.code() == make_error_code(Errc::config_error) ? kExitUsage : kExitFailure;
  } catch (const std::exception& e) {
    note(std::string("error: ") + e.what());
  }
  return check_stdout(status);
}

int Cli::check_stdout(int status) const {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = g_stdout_errno != 0 ? g_stdout_errno : errno;
  if (flushed && std::ferror(stdout) == 0) return status;
  note("error: cannot write the report to standard output" +
       (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
  return status == kExitOk ? kExitFailure : status;
}

void Cli::note(const std::string& text) const { std::fprintf(stderr, "%s: %s\n", name_.c_str(), text.c_str()); }

void add_subscriber_options(Cli& cli, SubscriberConfig& sc) {
  cli.option("--transport", "shm, rc or ud", [&](const std::string& v) { sc.transport = parse_transport(v, "--transport"); });
  cli.option("--channel", "channel name", [&](const std::string& v) { sc.channel = v; });
  cli.option("--policy", "slow-consumer policy: block, drop, disconnect or conflate",
             [&](const std::string& v) { sc.policy = parse_policy(v, "--policy"); });
  cli.option("--attach-timeout-ms", "wait this long for the channel to appear (default 10000, at most 24 h)",
             [&](const std::string& v) { sc.attach_timeout = parse_milliseconds(v, "--attach-timeout-ms"); });
  cli.option("--housekeeping-cpus", "run tickrail's background threads only on these cpus, e.g. 2-3,6 (housekeeping_cpus)",
             [&](const std::string& v) { sc.housekeeping_cpus = parse_cpu_list_text(v, "--housekeeping-cpus"); });
  cli.value_names({{"--transport", "T"}, {"--channel", "NAME"}, {"--policy", "P"}, {"--attach-timeout-ms", "MS"},
                   {"--housekeeping-cpus", "LIST"}});
}

std::uint64_t parse_exchange_time(std::string_view text, std::string_view option) {
  if (text.find(':') == std::string_view::npos) return parse_unsigned(text, option);
  const std::string t(text);
  unsigned h = 0, m = 0, sec = 0;
  int used = 0;
  if (std::sscanf(t.c_str(), "%2u:%2u:%2u%n", &h, &m, &sec, &used) != 3 || h > 23 || m > 59 || sec > 59 ||
      (used != static_cast<int>(t.size()) && t[static_cast<std::size_t>(used)] != '.')) {
    bad_value(option, "'" + t + "' is not a time (nanoseconds, or HH:MM:SS[.fraction] of the day)");
  }
  std::uint64_t frac_ns = 0;
  if (used != static_cast<int>(t.size())) {
    const std::string_view digits = std::string_view(t).substr(static_cast<std::size_t>(used) + 1);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
      bad_value(option, "'" + t + "': the fraction of a second takes 1 to 9 digits");
    }
    std::uint64_t scale = 1'000'000'000;
    for (const char c : digits) {
      scale /= 10;
      frac_ns += static_cast<std::uint64_t>(c - '0') * scale;
    }
  }
  return ((h * 60ULL + m) * 60ULL + sec) * 1'000'000'000ULL + frac_ns;
}

void add_range_options(Cli& cli, record::Range& r) {
  cli.option("--from-seq", "recordings: start at this sequence number", [&r](const std::string& v) {
    r.from_seq = parse_unsigned(v, "--from-seq");
  });
  cli.option("--to-seq", "recordings: end at this sequence number (inclusive)", [&r](const std::string& v) {
    r.to_seq = parse_unsigned(v, "--to-seq");
  });
  cli.option("--from-time", "recordings: start at this exchange time (ns, or HH:MM:SS.fff of the day)",
             [&r](const std::string& v) { r.from_time = parse_exchange_time(v, "--from-time"); });
  cli.option("--to-time", "recordings: end at this exchange time (inclusive)",
             [&r](const std::string& v) { r.to_time = parse_exchange_time(v, "--to-time"); });
  cli.value_names({{"--from-seq", "N"}, {"--to-seq", "N"}, {"--from-time", "T"}, {"--to-time", "T"}});
}

}  // namespace tickrail::cli
