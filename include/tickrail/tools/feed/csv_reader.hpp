// CsvTickReader: ticks from a CSV file whose header names Tick fields.
//
// The first non-comment line is the header; its columns, in any order, are among
//   seq, send_ts, exch_ts, instrument, kind, side, price, qty, order_ref, aux, aux_qty, flags
// and must include `kind`. Each later line gives one tick; a missing column or empty field is 0.
//   kind   a name as to_string(TickKind) prints it (add, modify, ..., heartbeat), any case
//   side   buy / sell / none, or B / S, or empty
//   price  decimal text, at most 4 decimals ("318.75", "-0.0001") -> fixed point (kPriceScale)
//   aux    an unsigned integer; for kind quote, the ask price as decimal text like price
//   others unsigned integers in the field's range (flags: 0..32767; bit 15 is tickrail's)
// Lines that are empty or start with '#' are skipped; "\r\n" endings are accepted. Without a seq
// column, tick.seq is the 1-based number of the tick in the file. A bad header always throws
// (Error parse_error, naming file, line and column); a bad line is bad input (tick_source.hpp):
// its error names the file, the line and the column. The file is streamed through a fixed
// buffer (kBufferBytes): an endless input (a pipe) is read in bounded memory, and a line longer
// than kMaxLineBytes is a bad line.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tickrail/tools/feed/tick_source.hpp"

namespace tickrail::feed {

struct CsvReadOptions {
  bool skip_bad = false;
};

class CsvTickReader final : public TickSource {
 public:
  // Opens the file (regular, pipe, FIFO...) and parses its header.
  explicit CsvTickReader(const std::string& path, CsvReadOptions opts = {});
  // Parses CSV text given in memory; `name` stands for the file in errors.
  CsvTickReader(std::string text, std::string name, CsvReadOptions opts);
  ~CsvTickReader() override;

  static constexpr std::size_t kBufferBytes = 1 << 20;
  static constexpr std::size_t kMaxLineBytes = 1 << 16;

  [[nodiscard]] std::size_t read(std::span<Tick> out) override;
  [[nodiscard]] bool at_end() const noexcept override;
  [[nodiscard]] Progress progress() const noexcept override;
  [[nodiscard]] const ErrorCounts& errors() const noexcept override { return errors_; }
  [[nodiscard]] const std::string& first_error() const noexcept override { return first_error_; }
  [[nodiscard]] std::string name() const override { return "CSV file '" + name_ + "'"; }

  [[nodiscard]] std::uint64_t line() const noexcept { return line_; }  // last line read, 1-based

  enum class Field : std::uint8_t {
    seq, send_ts, exch_ts, instrument, kind, side, price, qty, order_ref, aux, aux_qty, flags
  };
  static constexpr std::size_t kMaxColumns = 12;

 private:
  enum class Next : std::uint8_t { line, too_long, again, end };
  // The next line (without its '\n'), too_long (longer than kMaxLineBytes: skipped), again (a
  // buffer of an overlong line skipped: call again), or end of input.
  Next next_line(std::string_view& line);
  void fill();  // reads more input after the unread bytes
  void parse_header();
  // Parses one line into `t`; on failure returns false with `error` describing it.
  bool parse_line(std::string_view line, Tick& t, std::string& error) const;

  CsvReadOptions opts_;
  std::string name_;
  int fd_ = -1;           // the file; -1 for text given in memory
  std::string buf_;       // input window: [pos_, end_) not yet read
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::uint64_t base_ = 0;  // input offset of buf_[0]
  std::uint64_t size_ = 0;  // input size (0: unknown, a pipe)
  bool eof_ = false;
  bool skipping_ = false;   // inside a line too long to hold
  std::string read_error_;
  std::uint64_t line_ = 0;
  std::array<Field, kMaxColumns> columns_{};
  std::size_t ncolumns_ = 0;
  bool has_seq_ = false;
  std::uint64_t seq_ = 0;
  ErrorCounts errors_;
  std::string first_error_;
  std::string scratch_;  // error text of the line being parsed (reserved: no allocation per line)
  bool failed_ = false;
  std::string pending_;
};

}  // namespace tickrail::feed
