#include "cli/number_flag.h"

#include "core/error.h"
#include "train/flag_table.h"

namespace snug::cli {

namespace {

std::vector<NumberFlag>& registry() {
  static std::vector<NumberFlag> flags;
  return flags;
}

const char* type_word(NumberKind k) {
  return k == NumberKind::real ? "FLOAT" : k == NumberKind::integer ? "INT" : "UINT";
}

// Registers the option: `store` gets the checked value, `show` reads the target back.
CLI::Option* add(CLI::App* sub, const std::string& names, const NumberRange& r,
                 const std::string& help, std::function<void(const NumberValue&)> store,
                 std::function<std::string()> show) {
  const std::string flag = names.substr(0, names.find(','));
  CLI::Option* o = sub->add_option_function<std::string>(
      names,
      [flag, r, store](const std::string& text) {
        NumberValue v;
        try {
          v = parse_flag_value(flag, text, r);
        } catch (const NumberSyntaxError& e) {
          throw CLI::ConversionError(std::string(e.what()));
        }
        store(v);
      },
      help);
  const std::string range = r.describe();  // "an integer in [0, 65536]"
  o->type_name(std::string(type_word(r.kind)) + range.substr(range.find(" in ")));
  // The default in the help, unless it is a sentinel outside the range ("0: unset").
  const std::string now = show();
  const std::optional<NumberValue> v = parse_number(now, r.kind);
  if (v && in_range(*v, r)) o->default_str(now);
  registry().push_back({o, r, std::move(show)});
  return o;
}

void expect_kind(const NumberRange& r, NumberKind k, const std::string& names) {
  SNUG_ASSERT(r.kind == k, "flag ", names, " declares a range of another kind than its type");
}

}  // namespace

CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, int64_t& target,
                             const NumberRange& r, const std::string& help) {
  expect_kind(r, NumberKind::integer, names);
  return add(
      sub, names, r, help, [&target](const NumberValue& v) { target = v.i; },
      [&target] { return std::to_string(target); });
}

CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, int& target,
                             const NumberRange& r, const std::string& help) {
  expect_kind(r, NumberKind::integer, names);
  SNUG_ASSERT(r.min_int >= INT32_MIN && r.max_int <= INT32_MAX, "flag ", names,
              " declares a range beyond its int");
  return add(
      sub, names, r, help, [&target](const NumberValue& v) { target = static_cast<int>(v.i); },
      [&target] { return std::to_string(target); });
}

CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, uint64_t& target,
                             const NumberRange& r, const std::string& help) {
  expect_kind(r, NumberKind::unsigned_integer, names);
  return add(
      sub, names, r, help, [&target](const NumberValue& v) { target = v.u; },
      [&target] { return std::to_string(target); });
}

CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, double& target,
                             const NumberRange& r, const std::string& help) {
  expect_kind(r, NumberKind::real, names);
  return add(
      sub, names, r, help, [&target](const NumberValue& v) { target = v.d; },
      [&target] { return format_number(target); });
}

CLI::Option* add_number_flag(CLI::App* sub, const std::string& names,
                             std::optional<int64_t>& target, const NumberRange& r,
                             const std::string& help) {
  expect_kind(r, NumberKind::integer, names);
  return add(
      sub, names, r, help, [&target](const NumberValue& v) { target = v.i; },
      [&target] { return target ? std::to_string(*target) : std::string(); });
}

const std::vector<NumberFlag>& number_flags() {
  return registry();
}

void clear_number_flags() {
  registry().clear();
}

}  // namespace snug::cli
