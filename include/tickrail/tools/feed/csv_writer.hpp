// CsvTickWriter: ticks to CSV, in the format CsvTickReader reads back exactly:
//   seq,instrument,kind,side,price,qty,order_ref,exch_ts,aux,aux_qty,flags
// Prices are written with 4 decimals; a quote's aux (its ask price) too. send_ts is not written:
// it is the publisher's stamp, not part of a feed.
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "tickrail/tick.hpp"

namespace tickrail::feed {

class CsvTickWriter {
 public:
  // Creates (truncates) the file and writes the header. Throws Error naming the file.
  explicit CsvTickWriter(const std::string& path);
  ~CsvTickWriter();
  CsvTickWriter(const CsvTickWriter&) = delete;
  CsvTickWriter& operator=(const CsvTickWriter&) = delete;

  void write(const Tick& t);
  void write(std::span<const Tick> ticks) {
    for (const Tick& t : ticks) write(t);
  }
  // Flushes and closes; throws Error if anything failed to reach the file. The destructor closes
  // too, but cannot report.
  void close();

  static constexpr const char* kHeader =
      "seq,instrument,kind,side,price,qty,order_ref,exch_ts,aux,aux_qty,flags";
  // Appends one line (with its '\n') for `t` to `out`.
  static void format(const Tick& t, std::string& out);
  // "318.7500", "-0.0001": fixed point to decimal text.
  static void format_price(std::int64_t p, std::string& out);

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::string line_;
};

}  // namespace tickrail::feed
