// tickrail-stat: the live counters of every tickrail process on this host (AeronStat's role).
//
//   tickrail-stat                  refresh in place every second, like top (Ctrl-C to quit)
//   tickrail-stat --json           one snapshot as JSON, for scripts
//   tickrail-stat --prometheus [FILE]   Prometheus text format, for node exporter's textfile
//                                  collector (FILE is replaced atomically)
//
// Only a terminal gets the in-place redraw; into a pipe or file each refresh is a plain
// snapshot after a header line, without escape codes.
//
// Each process with a Publisher or Subscriber keeps a counters file, <dir>/tickrail-stat.<pid>.
// A process that died is reported dead (its last counters shown) and its file is removed.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <thread>

#include <unistd.h>

#include "tickrail/report.hpp"
#include "tickrail/stats.hpp"

using namespace tickrail;

int main(int argc, char** argv) {
  stats::ScanOptions scan;
  double interval = 1.0;
  bool json = false;
  bool once = false;
  bool keep_dead = false;
  std::string prometheus;
  std::uint64_t count = 0;
  CLI::App app{"tickrail-stat: live counters of the tickrail publishers and subscribers on this host"};
  app.add_option("--dir", scan.dir, "directory of the counters files ($TICKRAIL_STAT_DIR)")
      ->capture_default_str();
  app.add_option("--interval", interval, "seconds between refreshes")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_flag("--json", json, "print one snapshot as JSON and exit");
  app.add_flag("--once", once, "print one snapshot as text and exit");
  app.add_option("--count", count, "stop after this many refreshes (0: run until interrupted)");
  app.add_option("--prometheus", prometheus,
                 "write the counters in Prometheus text format to stdout, or to FILE (replaced "
                 "atomically); once, or every --interval when --interval is given")
      ->expected(0, 1)
      ->type_name("[FILE]");
  app.add_flag("--keep-dead", keep_dead, "report dead processes without removing their files");
  CLI11_PARSE(app, argc, argv);
  scan.remove_dead = !keep_dead;

  try {
    if (json) {
      const auto ps = stats::scan(scan);
      std::printf("%s\n", stats::format_json(ps).c_str());
      return 0;
    }
    if (app.count("--prometheus") != 0) {
      const bool repeat = app.count("--interval") != 0;
      for (std::uint64_t n = 0; count == 0 || n < count; ++n) {
        const std::string text = stats::format_prometheus(stats::scan(scan));
        if (prometheus.empty()) {
          std::fputs(text.c_str(), stdout);
          std::fflush(stdout);
        } else {
          write_text_file_atomically(prometheus, text);
        }
        if (!repeat || (count != 0 && n + 1 == count)) break;
        std::this_thread::sleep_for(std::chrono::duration<double>(interval));
      }
      return 0;
    }
    if (once) {
      std::printf("%s", stats::format_text(stats::scan(scan)).c_str());
      return 0;
    }
    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    std::vector<stats::ProcessSnapshot> before;
    auto t_before = std::chrono::steady_clock::now();
    for (std::uint64_t n = 0; count == 0 || n < count; ++n) {
      const auto now = stats::scan(scan);
      const auto t_now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(t_now - t_before).count();
      char stamp[32] = {};
      const std::time_t wall = std::time(nullptr);
      std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&wall));
      // On a terminal, home the cursor and clear the screen: the table redraws in place. Into a
      // pipe, snapshots follow one another, a blank line apart.
      std::printf("%stickrail-stat %s  %s  every %.2g s\n\n%s", tty ? "\033[H\033[2J" : (n == 0 ? "" : "\n"),
                  stamp, scan.dir.c_str(), interval,
                  stats::format_text(now, before, n == 0 ? 0.0 : dt).c_str());
      std::fflush(stdout);
      before = now;
      t_before = t_now;
      if (count != 0 && n + 1 == count) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    }
  } catch (const std::exception& e) {
    std::cerr << "tickrail-stat: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
