// tickrail-record: records a tickrail channel to a file (docs/recording.md), prints a recording's
// header, ranges, gaps and end (--info), and exports a range of it to CSV (--csv). A thin main
// over record.hpp and the library's ChannelRecorder.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "cli.hpp"
#include "record.hpp"
#include "text.hpp"
#include "tickrail/tools/config_file.hpp"
#include "tickrail/tools/report.hpp"

using namespace tickrail;

namespace {

// Exit statuses beyond cli.hpp's (each --help lists them all).
const char* const kExitHelp =
    "\nRecording ends with 0 when the channel ends (publisher closed it, file closed cleanly), at\n"
    "--count or --duration; 1 when the disk fails (the file ends at its last complete block) or\n"
    "the publisher evicts the recorder. --info: 0 for any recording, even one not closed (it says\n"
    "where and why it stops). --csv: 1 after writing the valid prefix of a file not closed cleanly\n"
    "or on a corrupt block (without --skip-bad).\n";

void declare(cli::Cli& cli, recorder_app::Options& o, SubscriberConfig& sc) {
  cli.option("file", "the recording: written when recording, read by --info and --csv",
             [&](const std::string& v) { o.file = v; })
      ->type_name("FILE");
  cli.add_config("TOML config file ([subscriber], [rdma], [record]); repeat -c for several");
  cli::add_subscriber_options(cli, sc);
  cli.flag("--info", "print FILE's header, sequence and time ranges, gaps and how it ends", [&] { o.info = true; });
  cli.option("--csv", "export FILE (or its --from/--to range) to this CSV file, in the format tickrail-replay reads",
             [&](const std::string& v) { o.csv = v; })
      ->type_name("OUT");
  cli::add_range_options(cli, o.range);
  cli.flag("--skip-bad", "--csv: skip corrupt blocks (counted) instead of failing", [&] { o.skip_bad = true; });
  cli.flag("--force", "replace an existing output file (the recording, or the --csv file)", [&] { o.force = true; });
  cli.flag("--compress", "compress every block with zstd", [&] { o.rec.writer.zstd = true; });
  cli.option("--zstd-level", "zstd level, 1 (fastest, default) to 19", [&](const std::string& v) {
    o.rec.writer.zstd_level = static_cast<int>(cli::parse_integer(v, "--zstd-level", 1, 19));
  });
  cli.option("--block-ticks", "ticks per block, 1..65536 (default 8192)", [&](const std::string& v) {
    o.rec.block_ticks = static_cast<std::uint32_t>(cli::parse_integer(v, "--block-ticks", 1, 65536));
  });
  cli.option("--cpu", "pin the polling thread to this cpu (-1: do not pin); the writer thread tr-rec runs on the others",
             [&](const std::string& v) { o.cpu = static_cast<int>(cli::parse_integer(v, "--cpu", -1, 4095)); });
  cli.option("--duration", "stop after this many seconds (at most 86400)",
             [&](const std::string& v) { o.duration = cli::parse_seconds(v, "--duration"); });
  cli.option("--count", "stop after this many ticks (0: no limit)",
             [&](const std::string& v) { o.count = cli::parse_unsigned(v, "--count"); });
  cli.option("--json", "write the summary (with --info, the info; with --csv, the export's counts) as JSON to this file",
             [&](const std::string& v) { o.json = v; })
      ->type_name("FILE");
  cli.flag("-q,--quiet", "no progress line", [&] { o.quiet = true; });
  cli.value_names({{"--zstd-level", "N"}, {"--block-ticks", "N"}, {"--cpu", "N"}, {"--duration", "S"},
                   {"--count", "N"}});
}

// An output that exists needs --force (the recording itself: RecordingWriter says so). What is
// not itself a regular file (a device, a FIFO, a link such as /dev/stdout to whatever stdout is)
// is written to, not replaced.
void check_new(const std::string& path, const char* option, bool force) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;
  if (!force && access(path.c_str(), F_OK) == 0) {
    throw Error(Errc::config_error, std::string(option) + ": '" + path + "' exists (--force replaces it)");
  }
}

int info(const cli::Cli& cli, const recorder_app::Options& o) {
  (void)cli;
  const record::Recording r(o.file);
  const recorder_app::Info i = recorder_app::describe(r);
  (void)cli::print(i.text);  // a failure is said by cli.run()
  if (!o.json.empty()) write_text_file(o.json, i.json.dump(2) + "\n");
  return cli::kExitOk;  // a recording that stops early is still a recording: the text says where
}

