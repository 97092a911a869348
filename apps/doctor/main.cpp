// tickrail-doctor: checks this host for what tickrail needs and says how to fix what is wrong.
//
//   tickrail-doctor                          every check, as a table
//   tickrail-doctor -c app.toml [-c more.toml] ... against one deployment's rings, transport, cores
//   tickrail-doctor --cpus 2,3 --json        JSON for automation
//
// Exit status: 0 when no check FAILs, 1 when one does, 2 on a usage or config error.
#include <unistd.h>

#include <cstdio>

#include "../jitter/jitter.hpp"
#include "../record/record.hpp"
#include "../replay/replay.hpp"
#include "cli.hpp"
#include "tickrail/tools/config_file.hpp"
#include "tickrail/affinity.hpp"
#include "tickrail/tools/doctor.hpp"

using namespace tickrail;

namespace {

struct Args {
  doctor::Options o;
  std::vector<std::string> only;
  bool json = false, no_color = false, list = false;
};

void declare(cli::Cli& cli, Args& a) {
  doctor::Options& o = a.o;
  cli.add_config("a tickrail TOML file: check its transports, rings and cpus, and its programs' keys; repeat for several");
  cli.option("--cpus", "cores the hot threads run on, e.g. 2,3 or 2-5",
             [&](const std::string& v) {
               try {
                 o.cpus = parse_cpu_list(v);
               } catch (const Error& e) {
                 throw Error(Errc::config_error, "--cpus: " + cli::message_of(e));
               }
             });
  cli.option("--device", "check only this RDMA device (e.g. rxe0, mlx5_0)", [&](const std::string& v) { o.device = v; });
  cli.option("--address", "local RoCE address whose GID must exist", [&](const std::string& v) { o.address = v; });
  cli.app().add_option("--only", a.only, "run only these checks (see --list)")->allow_extra_args(false);
  cli.option("--root", "directory holding the sys/ and proc/ to read (tests; default /)",
             [&](const std::string& v) { o.root = v; });
  cli.option("--sample-ms", "how long to sample SMT sibling load (0..10000, default 200)", [&](const std::string& v) {
    o.busy_sample = std::chrono::milliseconds(cli::parse_integer(v, "--sample-ms", 0, 10000));
  });
  cli.flag("--json", "print the findings as JSON", [&] { a.json = true; });
  cli.flag("--no-color", "no ANSI colours in the table", [&] { a.no_color = true; });
  cli.flag("--list", "list the checks and exit", [&] { a.list = true; });
  cli.value_names({{"--cpus", "LIST"}, {"--device", "DEV"}, {"--address", "A"}, {"--root", "DIR"},
                   {"--sample-ms", "MS"}});
}

// The programs' own sections, read by the programs' own readers: a key they do not know is
// then an unknown key of the file.
void read_program_sections(ConfigFile& f) {
  replay::Options ro;
  replay::read_options(f.section("replay"), ro);
  jitter::Options jo;
  jitter::read_options(f.section("jitter"), jo);
  read_failover_config(f, jo.line_b, jo.failover);
  recorder_app::Options rec;
  recorder_app::read_options(f.section("record"), rec);
}

int check(const cli::Cli& cli, Args& a) {
  if (a.list) {
    for (const doctor::Check& c : doctor::checks()) std::printf("%-11s %s\n", c.name, c.title);
    return cli::kExitOk;
  }
  if (!cli.configs().empty()) {
    doctor::load_config(cli.configs(), a.o, read_program_sections);
    // A config that does not load is the user's to fix before anything is checked.
    for (const std::string& e : a.o.config_errors) cli.note("error: " + e);
    if (!a.o.config_errors.empty()) return cli::kExitUsage;
  }
  doctor::Report r;
  try {
    r = doctor::run(a.o, a.only);
  } catch (const Error& e) {
    // The one argument run() rejects is a name in --only that is not a check.
    if (e.code() != make_error_code(Errc::invalid_argument)) throw;
    throw Error(Errc::config_error, "--only: " + cli::message_of(e));
  }
  // A failure to write is said by cli.run().
  (void)cli::print(a.json ? doctor::format_json(r) + "\n" : doctor::format_text(r, !a.no_color && ::isatty(STDOUT_FILENO) != 0));
  return r.passed() ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  cli::Cli cli("tickrail-doctor",
               "tickrail-doctor: checks this host for RDMA, cores, memory and clock settings.\n"
               "Exit status 1 means a check FAILed (the table says which and how to fix it).");
  Args a;
  declare(cli, a);
  a.o.busy_sample = std::chrono::milliseconds(200);
  if (const auto status = cli.parse(argc, argv)) return *status;

  return cli.run([&] {
    cli.apply_overrides();
    return check(cli, a);
  });
}
