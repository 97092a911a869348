#include "tickrail/tools/feed/csv_writer.hpp"

#include <cerrno>
#include <charconv>

#include "tickrail/error.hpp"

namespace tickrail::feed {
namespace {

template <typename T>
void put(std::string& out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

const char* side_name(Side s) {
  switch (s) {
    case Side::Buy: return "buy";
    case Side::Sell: return "sell";
    default: return "";
  }
}

}  // namespace

void CsvTickWriter::format_price(std::int64_t p, std::string& out) {
  std::uint64_t mag = p < 0 ? 0 - static_cast<std::uint64_t>(p) : static_cast<std::uint64_t>(p);
  if (p < 0) out += '-';
  constexpr auto kScale = static_cast<std::uint64_t>(kPriceScale);
  put(out, mag / kScale);
  out += '.';
  const std::uint64_t frac = mag % kScale;
  char digits[4];
  std::uint64_t f = frac;
  for (int i = 3; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + f % 10);
    f /= 10;
  }
  out.append(digits, 4);
}

void CsvTickWriter::format(const Tick& t, std::string& out) {
  put(out, t.seq);
  out += ',';
  put(out, t.instrument);
  out += ',';
  out += to_string(t.kind);
  out += ',';
  out += side_name(t.side);
  out += ',';
  format_price(t.price, out);
  out += ',';
  put(out, t.qty);
  out += ',';
  put(out, t.order_ref);
  out += ',';
  put(out, t.exch_ts);
  out += ',';
  if (t.kind == TickKind::Quote) {
    format_price(t.ask_price(), out);
  } else {
    put(out, t.aux);
  }
  out += ',';
  put(out, t.aux_qty);
  out += ',';
  put(out, t.flags);
  out += '\n';
}

CsvTickWriter::CsvTickWriter(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "wb");
  if (f_ == nullptr) throw_errno(errno, "create CSV file '" + path + "'");
  line_.reserve(256);
  line_ = kHeader;
  line_ += '\n';
  std::fwrite(line_.data(), 1, line_.size(), f_);
}

CsvTickWriter::~CsvTickWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

void CsvTickWriter::write(const Tick& t) {
  if (f_ == nullptr) throw Error(Errc::closed, "write CSV file '" + path_ + "': closed");
  line_.clear();
  format(t, line_);
  std::fwrite(line_.data(), 1, line_.size(), f_);
}

void CsvTickWriter::close() {
  if (f_ == nullptr) return;
  const bool failed = std::ferror(f_) != 0;
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (failed || rc != 0) throw Error(Errc::parse_error, "write CSV file '" + path_ + "' failed");
}

}  // namespace tickrail::feed
