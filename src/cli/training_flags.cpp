// The flags shared by `snug train` and `snug plan` (TrainingArguments, kebab-case): every entry
// of train/flag_table.h, registered in table order (the --help order).
#include <optional>
#include <variant>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "core/error.h"
#include "train/flag_table.h"
#include "train/training_args.h"

namespace snug::cli {

namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// A numeric member: through add_number_flag with the entry's declared range (every numeric
// entry has one; tests/cli/flag_range_test.cpp walks them).
template <class T>
void add_numeric(CLI::App* sub, const TrainingFlag& f, T& field) {
  SNUG_ASSERT(f.range.has_value(), "training flag ", f.name(), " declares no range");
  add_number_flag(sub, f.names, field, *f.range, f.help);
}

void add_flag(CLI::App* sub, const TrainingFlag& f, TrainingArguments& a) {
  std::visit(
      Overloaded{[&](std::optional<int64_t> ModelShapeOverrides::*m) {
                   add_numeric(sub, f, a.model_shape.*m);
                 },
                 [&](std::optional<int64_t> TrainingArguments::*m) { add_numeric(sub, f, a.*m); },
                 [&](int64_t TrainingArguments::*m) { add_numeric(sub, f, a.*m); },
                 [&](int TrainingArguments::*m) { add_numeric(sub, f, a.*m); },
                 [&](uint64_t TrainingArguments::*m) { add_numeric(sub, f, a.*m); },
                 [&](double TrainingArguments::*m) { add_numeric(sub, f, a.*m); },
                 [&](std::vector<std::string> TrainingArguments::*m) {
                   sub->add_option(f.names, a.*m, f.help)
                       ->expected(1)
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
                 },
                 [&](bool TrainingArguments::*m) {
                   if (f.form == FlagForm::presence)
                     sub->add_flag(f.names, a.*m, f.help);
                   else
                     sub->add_option(f.names, a.*m, f.help)->capture_default_str();
                 },
                 [&](std::string TrainingArguments::*m) {
                   sub->add_option(f.names, a.*m, f.help)->capture_default_str();
                 }},
      f.target);
}

}  // namespace

void add_training_flags(CLI::App* sub, TrainingArguments& a, std::string& device_memory) {
  for (const TrainingFlag& f : training_flags()) {
    if (f.form == FlagForm::external)
      sub->add_option(f.names, device_memory, f.help);
    else if (f.form == FlagForm::recipe)
      sub->add_flag_callback(
          f.names, [&a, &f] { f.apply(a); }, f.help);
    else
      add_flag(sub, f, a);
  }
}

}  // namespace snug::cli
