// tickrail-stat: the live counters of every tickrail process on this host (AeronStat's role).
//
//   tickrail-stat                  refresh in place every second, like top (Ctrl-C to quit: 130)
//   tickrail-stat --json           one snapshot as JSON, for scripts
//   tickrail-stat --prometheus [FILE]   Prometheus text format, for node exporter's textfile
//                                  collector (FILE is replaced atomically)
//
// Only a terminal gets the in-place redraw; into a pipe or file each refresh is a plain
// snapshot after a header line, without escape codes.
//
// Each process with a Publisher or Subscriber keeps a counters file, <dir>/tickrail-stat.<pid>.
// A process that died is reported dead (its last counters shown) and its file is removed.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "cli.hpp"
#include "text.hpp"
#include "tickrail/tools/report.hpp"
#include "tickrail/tools/stats_reader.hpp"

using namespace tickrail;

namespace {

struct Options {
  stats::ScanOptions scan;
  double interval = 1.0;
  bool interval_given = false;
  bool json = false;
  bool once = false;
  bool keep_dead = false;
  bool prometheus = false;
  std::string prometheus_file;  // empty: stdout
  std::uint64_t count = 0;
};

// Prometheus text, once or every interval (when --interval is given), to stdout or FILE.
int prometheus(const Options& o) {
  for (std::uint64_t n = 0; o.count == 0 || n < o.count; ++n) {
    const std::string text = stats::format_prometheus(stats::scan(o.scan));
    if (o.prometheus_file.empty()) {
      // A reader gone or a full disk: no use going on; cli.run() says so.
      if (!cli::print(text)) break;
    } else {
      write_text_file_atomically(o.prometheus_file, text);
    }
    if (!o.interval_given || (o.count != 0 && n + 1 == o.count)) break;
    cli::sleep_unless_stopped(std::chrono::duration<double>(o.interval));
    if (cli::stop_requested()) break;
  }
  return cli::stop_requested() ? cli::kExitInterrupted : cli::kExitOk;
}

// The table, redrawn in place on a terminal; plain snapshots one after another into a pipe.
int refresh(const Options& o) {
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  std::vector<stats::ProcessSnapshot> before;
  auto t_before = std::chrono::steady_clock::now();
  for (std::uint64_t n = 0; o.count == 0 || n < o.count; ++n) {
    const auto now = stats::scan(o.scan);
    const auto t_now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(t_now - t_before).count();
    char stamp[32] = {};
    const std::time_t wall = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&wall));
    // On a terminal, home the cursor and clear the screen: the table redraws in place. Into a
    // pipe, snapshots follow one another, a blank line apart.
    const std::string head = cli::fmt("%stickrail-stat %s  %s  every %.2g s\n\n",
                                      tty ? "\033[H\033[2J" : (n == 0 ? "" : "\n"), stamp, o.scan.dir.c_str(), o.interval);
    if (!cli::print(head + stats::format_text(now, before, n == 0 ? 0.0 : dt))) break;  // as prometheus()
    before = now;
    t_before = t_now;
    if (o.count != 0 && n + 1 == o.count) break;
    cli::sleep_unless_stopped(std::chrono::duration<double>(o.interval));
    if (cli::stop_requested()) break;
  }
  return cli::stop_requested() ? cli::kExitInterrupted : cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  cli::Cli cli("tickrail-stat",
               "tickrail-stat: live counters of the tickrail publishers and subscribers on this host");
  cli.option("--dir", "directory of the counters files (default $TICKRAIL_STAT_DIR, else /dev/shm)",
             [&](const std::string& v) { o.scan.dir = v; });
  cli.option("--interval", "seconds between refreshes (0.05..3600, default 1)", [&](const std::string& v) {
    o.interval = cli::parse_real(v, "--interval", 0.05, 3600.0);
    o.interval_given = true;
  });
  cli.flag("--json", "print one snapshot as JSON and exit", [&] { o.json = true; });
  cli.flag("--once", "print one snapshot as text and exit", [&] { o.once = true; });
  cli.option("--count", "stop after this many refreshes (0: run until interrupted)",
             [&](const std::string& v) { o.count = cli::parse_unsigned(v, "--count"); });
  cli.option("--prometheus",
             "write the counters in Prometheus text format to stdout, or to FILE (replaced "
             "atomically); once, or every --interval when --interval is given",
             [&](const std::string& v) {
               o.prometheus = true;
               o.prometheus_file = v;
             })
      ->expected(0, 1)
      ->type_name("[FILE]");
  cli.flag("--keep-dead", "report dead processes without removing their files", [&] { o.keep_dead = true; });
  cli.value_names({{"--dir", "DIR"}, {"--interval", "S"}, {"--count", "N"}});
  if (const auto status = cli.parse(argc, argv)) return *status;
  return cli.run([&] {
    cli.apply_overrides();
    o.scan.remove_dead = !o.keep_dead;
    if (!o.prometheus_file.empty()) {
      struct stat st {};
      if (::lstat(o.prometheus_file.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        cli::bad_value("--prometheus", "'" + o.prometheus_file + "' is not a regular file (each write replaces it)");
      }
      cli::check_writable(o.prometheus_file, "--prometheus");
    }
    if (o.json) {
      std::printf("%s\n", stats::format_json(stats::scan(o.scan)).c_str());
      return cli::kExitOk;
    }
    if (o.once) {
      std::printf("%s", stats::format_text(stats::scan(o.scan)).c_str());
      return cli::kExitOk;
    }
    cli::install_stop_signals();
    return o.prometheus ? prometheus(o) : refresh(o);
  });
}
