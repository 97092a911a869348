#include <catch2/catch.hpp>

#include <vector>

#include "feed_test_util.hpp"
#include "net_frames.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/csv_reader.hpp"
#include "tickrail/tools/feed/itch_file.hpp"
#include "tickrail/tools/feed/open_source.hpp"
#include "tickrail/tools/feed/pcap_reader.hpp"

using namespace tickrail;
using namespace tickrail::feed;

TEST_CASE("openSourcePicksTheReaderByContentAndName") {
  ItchWriter w;
  w.order_delete(1, 1, 1);
  test::TempFile itch(".bin");
  itch.write(w.span());
  test::TempFile pcap(".dat");
  test::write_pcap(pcap.path(), {test::frame(test::mold_packet("S", 1, w))});
  test::TempFile ng(".dat");
  ng.write(test::pcapng({test::frame(test::mold_packet("S", 1, w))}));
  test::TempFile csv(".csv");
  csv.write(std::string("kind\ndelete\n"));

  REQUIRE(detect_format(itch.path()) == InputFormat::itch);
  REQUIRE(detect_format(pcap.path()) == InputFormat::pcap);
  REQUIRE(detect_format(ng.path()) == InputFormat::pcap);
  REQUIRE(detect_format(csv.path()) == InputFormat::csv);
  REQUIRE_THROWS_AS(detect_format("/nonexistent/x"), Error);

  std::vector<Tick> buf(4);
  for (const auto* f : {&itch, &pcap, &ng, &csv}) {
    auto src = open_source(f->path());
    REQUIRE(src->read(buf) == 1);
    REQUIRE(buf[0].kind == TickKind::Delete);
  }
  REQUIRE(dynamic_cast<PcapMoldReader*>(open_source(ng.path()).get()) != nullptr);
  REQUIRE(dynamic_cast<CsvTickReader*>(open_source(csv.path()).get()) != nullptr);
  // A forced format wins over detection.
  REQUIRE_THROWS_AS(open_source(csv.path(), SourceOptions{.format = InputFormat::pcap}), Error);
  auto forced = open_source(itch.path(), SourceOptions{.format = InputFormat::itch});
  REQUIRE(dynamic_cast<ItchFileReader*>(forced.get()) != nullptr);
}