int csv(const cli::Cli& cli, const recorder_app::Options& o) {
  check_new(o.csv, "--csv", o.force);
  struct stat in {}, out {};
  if (::stat(o.file.c_str(), &in) == 0 && ::stat(o.csv.c_str(), &out) == 0 && in.st_dev == out.st_dev &&
      in.st_ino == out.st_ino) {
    cli::bad_value("--csv", "'" + o.csv + "' is the recording itself");
  }
  std::uint64_t n = 0, bad = 0;
  std::string error;
  try {
    n = recorder_app::export_csv(o, bad);
  } catch (const Error& e) {
    if (e.code() != make_error_code(Errc::parse_error)) throw;
    error = cli::message_of(e);
  }
  const std::string skipped = o.skip_bad ? cli::fmt(", %llu corrupt blocks skipped", static_cast<unsigned long long>(bad)) : "";
  if (!o.json.empty()) {
    const nlohmann::json j = {{"file", o.file}, {"csv", o.csv}, {"exported", n}, {"skipped_blocks", bad}, {"error", error}};
    write_text_file(o.json, j.dump(2) + "\n");
  }
  if (!error.empty()) {
    cli.note("error: " + error);
    cli.note("the CSV holds the ticks before it" + skipped);
    return cli::kExitFailure;
  }
  cli.note(cli::fmt("exported %llu ticks to %s", static_cast<unsigned long long>(n), o.csv.c_str()) + skipped);
  return cli::kExitOk;
}

int record_run(const cli::Cli& cli, const recorder_app::Options& o, const SubscriberConfig& sc) {
  cli::install_stop_signals();
  const bool tty = !o.quiet && isatty(STDERR_FILENO) == 1;
  std::function<void(const recorder_app::RunResult&)> progress;
  if (tty) {
    progress = [](const recorder_app::RunResult& r) {
      std::fprintf(stderr, "\r  recorded %llu ticks  %.3f M ticks/s  %.1f MB  gaps %llu  not kept %llu   ",
                   static_cast<unsigned long long>(r.stats.recorded),
                   r.elapsed_s > 0 ? static_cast<double>(r.stats.received) / r.elapsed_s / 1e6 : 0.0,
                   static_cast<double>(r.stats.bytes) / 1e6, static_cast<unsigned long long>(r.stats.missing),
                   static_cast<unsigned long long>(r.stats.dropped));
    };
  }
  cli.note("recording " + std::string(to_string(sc.transport)) + " channel '" + sc.channel + "' into " + o.file +
           (o.rec.writer.zstd ? " (zstd)" : ""));
  const recorder_app::RunResult r = recorder_app::record_channel(o, sc, &cli::stop_flag(), progress);
  if (tty) std::fprintf(stderr, "\r%100s\r", "");
  const recorder_app::Info s = recorder_app::summary(o, sc, r);
  (void)cli::print(s.text);  // a failure is said by cli.run()
  if (!o.json.empty()) write_text_file(o.json, s.json.dump(2) + "\n");
  if (!r.error.empty()) {
    cli.note("error: " + r.error);
    return cli::kExitFailure;
  }
  if (r.ended == "evicted") {
    cli.note("error: evicted by the publisher: " + r.why);
    return cli::kExitFailure;
  }
  return r.ended == "interrupted" ? cli::kExitInterrupted : cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  cli::Cli cli("tickrail-record",
               "tickrail-record: records a tickrail channel into FILE, every tick as received.\n"
               "  tickrail-record [OPTIONS] FILE             record (ends when the publisher closes the channel)\n"
               "  tickrail-record --info FILE                 header, ranges, gaps, how the file ends\n"
               "  tickrail-record --csv OUT.csv FILE          export (a range of) FILE as CSV\n"
               "tickrail-replay replays FILE. Precedence: defaults < config files, in order < environment <\n"
               "command line." + std::string(kExitHelp));
  recorder_app::Options o;
  SubscriberConfig sc;
  sc.attach_timeout = std::chrono::milliseconds(10'000);  // wait for the publisher to start
  declare(cli, o, sc);
  if (const auto status = cli.parse(argc, argv)) return *status;
  return cli.run([&] {
    cli.resolve([&](const std::string& path) {
      ConfigFile f(path);
      recorder_app::read_file(f, sc, o);
    });
    recorder_app::validate(o);
    if (o.file.empty()) cli::bad_value("FILE", "no recording named (the FILE argument, or [record] output)");
    if (o.info && !o.csv.empty()) cli::bad_value("--info", "and --csv are two commands: give one");
    // Every command's --json is checked before it starts (as --csv's own output is).
    if (!o.json.empty()) cli.check_outputs({{"--json", &o.json}});
    if (o.info) return info(cli, o);
    if (!o.csv.empty()) return csv(cli, o);
    if (!o.range.all()) cli::bad_value("--from-seq", "ranges are for --csv and tickrail-replay, not for recording");
    sc.validate();
    // A recording is the stream as published, in sequence order: no table ticks in it.
    if (sc.policy == SlowConsumerPolicy::conflate) cli::bad_value("--policy", "conflate is not for recording (use block or drop)");
    if (sc.start == StartMode::snapshot) cli::bad_value("start", "snapshot is not for recording (start = live)");
    return record_run(cli, o, sc);
  });
}
