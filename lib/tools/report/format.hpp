// Locale-independent number formatting shared by the report renderers (printf honours
// LC_NUMERIC; HdrHistogram's Java output is always Locale.US).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace tickrail::report_detail {

// Fixed-point with `precision` decimals, right-aligned in `width` (like "%*.*f").
inline std::string fixed(double v, int precision, int width = 0) {
  char buf[400];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  std::string s(buf, r.ec == std::errc() ? r.ptr : buf);
  if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), ' ');
  return s;
}

// Java's Formatter "%*.*f" (HdrHistogram's output): the shortest decimal that round-trips the
// double, rounded HALF_UP. Differs from printf, which rounds the exact binary value half-even:
// 0.9997802734375 prints as ...438 in Java and ...437 with printf.
inline std::string java_fixed(double v, int precision, int width = 0) {
  std::string out;
  if (std::isnan(v)) {
    out = "NaN";
  } else if (std::isinf(v)) {
    out = v > 0 ? "Infinity" : "-Infinity";
  } else {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    const std::string sci(buf, r.ptr);  // "-d.ddde+XX", shortest round-trip digits
    const bool negative = sci[0] == '-';
    const std::size_t e = sci.find('e');
    std::string digits;
    for (std::size_t i = negative ? 1 : 0; i < e; ++i) {
      if (sci[i] != '.') digits += sci[i];
    }
    const int exp10 = std::stoi(sci.substr(e + 1));
    // value = 0.digits * 10^(exp10 + 1); lay the digits out on a fixed grid of int_digits
    // integer places and precision + 1 decimals (the last one decides the rounding).
    const int point = exp10 + 1;
    const int int_digits = std::max(point, 1);
    std::string grid(static_cast<std::size_t>(int_digits + precision + 1), '0');
    for (std::size_t i = 0; i < digits.size(); ++i) {
      const long at = static_cast<long>(int_digits) - point + static_cast<long>(i);
      if (at >= 0 && at < static_cast<long>(grid.size())) grid[static_cast<std::size_t>(at)] = digits[i];
    }
    const bool round_up = grid.back() >= '5';
    grid.pop_back();
    if (round_up) {
      std::size_t i = grid.size();
      while (i > 0 && grid[i - 1] == '9') grid[--i] = '0';
      if (i == 0) {
        grid.insert(grid.begin(), '1');
      } else {
        ++grid[i - 1];
      }
    }
    const std::size_t int_len = grid.size() - static_cast<std::size_t>(precision);
    std::string int_part = grid.substr(0, int_len);
    while (int_part.size() > 1 && int_part[0] == '0') int_part.erase(0, 1);
    if (negative) out += '-';
    out += int_part;
    if (precision > 0) {
      out += '.';
      out.append(grid, int_len, std::string::npos);
    }
  }
  if (static_cast<int>(out.size()) < width) out.insert(0, static_cast<std::size_t>(width) - out.size(), ' ');
  return out;
}

// Unsigned integer right-aligned in `width` (like "%*llu").
inline std::string integer(std::uint64_t v, int width = 0) {
  std::string s = std::to_string(v);
  if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), ' ');
  return s;
}

// A duration given in ns, in the largest unit (ns, us, ms, s) that keeps it >= 1, to three
// significant digits: "812 ns", "1.95 us", "12.3 ms", "98.8 s". Whole ns are never shown with
// decimals: the histogram's resolution is one ns.
inline std::string duration(double ns) {
  static constexpr const char* kUnits[] = {"ns", "us", "ms", "s"};
  if (!(ns > 0.0)) return "0 ns";
  double v = ns;
  int u = 0;
  while (u < 3 && v >= 999.5) {
    v /= 1000.0;
    ++u;
  }
  const int decimals = u == 0 || v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
  return fixed(v, decimals) + " " + kUnits[u];
}

// Unsigned integer with thousands separators: 2,000,000.
inline std::string grouped(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

// Text from outside (shared memory, config files) may hold anything. For a terminal, a scraper
// or an XML file: control characters (a channel name could carry terminal escape codes) and
// bytes that are not valid UTF-8 become '?'; newlines stay when `keep_newlines`.
inline std::string printable(std::string_view in, bool keep_newlines) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      out += (c >= 0x20 && c != 0x7f) || (c == '\n' && keep_newlines) ? static_cast<char>(c) : '?';
      ++i;
      continue;
    }
    const std::size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool ok = len != 0 && i + len <= in.size();
    for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(in[i + k]) & 0xc0) == 0x80;
    if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

inline std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

inline std::string pad_right(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

}  // namespace tickrail::report_detail
