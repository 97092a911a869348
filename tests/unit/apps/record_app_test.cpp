// tickrail-record's pieces: every shipped config loads as it reads them, [record] errors name
// their key, exchange times parse, and --info describes a file that stops early.
#include <catch2/catch.hpp>

#include <filesystem>

#include "../feed/feed_test_util.hpp"
#include "cli.hpp"
#include "../../../apps/record/record.hpp"
#include "../../source_root.hpp"
#include "tickrail/error.hpp"

using namespace tickrail;

TEST_CASE("everyShippedConfigLoadsAsTheRecordReadsIt", "[record]") {
  const std::filesystem::path dir = source_tree::root() / "configs";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".toml") continue;
    INFO(e.path());
    ConfigFile f(e.path().string());
    SubscriberConfig sc;
    recorder_app::Options o;
    recorder_app::read_file(f, sc, o);
    ++files;
  }
  CHECK(files >= 6);
  ConfigFile r((dir / "record.toml").string());
  SubscriberConfig sc;
  read_subscriber_config(r, sc);
  CHECK(sc.policy == SlowConsumerPolicy::block);
}

TEST_CASE("recordOptionsNameTheBadKey", "[record]") {
  ConfigFile f(std::string_view("[record]\nblock_ticks = 0\n"), "r.toml");
  recorder_app::Options o;
  CHECK_THROWS_WITH(recorder_app::read_options(f.section("record"), o), Catch::Contains("r.toml:2:1: record.block_ticks"));
  ConfigFile g(std::string_view("[record]\nzstd_level = 30\n"), "z.toml");
  recorder_app::Options fresh;
  CHECK_THROWS_WITH(recorder_app::read_options(g.section("record"), fresh), Catch::Contains("record.zstd_level"));
}

TEST_CASE("exchangeTimesParseAsNanosecondsOrTimeOfDay", "[record]") {
  CHECK(cli::parse_exchange_time("34200000000000", "--from-time") == 34'200'000'000'000);
  CHECK(cli::parse_exchange_time("09:30:00", "--from-time") == 34'200'000'000'000);
  CHECK(cli::parse_exchange_time("09:30:00.5", "--from-time") == 34'200'500'000'000);
  CHECK(cli::parse_exchange_time("09:30:00.000000001", "--to-time") == 34'200'000'000'001);
  CHECK_THROWS_WITH(cli::parse_exchange_time("25:00:00", "--to-time"), Catch::Contains("--to-time"));
  CHECK_THROWS_WITH(cli::parse_exchange_time("09:30:00.", "--to-time"), Catch::Contains("fraction"));
  CHECK_THROWS_WITH(cli::parse_exchange_time("09:30:00x", "--to-time"), Catch::Contains("not a time"));
  CHECK_THROWS_WITH(cli::parse_exchange_time("soon", "--to-time"), Catch::Contains("--to-time"));
}

TEST_CASE("infoOfAFileThatStopsEarlySaysWhereAndWhy", "[record]") {
  feed::test::TempFile f(".rec");
  {
    record::RecordingMeta m;
    m.channel = "info";
    record::RecordingWriter w(f.path(), m, record::WriterOptions{.force = true});
    Tick t{};
    for (std::uint64_t s : {1, 2, 5}) {
      t.seq = s;
      w.append(std::span<const Tick>(&t, 1), 0);
    }
    // no close(): as after kill -9
  }
  const record::Recording r(f.path());
  const recorder_app::Info i = recorder_app::describe(r);
  CHECK(i.text.find("NOT closed cleanly") != std::string::npos);
  CHECK(i.text.find("gaps the recorder saw: 1 (2 sequence numbers missing)") != std::string::npos);
  CHECK(i.json["clean"] == false);
  CHECK(i.json["ticks"] == 3);
  CHECK(i.json["last_seq"] == 5);
}
