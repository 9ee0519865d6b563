// Every numeric flag of every command declares its range (issue 29, acceptance 3). The test
// builds snug's app in-process, walks every option of every (sub)command, and for each numeric
// one parses the command line with each hostile value: a value in the declared range is stored
// unchanged; a number outside it is snug::Error (exit 1) naming the flag, the value and the
// range; a text that is not a number of the flag's kind is CLI11's ConversionError (exit 2),
// naming the flag and the range. A numeric option registered without a range fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/number_flag.h"
#include "core/error.h"
#include "train/number_range.h"

namespace snug::cli {
namespace {
namespace flag_range_test {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::vector<std::string> kProbes = {
    "0",   "-1", "2147483648", "9223372036854775807", "18446744073709551616", "1e308", "nan",
    "inf", "",   "12abc"};

// A numeric option: CLI11's own type names for numbers, or add_number_flag's "INT in [..]".
bool is_numeric(const CLI::Option* o) {
  const std::string t = o->get_type_name();
  for (const char* kind : {"INT", "UINT", "FLOAT", "NUMBER"}) {
    const std::string k = kind;
    if (t == k || t.rfind(k + " ", 0) == 0) return true;
  }
  return false;
}

struct Found {
  std::vector<std::string> path;  // "bench", "seeds"
  std::string flag;               // "--lora-r"
};

// Every numeric option of `app`'s subcommands, with the words that reach it.
void collect(CLI::App* app, std::vector<std::string> path, std::vector<Found>& out) {
  for (CLI::App* sub : app->get_subcommands({})) {
    std::vector<std::string> p = path;
    p.push_back(sub->get_name());
    for (const CLI::Option* o : sub->get_options())
      if (is_numeric(o)) out.push_back({p, "--" + o->get_lnames().at(0)});
    collect(sub, p, out);
  }
}

const NumberFlag* entry_of(const CLI::Option* o) {
  for (const NumberFlag& f : number_flags())
    if (f.option == o) return &f;
  return nullptr;
}

CLI::Option* option_at(SnugApp& a, const Found& f) {
  CLI::App* sub = a.app.get();
  for (const std::string& name : f.path) sub = sub->get_subcommand(name);
  return sub->get_option(f.flag);
}

// What the parse should do, by an oracle independent of snug's parser (std::from_chars).
enum class Outcome { accepted, out_of_range, no_parse };
struct Expected {
  Outcome outcome = Outcome::no_parse;
  double real = 0;  // accepted real
};

template <class T>
std::optional<T> whole(const std::string& s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

Expected expect(const std::string& probe, const NumberRange& r) {
  Expected e;
  switch (r.kind) {
    case NumberKind::integer: {
      const std::optional<int64_t> v = whole<int64_t>(probe);
      if (!v) return e;
      e.outcome = *v >= r.min_int && *v <= r.max_int ? Outcome::accepted : Outcome::out_of_range;
      return e;
    }
    case NumberKind::unsigned_integer: {
      const std::optional<uint64_t> v = whole<uint64_t>(probe);
      if (!v) return e;
      e.outcome = *v <= r.max_uint ? Outcome::accepted : Outcome::out_of_range;
      return e;
    }
    case NumberKind::real:
      break;
  }
  const std::optional<double> v = whole<double>(probe);
  if (!v) return e;
  const double used = r.as_float ? static_cast<double>(static_cast<float>(*v)) : *v;
  const bool in = std::isfinite(used) && (r.min_open ? used > r.min_real : used >= r.min_real) &&
                  (r.max_open ? used < r.max_real : used <= r.max_real);
  e.outcome = in ? Outcome::accepted : Outcome::out_of_range;
  e.real = *v;
  return e;
}

TEST(FlagRange, EveryNumericFlagOfEveryCommandDeclaresAndEnforcesItsRange) {
  SnugApp a = build_app();
  std::vector<Found> found;
  collect(a.app.get(), {}, found);
  ASSERT_GT(found.size(), 100u);  // the training flags alone are 35 per training command
  for (const Found& f : found) {
    const std::string where = f.path.at(0) + " " + f.flag;
    const NumberFlag* entry = entry_of(option_at(a, f));
    if (!entry) {
      ADD_FAILURE() << where << " is numeric but declares no range (cli/number_flag.h)";
      continue;
    }
    const NumberRange range = entry->range;
    const std::string takes = ": " + f.flag + " takes " + range.describe();
    for (const std::string& probe : kProbes) {
      std::vector<std::string> words = f.path;
      words.push_back(f.flag);
      words.push_back(probe);
      const Expected want = expect(probe, range);
      Outcome got = Outcome::accepted;
      std::string message;
      try {
        a.app->parse(std::vector<std::string>(words.rbegin(), words.rend()));
      } catch (const Error& e) {
        got = Outcome::out_of_range;
        message = e.what();
      } catch (const CLI::ConversionError& e) {
        got = Outcome::no_parse;
        message = e.what();
      } catch (const CLI::ParseError& e) {
        // Another flag the command requires (tokenize --tokenizer, ...): this one was taken.
        message = e.what();
      }
      const std::string what = where + " '" + probe + "'";
      ASSERT_EQ(got, want.outcome) << what << ": " << message;
      switch (got) {
        case Outcome::accepted: {
          // Stored unchanged: entry_of() of this app reads the member back.
          const NumberFlag* now = entry_of(option_at(a, f));
          ASSERT_NE(now, nullptr) << what;
          const std::string stored = now->value();
          if (range.kind == NumberKind::real)
            EXPECT_EQ(std::strtod(stored.c_str(), nullptr), want.real) << what;
          else
            EXPECT_EQ(stored, probe) << what;
          break;
        }
        case Outcome::out_of_range:
          EXPECT_THAT(message, StartsWith(f.flag + " " + probe + " is out of range")) << what;
          EXPECT_THAT(message, EndsWith(takes)) << what;
          break;
        case Outcome::no_parse:
          EXPECT_THAT(message, StartsWith(f.flag + " '" + probe + "' does not parse")) << what;
          EXPECT_THAT(message, EndsWith(takes)) << what;
          break;
      }
    }
  }
}

TEST(FlagRange, RangesReadAsTheHelpShowsThem) {
  EXPECT_EQ(NumberRange::integer(0, 65536).describe(), "an integer in [0, 65536]");
  EXPECT_EQ(NumberRange::unsigned_integer(UINT64_MAX).describe(),
            "an integer in [0, 18446744073709551615]");
  EXPECT_EQ(NumberRange::real(0, 1, false, true, true).describe(),
            "a number in [0, 1) after rounding to a 32-bit float");
  EXPECT_EQ(NumberRange::real(0, 1e6, true).describe(), "a number in (0, 1e+06]");
  SnugApp a = build_app();
  const CLI::Option* lora = a.app->get_subcommand("train")->get_option("--lora-r");
  EXPECT_EQ(lora->get_type_name(), "INT in [0, 65536]");
}

// A value used as a 32-bit float is checked as that float: 0.999999999 is 1.0f.
TEST(FlagRange, RealsUsedAsFloatsAreCheckedAfterRounding) {
  const NumberRange beta = NumberRange::real(0, 1, false, true, true);
  EXPECT_NO_THROW(parse_flag_value("--adam-beta1", "0.99999", beta));
  try {
    parse_flag_value("--adam-beta1", "0.999999999", beta);
    ADD_FAILURE() << "0.999999999 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--adam-beta1 0.999999999 is out of range (1 as a 32-bit float): --adam-beta1 "
                 "takes a number in [0, 1) after rounding to a 32-bit float");
  }
  // 1e-46 rounds to 0 as a float: no epsilon at all.
  EXPECT_THROW(
      parse_flag_value("--adam-epsilon", "1e-46", NumberRange::real(0, 1, true, false, true)),
      Error);
}

TEST(FlagRange, IntegersAreDecimalAndNeverSaturate) {
  const NumberRange seed = NumberRange::unsigned_integer(UINT64_MAX);
  EXPECT_EQ(parse_flag_value("--seed", "18446744073709551615", seed).u, UINT64_MAX);
  EXPECT_THROW(parse_flag_value("--seed", "18446744073709551616", seed), NumberSyntaxError);
  EXPECT_THROW(parse_flag_value("--seed", "-1", seed), NumberSyntaxError);
  const NumberRange steps = NumberRange::integer(-1, 100);
  EXPECT_EQ(parse_flag_value("--max-steps", "010", steps).i, 10);  // not octal
  EXPECT_THROW(parse_flag_value("--max-steps", "0x10", steps), NumberSyntaxError);
  EXPECT_THROW(parse_flag_value("--max-steps", " 1", steps), NumberSyntaxError);
  try {
    parse_flag_value("--max-steps", std::string(100000, '7'), steps);
    ADD_FAILURE() << "accepted";
  } catch (const NumberSyntaxError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u);  // a bounded excerpt, not 100 kB
  }
}

}  // namespace flag_range_test
}  // namespace
}  // namespace snug::cli
