// The one list of switches (plan/switches.h) that the advisor and the what-if table read: each
// switch's flags, parsed as `snug train` parses them on top of a run's arguments, give the
// arguments its `apply` gives (so the flags the advisor and what-if print are the run they
// measured),
// and the advisor's dimensions and the what-if rows are the table's, in its orders.
#include "plan/switches.h"

#include <gtest/gtest.h>
#include <wordexp.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "plan/advisor.h"
#include "support/training_flags.h"

namespace snug {
namespace {
namespace switches_test {

// `line` parsed as `snug train` parses it, on top of `a` (flags not given keep its values).
TrainingArguments parse(const std::string& line, TrainingArguments a = {}) {
  return test::parse_training_line(line, std::move(a));
}

TEST(Switches, FlagsParseBackToWhatApplyDoes) {
  int checked = 0;
  for (const std::string base :
       {"", "--lora-r 4", "--attention naive --logits full --per-device-train-batch-size 6"}) {
    const TrainingArguments run = parse(base);
    const int64_t batch = run.per_device_train_batch_size * run.gradient_accumulation_steps;
    for (const SwitchGroup& g : switch_groups())
      for (const Switch& s : g.choices(run, batch)) {
        TrainingArguments applied = run;
        s.apply(applied);
        EXPECT_EQ(parse(s.flags, run).to_json(), applied.to_json())
            << g.name << ": '" << s.flags << "' on '" << base << "'";
        ++checked;
      }
  }
  EXPECT_GT(checked, 60);
}

TEST(Switches, AdvisorDimensionsAreTheRankedGroupsAdvisorChoices) {
  TrainingArguments run;
  run.lora_r = 4;
  const std::vector<SwitchDimension> dims = advisor_dimensions(run, 4);
  std::vector<std::string> names;
  for (const SwitchDimension& d : dims) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"batch x accumulation", "checkpointing", "optimizer",
                                             "precision", "base storage"}));
  for (const SwitchDimension& d : dims)
    for (const SwitchGroup& g : switch_groups())
      if (d.name == g.name) {
        std::vector<std::string> want, got;
        for (const Switch& s : g.choices(run, 4))
          if (s.advisor) want.push_back(s.flags);
        for (const SwitchChoice& c : d.choices) got.push_back(c.flags);
        EXPECT_EQ(got, want) << d.name;
      }
  // Without LoRA the base-storage group offers nothing, so it is not a dimension.
  EXPECT_EQ(advisor_dimensions(TrainingArguments{}, 4).size(), 4u);
}

TEST(Switches, WhatIfTriesOnlySwitchesThatAreOffInTheRun) {
  TrainingArguments run;
  run.gradient_checkpointing = true;
  run.bf16 = true;
  for (const SwitchGroup& g : switch_groups())
    for (const Switch& s : g.choices(run, run.per_device_train_batch_size))
      if (s.what_if && s.what_if(run)) {
        EXPECT_EQ(s.flags.find("--gradient-checkpointing"), std::string::npos) << s.flags;
        EXPECT_NE(s.flags, "--bf16");
        EXPECT_NE(s.flags, "--optim adamw_torch");  // the run's own
      }
}

}  // namespace switches_test
}  // namespace
}  // namespace snug
