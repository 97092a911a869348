#include "tickrail/tools/feed/csv_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>

#include "tickrail/error.hpp"

namespace tickrail::feed {
namespace {

using Field = CsvTickReader::Field;

constexpr std::pair<std::string_view, Field> kNames[] = {
    {"seq", Field::seq},       {"send_ts", Field::send_ts},     {"exch_ts", Field::exch_ts},
    {"instrument", Field::instrument}, {"kind", Field::kind},   {"side", Field::side},
    {"price", Field::price},   {"qty", Field::qty},             {"order_ref", Field::order_ref},
    {"aux", Field::aux},       {"aux_qty", Field::aux_qty},     {"flags", Field::flags}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Next field of a line: splits at ',' and advances `rest`.
std::string_view next_field(std::string_view& rest, bool& more) {
  const std::size_t comma = rest.find(',');
  std::string_view f = rest.substr(0, comma);
  more = comma != std::string_view::npos;
  rest = more ? rest.substr(comma + 1) : std::string_view();
  return trim(f);
}

bool parse_uint(std::string_view s, std::uint64_t max, std::uint64_t& out) {
  if (s.empty()) {
    out = 0;
    return true;
  }
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > max) return false;
  out = v;
  return true;
}

// Decimal text -> fixed point with 4 decimals. `why` says what is wrong when it fails.
bool parse_price(std::string_view s, std::int64_t& out, const char*& why) {
  out = 0;
  if (s.empty()) return true;
  bool neg = false;
  if (s.front() == '-' || s.front() == '+') {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  const std::size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  if (whole.empty() && frac.empty()) {
    why = "is not a decimal number";
    return false;
  }
  if (frac.size() > 4) {
    why = "has more than 4 decimals";
    return false;
  }
  // The magnitude in kPriceScale units, at most 2^63 - 1 (2^63 when negative: INT64_MIN).
  std::uint64_t mag = 0;
  const std::uint64_t limit = neg ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
  for (char c : whole) {
    if (c < '0' || c > '9') {
      why = "is not a decimal number";
      return false;
    }
    if (__builtin_mul_overflow(mag, 10u, &mag) ||
        __builtin_add_overflow(mag, static_cast<unsigned>(c - '0'), &mag) || mag > limit) {
      why = "is out of range";
      return false;
    }
  }
  std::uint64_t f = 0;
  for (char c : frac) {
    if (c < '0' || c > '9') {
      why = "is not a decimal number";
      return false;
    }
    f = f * 10 + static_cast<unsigned>(c - '0');
  }
  for (std::size_t i = frac.size(); i < 4; ++i) f *= 10;
  if (__builtin_mul_overflow(mag, static_cast<std::uint64_t>(kPriceScale), &mag) ||
      __builtin_add_overflow(mag, f, &mag) || mag > limit) {
    why = "is out of range";
    return false;
  }
  // Two's complement wrap (defined since C++20) turns 2^63 into INT64_MIN.
  out = static_cast<std::int64_t>(neg ? 0 - mag : mag);
  return true;
}

bool parse_kind(std::string_view s, TickKind& k) {
  for (int i = 0; i <= static_cast<int>(TickKind::Heartbeat); ++i) {
    const auto kind = static_cast<TickKind>(i);
    if (iequals(s, to_string(kind))) {
      k = kind;
      return true;
    }
  }
  return false;
}

bool parse_side(std::string_view s, Side& side) {
  if (s.empty() || iequals(s, "none")) {
    side = Side::None;
  } else if (iequals(s, "buy") || s == "B" || s == "b") {
    side = Side::Buy;
  } else if (iequals(s, "sell") || s == "S" || s == "s") {
    side = Side::Sell;
  } else {
    return false;
  }
  return true;
}

// The field as the message shows it: control bytes (a binary file read as CSV, an escape
// sequence) and bytes above 0x7e as \xNN, so that the message cannot drive the terminal.
std::string quoted(std::string_view s) {
  constexpr std::size_t kShown = 40;
  std::string q = "'";
  for (const char c : s.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      q += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      q += hex;
    }
  }
  if (s.size() > kShown) q += "...";
  return q + "'";
}

}  // namespace

CsvTickReader::CsvTickReader(const std::string& path, CsvReadOptions opts)
    : opts_(opts), name_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw_errno(errno, "open CSV file '" + path + "'");
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = static_cast<std::uint64_t>(st.st_size);
  buf_.resize(kBufferBytes);
  try {
    parse_header();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

CsvTickReader::CsvTickReader(std::string text, std::string name, CsvReadOptions opts)
    : opts_(opts), name_(std::move(name)), buf_(std::move(text)) {
  end_ = buf_.size();
  size_ = buf_.size();
  eof_ = true;
  parse_header();
}

CsvTickReader::~CsvTickReader() {
  if (fd_ >= 0) ::close(fd_);
}

void CsvTickReader::fill() {
  // Keep the unread part, then read after it: a line is never longer than the buffer.
  std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
  base_ += pos_;
  end_ -= pos_;
  pos_ = 0;
  for (;;) {
    const ssize_t got = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
    if (got > 0) {
      end_ += static_cast<std::size_t>(got);
      return;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      read_error_ = std::string("read error after byte offset ") + std::to_string(base_ + end_) +
                    ": " + std::strerror(errno);
    }
    eof_ = true;
    return;
  }
}

CsvTickReader::Next CsvTickReader::next_line(std::string_view& line) {
  for (;;) {
    const char* b = buf_.data();
    const void* nl = std::memchr(b + pos_, '\n', end_ - pos_);
    if (skipping_) {  // the rest of a line too long to hold
      if (nl != nullptr) {
        pos_ = static_cast<std::size_t>(static_cast<const char*>(nl) - b) + 1;
        skipping_ = false;
        continue;
      }
      pos_ = end_;
      if (eof_) {
        skipping_ = false;
        return Next::end;
      }
      fill();
      return Next::again;  // one buffer per call: the caller bounds its work
    }
    if (nl != nullptr || eof_) {
      if (nl == nullptr && pos_ == end_) return Next::end;
      const std::size_t e = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - b) : end_;
      line = std::string_view(b + pos_, e - pos_);
      pos_ = nl != nullptr ? e + 1 : e;
      return line.size() > kMaxLineBytes ? Next::too_long : Next::line;
    }
    if (end_ - pos_ > kMaxLineBytes) {
      skipping_ = true;
      return Next::too_long;
    }
    fill();
  }
}

void CsvTickReader::parse_header() {
  scratch_.reserve(256);
  std::string_view line;
  for (;;) {
    const Next r = next_line(line);
    if (r == Next::end) break;
    ++line_;
    if (r == Next::too_long) {
      throw Error(Errc::parse_error, name() + ": line " + std::to_string(line_) +
                                         ": no end of line within " +
                                         std::to_string(kMaxLineBytes) + " bytes (not CSV text?)");
    }
    if (r != Next::line) continue;
    line = trim(line);
    if (!line.empty() && line.front() != '#') break;
    line = {};
  }
  if (!read_error_.empty()) throw Error(Errc::parse_error, name() + ": " + read_error_);
  const std::string where = name() + ": line " + std::to_string(line_);
  if (line.empty()) throw Error(Errc::parse_error, name() + ": no header line");
  bool more = true;
  bool seen[kMaxColumns] = {};
  for (std::size_t col = 1; more; ++col) {
    const std::string_view f = next_field(line, more);
    bool found = false;
    for (const auto& [n, field] : kNames) {
      if (!iequals(f, n)) continue;
      const auto idx = static_cast<std::size_t>(field);
      if (seen[idx]) {
        throw Error(Errc::parse_error, where + ", column " + std::to_string(col) +
                                           ": column " + quoted(f) + " appears twice");
      }
      seen[idx] = true;
      columns_[ncolumns_++] = field;
      found = true;
    }
    if (!found) {
      throw Error(Errc::parse_error,
                  where + ", column " + std::to_string(col) + ": unknown column " + quoted(f) +
                      " (expected seq, send_ts, exch_ts, instrument, kind, side, price, qty, "
                      "order_ref, aux, aux_qty, flags)");
    }
  }
  if (!seen[static_cast<std::size_t>(Field::kind)]) {
    throw Error(Errc::parse_error, where + ": the header has no 'kind' column");
  }
  has_seq_ = seen[static_cast<std::size_t>(Field::seq)];
}

bool CsvTickReader::parse_line(std::string_view line, Tick& t, std::string& error) const {
  t = Tick{};
  std::string_view fields[kMaxColumns];
  std::size_t n = 0;
  bool more = true;
  while (more) {
    const std::string_view f = next_field(line, more);
    if (n < kMaxColumns) fields[n] = f;
    ++n;
  }
  if (n != ncolumns_) {
    error = std::to_string(n) + " fields, the header has " + std::to_string(ncolumns_);
    return false;
  }
  auto bad = [&](std::size_t col, std::string_view what) {
    error = "column " + std::to_string(col + 1) + " (" + std::string(kNames[static_cast<std::size_t>(columns_[col])].first) +
            "): " + quoted(fields[col]) + " " + std::string(what);
    return false;
  };
  std::string_view aux_text;
  std::size_t aux_col = 0;
  constexpr std::uint64_t k64 = std::numeric_limits<std::uint64_t>::max();
  constexpr std::uint64_t k32 = std::numeric_limits<std::uint32_t>::max();
  for (std::size_t c = 0; c < ncolumns_; ++c) {
    const std::string_view f = fields[c];
    std::uint64_t v = 0;
    switch (columns_[c]) {
      case Field::seq:
        if (!parse_uint(f, k64, t.seq)) return bad(c, "is not an unsigned 64-bit integer");
        break;
      case Field::send_ts:
        if (!parse_uint(f, k64, t.send_ts)) return bad(c, "is not an unsigned 64-bit integer");
        break;
      case Field::exch_ts:
        if (!parse_uint(f, k64, t.exch_ts)) return bad(c, "is not an unsigned 64-bit integer");
        break;
      case Field::order_ref:
        if (!parse_uint(f, k64, t.order_ref)) return bad(c, "is not an unsigned 64-bit integer");
        break;
      case Field::instrument:
        if (!parse_uint(f, k32, v)) return bad(c, "is not an unsigned 32-bit integer");
        t.instrument = static_cast<std::uint32_t>(v);
        break;
      case Field::qty:
        if (!parse_uint(f, k32, v)) return bad(c, "is not an unsigned 32-bit integer");
        t.qty = static_cast<std::uint32_t>(v);
        break;
      case Field::aux_qty:
        if (!parse_uint(f, k32, v)) return bad(c, "is not an unsigned 32-bit integer");
        t.aux_qty = static_cast<std::uint32_t>(v);
        break;
      case Field::flags:
        if (!parse_uint(f, 0x7fff, v)) return bad(c, "is not an integer in 0..32767 (bit 15 is tickrail's: kTickFromTable)");
        t.flags = static_cast<std::uint16_t>(v);
        break;
      case Field::kind:
        if (f.empty() || !parse_kind(f, t.kind)) return bad(c, "is not a tick kind (add, modify, cancel, delete, execute, trade, quote, status, heartbeat)");
        break;
      case Field::side:
        if (!parse_side(f, t.side)) return bad(c, "is not a side (buy, sell, none)");
        break;
      case Field::price: {
        const char* why = "";
        if (!parse_price(f, t.price, why)) return bad(c, why);
        break;
      }
      case Field::aux:
        aux_text = f;  // its meaning depends on the kind, which may come later in the line
        aux_col = c;
        break;
    }
  }
  if (!aux_text.empty()) {
    if (t.kind == TickKind::Quote) {
      const char* why = "";
      std::int64_t ask = 0;
      if (!parse_price(aux_text, ask, why)) return bad(aux_col, why);
      t.set_ask_price(ask);
    } else if (!parse_uint(aux_text, k64, t.aux)) {
      return bad(aux_col, "is not an unsigned 64-bit integer");
    }
  }
  return true;
}

std::size_t CsvTickReader::read(std::span<Tick> out) {
  if (failed_) throw Error(Errc::parse_error, pending_);
  std::size_t n = 0;
  const std::uint64_t from = base_ + pos_;
  // Bounded work per call: at most about kBufferBytes of input, whatever it holds.
  while (n < out.size() && base_ + pos_ - from < kBufferBytes) {
    std::string_view line;
    const Next r = next_line(line);
    if (r == Next::end || r == Next::again) break;
    ++line_;
    if (r == Next::line) {
      line = trim(line);
      if (line.empty() || line.front() == '#') continue;
      if (parse_line(line, out[n], scratch_)) {
        if (!has_seq_) out[n].seq = seq_ + 1;
        ++seq_;
        ++n;
        continue;
      }
    } else {
      scratch_ = "no end of line within " + std::to_string(kMaxLineBytes) + " bytes";
    }
    ++errors_.bad_line;
    const std::string what = "line " + std::to_string(line_) + ", " + scratch_;
    if (first_error_.empty()) first_error_ = what;
    if (!opts_.skip_bad) {
      failed_ = true;
      pending_ = name() + ": " + what;
      break;
    }
  }
  if (!failed_ && !read_error_.empty() && eof_ && pos_ == end_) {
    ++errors_.truncated;
    if (first_error_.empty()) first_error_ = read_error_;
    failed_ = true;
    pending_ = name() + ": " + read_error_;
  }
  if (n == 0 && failed_) throw Error(Errc::parse_error, pending_);
  return n;
}

bool CsvTickReader::at_end() const noexcept {
  return !failed_ && eof_ && pos_ == end_ && !skipping_ && read_error_.empty();
}

Progress CsvTickReader::progress() const noexcept { return {base_ + pos_, size_}; }

}  // namespace tickrail::feed
