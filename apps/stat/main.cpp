// tickrail-stat: the live counters of every tickrail process on this host (AeronStat's role).
//
//   tickrail-stat                  refresh in place every second, like top (Ctrl-C to quit: 130)
//   tickrail-stat --json           one snapshot as JSON, for scripts
//
// Each process with a Publisher or Subscriber keeps a counters file, <dir>/tickrail-stat.<pid>.
// A process that died is reported dead (its last counters shown) and its file is removed.
#include <chrono>
#include <cstdio>
#include <ctime>

#include "cli.hpp"
#include "tickrail/stats.hpp"

using namespace tickrail;

int main(int argc, char** argv) {
  stats::ScanOptions scan;
  double interval = 1.0;
  bool json = false;
  bool once = false;
  bool keep_dead = false;
  std::uint64_t count = 0;
  cli::Cli cli("tickrail-stat",
               "tickrail-stat: live counters of the tickrail publishers and subscribers on this host");
  cli.option("--dir", "directory of the counters files (default $TICKRAIL_STAT_DIR, else /dev/shm)",
             [&](const std::string& v) { scan.dir = v; });
  cli.option("--interval", "seconds between refreshes (0.05..3600, default 1)",
             [&](const std::string& v) { interval = cli::parse_real(v, "--interval", 0.05, 3600.0); });
  cli.flag("--json", "print one snapshot as JSON and exit", [&] { json = true; });
  cli.flag("--once", "print one snapshot as text and exit", [&] { once = true; });
  cli.option("--count", "stop after this many refreshes (0: run until interrupted)",
             [&](const std::string& v) { count = cli::parse_unsigned(v, "--count"); });
  cli.flag("--keep-dead", "report dead processes without removing their files", [&] { keep_dead = true; });
  cli.value_names({{"--dir", "DIR"}, {"--interval", "S"}, {"--count", "N"}});
  if (const auto status = cli.parse(argc, argv)) return *status;
  return cli.run([&] {
    cli.apply_overrides();
    scan.remove_dead = !keep_dead;
    if (json) {
      const auto ps = stats::scan(scan);
      std::printf("%s\n", stats::format_json(ps).c_str());
      return 0;
    }
    if (once) {
      std::printf("%s", stats::format_text(stats::scan(scan)).c_str());
      return 0;
    }
    cli::install_stop_signals();
    std::vector<stats::ProcessSnapshot> before;
    auto t_before = std::chrono::steady_clock::now();
    for (std::uint64_t n = 0; count == 0 || n < count; ++n) {
      const auto now = stats::scan(scan);
      const auto t_now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(t_now - t_before).count();
      char stamp[32] = {};
      const std::time_t wall = std::time(nullptr);
      std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&wall));
      // Home the cursor and clear the screen: the table redraws in place.
      std::printf("\033[H\033[2Jtickrail-stat %s  %s  every %.2g s\n\n%s", stamp, scan.dir.c_str(),
                  interval, stats::format_text(now, before, n == 0 ? 0.0 : dt).c_str());
      std::fflush(stdout);
      before = now;
      t_before = t_now;
      if (count != 0 && n + 1 == count) break;
      cli::sleep_unless_stopped(std::chrono::duration<double>(interval));
      if (cli::stop_requested()) break;
    }
    return cli::stop_requested() ? cli::kExitInterrupted : cli::kExitOk;
  });
}
