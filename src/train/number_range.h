// The declared range of a numeric flag (issue 29). Every numeric flag of every command states
// the values it accepts where it is declared (train/flag_table.cpp, the commands in cli/), and
// cli/number_flag.h parses it with these rules instead of CLI11's conversion, which saturates an
// integer beyond 64 bits, reads "010" as octal, turns "" into 0 and accepts nan and inf:
//   - a value that is not a number of the flag's kind does not parse: exit 2 (README, "Bad
//     command line"). An integer flag takes decimal digits with an optional sign, within int64
//     (uint64 for an unsigned flag, no sign); a real flag takes what strtod reads, whole.
//   - a number outside the range is a value that cannot work: exit 1, the message naming the
//     flag, the value and the range. A real used as a 32-bit float (the optimizer's betas,
//     epsilon, ...) is checked after rounding to float: --adam-beta1 0.999999999 is 1.0f, and
//     out of [0, 1).
// Every range is finite, so nan and inf never reach a run.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>

namespace snug {

// The common bounds. Counts of steps, sequences and checkpoints stop at 2^31-1: their products
// (steps x accumulation x batch x tokens) stay within 64 bits.
constexpr int64_t kMaxFlagCount = (int64_t{1} << 31) - 1;
// More OpenMP threads than this only time-slice the cores; 100000 crashed the OpenMP runtime.
constexpr int64_t kMaxFlagThreads = 1024;

enum class NumberKind { integer, unsigned_integer, real };

struct NumberRange {
  NumberKind kind = NumberKind::integer;
  int64_t min_int = 0, max_int = 0;   // integer: [min_int, max_int]
  uint64_t max_uint = 0;              // unsigned_integer: [0, max_uint]
  double min_real = 0, max_real = 0;  // real: min_real ( or [, max_real ) or ]
  bool min_open = false, max_open = false;
  bool as_float = false;  // real: checked after rounding to a 32-bit float

  // [lo, hi] of an int64 (or int) flag.
  static NumberRange integer(int64_t lo, int64_t hi);
  // [0, hi] of a uint64 flag.
  static NumberRange unsigned_integer(uint64_t hi);
  // A real flag's range; `lo_open`/`hi_open` exclude the end. `as_float`: the value is used as
  // a 32-bit float.
  static NumberRange real(double lo, double hi, bool lo_open = false, bool hi_open = false,
                          bool as_float = false);

  // "an integer in [0, 65536]", "a number in [0, 1) after rounding to a 32-bit float".
  std::string describe() const;
};

// A parsed value; the member of the range's kind is set.
struct NumberValue {
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
};

// `text` read as a number of `kind`, or nullopt when it is not one (see the rules above).
std::optional<NumberValue> parse_number(const std::string& text, NumberKind kind);
// Whether `v` lies in `r` (a real after rounding to float where r.as_float).
bool in_range(const NumberValue& v, const NumberRange& r);
// `text` as a flag value in a message: itself when short, else its first 64 bytes and its
// length, so that a megabyte argument gives a line, not a megabyte.
std::string value_excerpt(const std::string& text);

// Checks `text` for `flag` and returns its value: a text that does not parse throws
// NumberSyntaxError (the CLI's exit 2), a value out of range snug::Error (exit 1).
class NumberSyntaxError : public std::exception {
 public:
  explicit NumberSyntaxError(std::string m) : msg_(std::move(m)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};
NumberValue parse_flag_value(const std::string& flag, const std::string& text,
                             const NumberRange& r);

}  // namespace snug
