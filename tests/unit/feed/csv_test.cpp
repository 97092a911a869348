#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "feed_test_util.hpp"
#include "tickrail/error.hpp"
#include "tickrail/tools/feed/csv_reader.hpp"
#include "tickrail/tools/feed/csv_writer.hpp"

using namespace tickrail;
using namespace tickrail::feed;

namespace {

std::vector<Tick> read_all(TickSource& src) {
  std::vector<Tick> all;
  std::vector<Tick> buf(3);
  for (;;) {
    const std::size_t n = src.read(buf);
    if (n == 0 && src.at_end()) return all;
    all.insert(all.end(), buf.begin(), buf.begin() + static_cast<long>(n));
  }
}

std::string error_of(const std::string& text, CsvReadOptions opts = {}) {
  try {
    CsvTickReader r(text, "t.csv", opts);
    read_all(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("csvRoundTripsEveryKindThroughAFile") {
  std::vector<Tick> in(10);
  for (std::size_t i = 0; i < in.size(); ++i) {
    Tick& t = in[i];
    t.seq = 100 + i;
    t.instrument = static_cast<std::uint32_t>(i * 7);
    t.kind = static_cast<TickKind>(i);
    t.side = i % 3 == 0 ? Side::None : i % 3 == 1 ? Side::Buy : Side::Sell;
    t.price = static_cast<std::int64_t>(i * 123'457) - 300'000;
    t.qty = 0xffffffffu - static_cast<std::uint32_t>(i);
    t.order_ref = 0xfffffffffffffff0ull + i;
    t.exch_ts = 34'200'000'000'000ull + i;
    t.aux = t.kind == TickKind::Quote ? 3'187'600 : 77 + i;
    t.aux_qty = static_cast<std::uint32_t>(i);
    t.flags = static_cast<std::uint16_t>('A' | (i << 8));
  }
  in[3].price = -1;  // "-0.0001"
  test::TempFile f(".csv");
  {
    CsvTickWriter w(f.path());
    w.write(in);
    w.close();
    REQUIRE_THROWS_AS(w.write(in[0]), Error);
  }
  CsvTickReader r(f.path());
  const auto out = read_all(r);
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    INFO("tick " << i);
    REQUIRE(std::memcmp(&out[i], &in[i], sizeof(Tick)) == 0);
  }
  REQUIRE(r.errors().total() == 0);
  REQUIRE(r.progress().done == r.progress().total);
}

TEST_CASE("csvFormatsPricesWithFourDecimals") {
  std::string s;
  CsvTickWriter::format_price(3'187'500, s);
  s += ' ';
  CsvTickWriter::format_price(-1, s);
  s += ' ';
  CsvTickWriter::format_price(0, s);
  REQUIRE(s == "318.7500 -0.0001 0.0000");
}

TEST_CASE("csvReadsColumnsInAnyOrderWithCommentsBlankLinesAndCrlf") {
  const std::string text =
      "# a comment before the header\r\n"
      "Kind, price ,instrument\r\n"
      "\r\n"
      "add,318.75,7\r\n"
      "# a comment\n"
      "QUOTE,1,7\n"
      "delete,,8";
  CsvTickReader r(text, "t.csv", {});
  const auto t = read_all(r);
  REQUIRE(t.size() == 3);
  REQUIRE(t[0].kind == TickKind::Add);
  REQUIRE(t[0].price == 3'187'500);
  REQUIRE(t[0].instrument == 7);
  REQUIRE(t[0].seq == 1);
  REQUIRE(t[1].kind == TickKind::Quote);
  REQUIRE(t[1].price == 10'000);
  REQUIRE(t[2].kind == TickKind::Delete);
  REQUIRE(t[2].price == 0);
  REQUIRE(t[2].seq == 3);
  REQUIRE(r.line() == 7);
}

TEST_CASE("csvPricesReachTheInt64LimitsExactly") {
  const std::string text =
      "kind,price\n"
      "add,922337203685477.5807\n"
      "add,-922337203685477.5808\n"
      "add,+0.5\n";
  CsvTickReader r(text, "t.csv", {});
  const auto t = read_all(r);
  REQUIRE(t.size() == 3);
  REQUIRE(t[0].price == std::numeric_limits<std::int64_t>::max());
  REQUIRE(t[1].price == std::numeric_limits<std::int64_t>::min());
  REQUIRE(t[2].price == 5'000);
  // The writer prints both limits back as the reader takes them.
  std::string s;
  CsvTickWriter::format_price(std::numeric_limits<std::int64_t>::min(), s);
  REQUIRE(s == "-922337203685477.5808");
  for (const char* bad : {"922337203685477.5808", "-922337203685477.5809", "922337203685478",
                          "99999999999999999999999"}) {
    INFO(bad);
    REQUIRE(error_of(std::string("kind,price\nadd,") + bad + "\n").find("is out of range") !=
            std::string::npos);
  }
}

TEST_CASE("csvHeaderErrorsNameLineAndColumn") {
  REQUIRE(error_of("# only\n\n").find("t.csv': no header line") != std::string::npos);
  REQUIRE(error_of("\nkind,pricee\n").find("line 2, column 2: unknown column 'pricee'") !=
          std::string::npos);
  REQUIRE(error_of("kind,qty,qty\n").find("line 1, column 3: column 'qty' appears twice") !=
          std::string::npos);
  REQUIRE(error_of("qty,price\n").find("line 1: the header has no 'kind' column") !=
          std::string::npos);
  REQUIRE_THROWS_AS(CsvTickReader("qty\n", "t.csv", {.skip_bad = true}), Error);  // always fatal
}

TEST_CASE("csvLineErrorsNameLineAndColumn") {
  const std::string head = "instrument,kind,side,price,qty\n";
  CHECK(error_of(head + "1,add,buy,1.5,10\n1,add,buy,12.34567,10\n")
            .find("t.csv': line 3, column 4 (price): '12.34567' has more than 4 decimals") !=
        std::string::npos);
  CHECK(error_of(head + "1,add,buy,1.5,ten\n")
            .find("line 2, column 5 (qty): 'ten' is not an unsigned 32-bit integer") !=
        std::string::npos);
  CHECK(error_of(head + "1,add,buy,1.5,4294967296\n").find("line 2, column 5 (qty)") !=
        std::string::npos);
  CHECK(error_of(head + "1,add,buy,1.5\n").find("line 2, 4 fields, the header has 5") !=
        std::string::npos);
  CHECK(error_of(head + "1,adds,buy,1.5,1\n").find("line 2, column 2 (kind): 'adds' is not a tick kind") !=
        std::string::npos);
  CHECK(error_of(head + "1,add,up,1.5,1\n").find("line 2, column 3 (side): 'up' is not a side") !=
        std::string::npos);
  CHECK(error_of(head + "1,add,buy,1.2.3,1\n").find("column 4 (price): '1.2.3' is not a decimal") !=
        std::string::npos);
  CHECK(error_of(head + "1,add,buy,.,1\n").find("column 4 (price): '.' is not a decimal") !=
        std::string::npos);
  CHECK(error_of(head + "1,add,buy,99999999999999999,1\n").find("column 4 (price): '99999999999999999' is out of range") !=
        std::string::npos);
  CHECK(error_of("kind,aux\nquote,abc\n").find("line 2, column 2 (aux): 'abc' is not a decimal") !=
        std::string::npos);
  CHECK(error_of("kind,aux\nadd,1.5\n").find("line 2, column 2 (aux): '1.5' is not an unsigned") !=
        std::string::npos);
}

TEST_CASE("csvDeliversGoodLinesBeforeTheErrorAndSkipBadCounts") {
  const std::string text = "kind,qty\nadd,1\nadd,x\nadd,3\ncancel,\nbogus,1\n";
  CsvTickReader r(text, "t.csv", {});
  std::vector<Tick> buf(10);
  REQUIRE(r.read(buf) == 1);
  REQUIRE_THROWS_WITH(r.read(buf), Catch::Contains("line 3, column 2 (qty)"));
  REQUIRE_THROWS_AS(r.read(buf), Error);

  CsvTickReader s(text, "t.csv", {.skip_bad = true});
  const auto t = read_all(s);
  REQUIRE(t.size() == 3);
  REQUIRE(t[1].qty == 3);
  REQUIRE(t[1].seq == 2);
  REQUIRE(s.errors().bad_line == 2);
  REQUIRE(s.first_error().find("line 3, column 2 (qty)") == 0);
}

TEST_CASE("csvNamesAMissingFile") {
  REQUIRE_THROWS_WITH(CsvTickReader("/nonexistent/ticks.csv"),
                      Catch::Contains("/nonexistent/ticks.csv"));
}

TEST_CASE("csvStreamsAFileLargerThanItsBufferTickByTick") {
  std::string text = "seq,kind,qty\n";
  constexpr std::uint64_t kLines = 200'000;  // about 2.8 MiB: several buffer refills
  for (std::uint64_t i = 1; i <= kLines; ++i) text += std::to_string(i) + ",add," + std::to_string(i % 1000) + "\n";
  REQUIRE(text.size() > 2 * CsvTickReader::kBufferBytes);
  test::TempFile f(".csv");
  f.write(text);
  CsvTickReader r(f.path());
  const auto all = read_all(r);
  REQUIRE(all.size() == kLines);
  bool in_order = true;
  for (std::uint64_t i = 0; i < kLines; ++i) {
    in_order = in_order && all[i].seq == i + 1 && all[i].qty == (i + 1) % 1000;
  }
  CHECK(in_order);
  CHECK(r.progress().done == text.size());
  CHECK(r.progress().total == text.size());
}

TEST_CASE("csvLineWithoutAnEndIsABadLineNotAMemoryHog") {
  const std::string head = "kind,qty\nadd,1\n";
  const std::string tail = "\nadd,3\n";
  const std::string text = head + std::string(CsvTickReader::kMaxLineBytes * 3, 'x') + tail;
  test::TempFile f(".csv");
  f.write(text);
  {
    CsvTickReader r(f.path());
    std::vector<Tick> buf(8);
    REQUIRE(r.read(buf) == 1);
    REQUIRE_THROWS_WITH(r.read(buf), Catch::Contains("line 3, no end of line within 65536 bytes"));
  }
  CsvTickReader r(f.path(), CsvReadOptions{.skip_bad = true});
  const auto all = read_all(r);
  REQUIRE(all.size() == 2);
  CHECK(all[1].qty == 3);
  CHECK(r.errors().bad_line == 1);
  // A file that is no CSV at all (no end of line in its first line) fails at its header.
  test::TempFile junk(".csv");
  junk.write(std::string(CsvTickReader::kMaxLineBytes + 10, '\0'));
  CHECK_THROWS_WITH(CsvTickReader(junk.path()), Catch::Contains("line 1: no end of line within 65536 bytes"));
}

TEST_CASE("csvErrorsEscapeControlBytesOfTheInput") {
  // An escape sequence or a binary file read as CSV: its bytes must not reach the terminal raw.
  REQUIRE_THROWS_WITH(CsvTickReader(std::string("kind,\x1b[2Jqty\x07\n"), "t.csv", {}),
                      Catch::Contains("'\\x1b[2Jqty\\x07'") && !Catch::Contains("\x1b"));
  const std::string text = std::string("kind,qty\nadd,1\x01\xff\n");
  CsvTickReader r(text, "t.csv", {});
  std::vector<Tick> buf(4);
  REQUIRE_THROWS_WITH(r.read(buf), Catch::Contains("'1\\x01\\xff'") && !Catch::Contains("\x01"));
}
