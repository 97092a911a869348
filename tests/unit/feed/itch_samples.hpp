// Test data: one message of every ITCH 5.0 type, with known field values, written through
// ItchWriter's builder field by field as the specification's tables list them.
#pragma once

#include <cstdint>

#include "tickrail/tools/feed/itch_writer.hpp"

namespace tickrail::feed::test {

inline constexpr std::uint16_t kLocate = 7;
inline constexpr std::uint64_t kTs = 34'200'000'000'123ull;  // 09:30:00.000000123

// Writes one message of each of the 23 types, in the order of itch::kAllTypes.
inline void write_every_type(ItchWriter& w) {
  w.system_event(kTs, 'O');
  w.stock_directory(kLocate, kTs, "AAPL", 100, 'Q');
  w.begin('H', kLocate, kTs).str("AAPL", 8).ch('T').ch(' ').str("    ", 4).end();
  w.begin('Y', kLocate, kTs).str("AAPL", 8).ch('1').end();
  w.begin('L', kLocate, kTs).str("NSDQ", 4).str("AAPL", 8).ch('Y').ch('N').ch('A').end();
  w.begin('V', 0, kTs)
      .u64(3'000'123'456'789ull).u64(2'800'000'000'000ull).u64(2'600'000'000'000ull).end();
  w.begin('W', 0, kTs).ch('1').end();
  w.begin('K', kLocate, kTs).str("AAPL", 8).u32(34'200).ch('A').price4(250'000).end();
  w.begin('J', kLocate, kTs).str("AAPL", 8).price4(3'000'000).price4(3'300'000).price4(2'700'000)
      .u32(2).end();
  w.begin('h', kLocate, kTs).str("AAPL", 8).ch('Q').ch('H').end();
  w.add_order(kLocate, kTs, 1001, Side::Buy, 300, "AAPL", 3'187'500);
  w.add_order_mpid(kLocate, kTs, 1002, Side::Sell, 200, "AAPL", 3'188'000, "GSCO");
  w.order_executed(kLocate, kTs, 1001, 100, 5001);
  w.order_executed_price(kLocate, kTs, 1001, 50, 5002, 'N', 3'187'400);
  w.order_cancel(kLocate, kTs, 1001, 25);
  w.order_delete(kLocate, kTs, 1002);
  w.order_replace(kLocate, kTs, 1001, 1003, 400, 3'187'600);
  w.trade(kLocate, kTs, Side::Buy, 75, "AAPL", 3'187'700, 5003);
  w.cross_trade(kLocate, kTs, 5'000'000'000ull, "AAPL", 3'187'800, 5004, 'O');
  w.begin('B', kLocate, kTs).u64(5003).end();
  w.begin('I', kLocate, kTs).u64(1000).u64(200).ch('S').str("AAPL", 8).price4(3'180'000)
      .price4(3'185'000).price4(3'187'500).ch('O').ch('L').end();
  w.begin('N', kLocate, kTs).str("AAPL", 8).ch('A').end();
  w.begin('O', kLocate, kTs).str("AAPL", 8).ch('Y').price4(100'000).price4(900'000)
      .price4(500'000).u64(kTs - 1).price4(450'000).price4(550'000).end();
}

}  // namespace tickrail::feed::test
