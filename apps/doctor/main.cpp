// tickrail-doctor: checks this host for what tickrail needs and says how to fix what is wrong.
//
//   tickrail-doctor                          every check, as a table
//   tickrail-doctor --config app.toml        ... against one deployment's rings, transport, cores
//   tickrail-doctor --cpus 2,3 --json        JSON for automation
//
// Exit status: 0 when no check FAILs, 1 when one does, 2 on a usage error.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "tickrail/affinity.hpp"
#include "tickrail/doctor.hpp"

using namespace tickrail;

int main(int argc, char** argv) {
  doctor::Options o;
  std::string config, cpus;
  std::vector<std::string> only;
  bool json = false, no_color = false, list = false;
  int sample_ms = 200;
  CLI::App app{"tickrail-doctor: checks this host for RDMA, cores, memory and clock settings"};
  app.add_option("--config", config, "a tickrail TOML file: check its transports, rings and cpus");
  app.add_option("--cpus", cpus, "cores the hot threads run on, e.g. 2,3 or 2-5");
  app.add_option("--device", o.device, "check only this RDMA device (e.g. rxe0, mlx5_0)");
  app.add_option("--address", o.address, "local RoCE address whose GID must exist");
  app.add_option("--only", only, "run only these checks (see --list)");
  app.add_option("--root", o.root, "directory holding the sys/ and proc/ to read (tests)")
      ->capture_default_str();
  app.add_option("--sample-ms", sample_ms, "how long to sample SMT sibling load")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_flag("--json", json, "print the findings as JSON");
  app.add_flag("--no-color", no_color, "no ANSI colours in the table");
  app.add_flag("--list", list, "list the checks and exit");
  CLI11_PARSE(app, argc, argv);

  if (list) {
    for (const doctor::Check& c : doctor::checks()) std::printf("%-11s %s\n", c.name, c.title);
    return 0;
  }
  try {
    if (!cpus.empty()) o.cpus = parse_cpu_list(cpus);
    if (!config.empty()) doctor::load_config(config, o);
    o.busy_sample = std::chrono::milliseconds(sample_ms);
    const doctor::Report r = doctor::run(o, only);
    if (json) {
      std::printf("%s\n", doctor::format_json(r).c_str());
    } else {
      std::printf("%s", doctor::format_text(r, !no_color && ::isatty(STDOUT_FILENO) != 0).c_str());
    }
    return r.passed() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "tickrail-doctor: " << e.what() << "\n";
    return 2;
  }
}
