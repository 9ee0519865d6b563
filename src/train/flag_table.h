// The one source of the training arguments: every TrainingArguments flag is one entry of
// training_flags() (flag_table.cpp) with its command-line names, help, the member it sets, its
// key in the report's "config" and how a generated command line shows it. Everything that used
// to mirror the flags by hand reads this table:
//   - the CLI11 registration of `snug train`/`plan`/`estimate`/`export`/`export-init`
//     (cli/training_flags.cpp), in table order, which is the --help order;
//   - TrainingArguments::to_json(), the report's "config";
//   - train_command_line() (plan/advisor.h), the `snug train ...` line the advisor prints;
//   - the run record's optimizer settings (run_record_make.cpp) and `snug export`'s checks,
//     which name a flag by its JSON key (flag_for_key).
// Adding a flag is a member of TrainingArguments and one entry here (docs/design.md, "Adding a
// training flag"). Flag names and JSON keys are contracts: never rename one (add an alias name).
// Validation stays in TrainingArguments::validate().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "train/number_range.h"
#include "train/training_args.h"

namespace snug {

// What train_command_line shows of a flag (when its `when`, if any, holds).
enum class Shown {
  never,
  always,   // its value, default or not
  changed,  // its value where it differs from the default
};

// How the command line sets the member.
enum class FlagForm {
  value,     // --flag VALUE (a repeated --flag VALUE for a list)
  presence,  // a bool set by the flag alone (--fp16)
  recipe,    // a bool set by the flag alone, through `apply` (--qlora sets the recipe's flags)
  external,  // the command keeps the text and converts it itself (--device-memory: bytes or a
             // GPU preset, one message for both); the member holds the result
};

using FlagTarget = std::variant<
    std::string TrainingArguments::*, int64_t TrainingArguments::*, int TrainingArguments::*,
    uint64_t TrainingArguments::*, double TrainingArguments::*, bool TrainingArguments::*,
    std::vector<std::string> TrainingArguments::*, std::optional<int64_t> TrainingArguments::*,
    std::optional<int64_t> ModelShapeOverrides::*>;

struct TrainingFlag {
  std::string names = {};  // CLI11 names, "--log-every,--logging-steps"; the first is rendered
  std::string key = {};    // to_json key ("model_shape.n_layer": nested); "" when not in config
  std::string help = {};
  FlagTarget target = {};
  FlagForm form = FlagForm::value;
  Shown shown = Shown::never;
  bool (*when)(const TrainingArguments&) = nullptr;  // shown only if it holds (nullptr: always)
  void (*apply)(TrainingArguments&) = nullptr;       // FlagForm::recipe
  // An optimizer hyperparameter: a checkpoint's run record keeps it under "optimizer", and a
  // resume with another value is refused (train/run_record.h; run_record.cpp's JSON-only lists
  // are held to these entries by tests/train/flag_table_test.cpp).
  bool optimizer_record = false;
  // A numeric flag's declared range (train/number_range.h), checked where the flag is parsed;
  // every numeric entry has one (tests/cli/flag_range_test.cpp walks them).
  std::optional<NumberRange> range = std::nullopt;

  // The first of `names` ("--log-every").
  std::string name() const;
  // The member's value as the config JSON holds it (null for an unset optional).
  nlohmann::json value(const TrainingArguments& a) const;
  bool is_default(const TrainingArguments& a) const;
  // The member's value as command-line words that set it again ("--seq-len 512", "--fp16",
  // "--freeze a --freeze 'b c'"); "" for an off presence flag or an unset optional.
  std::string render(const TrainingArguments& a) const;
};

// Every training flag, in --help order.
const std::vector<TrainingFlag>& training_flags();
// The entry whose JSON key is `key`; throws snug::Error for an unknown key.
const TrainingFlag& flag_for_key(const std::string& key);

// `s` as one shell word: unchanged when it needs no quoting, else single-quoted.
std::string shell_word(const std::string& s);
// `v` as "%g" prints it where that reads back to the same double, else with 17 digits.
std::string format_number(double v);

}  // namespace snug
