// Numeric flags with a declared range (train/number_range.h): every numeric option of every
// command is registered through add_number_flag, which parses the text itself and checks the
// range. A value that does not parse is CLI11's ConversionError (exit 2); one out of range is
// snug::Error thrown from the parse (exit 1, cli/main.cpp). The help shows the type and range
// ("INT in [0, 65536]").
//
// Each registration is recorded (number_flags()) with the option and a reader of the value it
// stored, so that a test can walk every numeric flag of every command (tests/cli/
// flag_range_test.cpp) and find any numeric option registered without a range.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/number_range.h"

namespace snug::cli {

CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, int64_t& target,
                             const NumberRange& r, const std::string& help);
CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, int& target,
                             const NumberRange& r, const std::string& help);
CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, uint64_t& target,
                             const NumberRange& r, const std::string& help);
CLI::Option* add_number_flag(CLI::App* sub, const std::string& names, double& target,
                             const NumberRange& r, const std::string& help);
CLI::Option* add_number_flag(CLI::App* sub, const std::string& names,
                             std::optional<int64_t>& target, const NumberRange& r,
                             const std::string& help);

// One registered numeric flag: its option, range and the value it holds now, as the exact
// decimal text of an integer or format_number() of a real (which reads back to it) ("" for an unset
// optional).
struct NumberFlag {
  const CLI::Option* option = nullptr;
  NumberRange range;
  std::function<std::string()> value;
};
// The numeric flags registered since the last clear_number_flags() (build_app() clears it, so
// they are those of the app it built).
const std::vector<NumberFlag>& number_flags();
void clear_number_flags();

}  // namespace snug::cli
