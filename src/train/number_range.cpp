#include "train/number_range.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "io/excerpt.h"
#include "train/flag_table.h"

namespace snug {

NumberRange NumberRange::integer(int64_t lo, int64_t hi) {
  return {.kind = NumberKind::integer, .min_int = lo, .max_int = hi};
}

NumberRange NumberRange::unsigned_integer(uint64_t hi) {
  return {.kind = NumberKind::unsigned_integer, .max_uint = hi};
}

NumberRange NumberRange::real(double lo, double hi, bool lo_open, bool hi_open, bool as_float) {
  return {.kind = NumberKind::real,
          .min_real = lo,
          .max_real = hi,
          .min_open = lo_open,
          .max_open = hi_open,
          .as_float = as_float};
}

std::string NumberRange::describe() const {
  switch (kind) {
    case NumberKind::integer:
      return detail::concat("an integer in [", min_int, ", ", max_int, "]");
    case NumberKind::unsigned_integer:
      return detail::concat("an integer in [0, ", max_uint, "]");
    case NumberKind::real:
      break;
  }
  return detail::concat("a number in ", min_open ? "(" : "[", format_number(min_real), ", ",
                        format_number(max_real), max_open ? ")" : "]",
                        as_float ? " after rounding to a 32-bit float" : "");
}

namespace {

// Decimal digits (at least one) into `out`, false on anything else or beyond 64 bits.
bool parse_digits(const std::string& s, size_t from, uint64_t& out) {
  if (from >= s.size()) return false;
  uint64_t v = 0;
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    v = v * 10 + digit;
  }
  out = v;
  return true;
}

}  // namespace

std::optional<NumberValue> parse_number(const std::string& text, NumberKind kind) {
  NumberValue v;
  if (text.empty()) return std::nullopt;
  if (kind == NumberKind::unsigned_integer) {
    if (!parse_digits(text, text[0] == '+' ? 1 : 0, v.u)) return std::nullopt;
    return v;
  }
  if (kind == NumberKind::integer) {
    const bool negative = text[0] == '-';
    uint64_t magnitude = 0;
    if (!parse_digits(text, text[0] == '-' || text[0] == '+' ? 1 : 0, magnitude))
      return std::nullopt;
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (magnitude > kMax + (negative ? 1 : 0)) return std::nullopt;
    v.i = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return v;
  }
  // strtod skips leading space; a flag value with any is not a number.
  if (std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  v.d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

namespace {

// The value a real flag is used as.
double used_value(double d, const NumberRange& r) {
  return r.as_float ? static_cast<double>(static_cast<float>(d)) : d;
}

}  // namespace

bool in_range(const NumberValue& v, const NumberRange& r) {
  switch (r.kind) {
    case NumberKind::integer:
      return v.i >= r.min_int && v.i <= r.max_int;
    case NumberKind::unsigned_integer:
      return v.u <= r.max_uint;
    case NumberKind::real:
      break;
  }
  const double x = used_value(v.d, r);
  if (!std::isfinite(x)) return false;
  const bool above_min = r.min_open ? x > r.min_real : x >= r.min_real;
  const bool below_max = r.max_open ? x < r.max_real : x <= r.max_real;
  return above_min && below_max;
}

std::string value_excerpt(const std::string& text) {
  return excerpt(text);
}

NumberValue parse_flag_value(const std::string& flag, const std::string& text,
                             const NumberRange& r) {
  const std::optional<NumberValue> v = parse_number(text, r.kind);
  if (!v)
    throw NumberSyntaxError(detail::concat(flag, " '", value_excerpt(text),
                                           "' does not parse: ", flag, " takes ", r.describe()));
  if (!in_range(*v, r)) {
    std::string rounded;
    if (r.kind == NumberKind::real && r.as_float && std::isfinite(v->d) &&
        used_value(v->d, r) != v->d)
      rounded = detail::concat(" (", format_number(used_value(v->d, r)), " as a 32-bit float)");
    throw Error(detail::concat(flag, " ", value_excerpt(text), " is out of range", rounded, ": ",
                               flag, " takes ", r.describe()));
  }
  return *v;
}

}  // namespace snug
