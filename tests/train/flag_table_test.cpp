// The training flags' one source (train/flag_table.h): every entry round-trips. A value given
// on the command line lands in the member (CLI11 registration), appears under the entry's key
// in TrainingArguments::to_json(), and the entry's rendering, split as a shell splits it, parses
// back to the same value. The advisor's command line, parsed back, is the run it describes.
#include "train/flag_table.h"

#include <gtest/gtest.h>
#include <wordexp.h>

#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/device.h"
#include "plan/advisor.h"
#include "support/training_flags.h"
#include "train/run_record.h"

namespace snug {
namespace {
namespace flag_table_test {

using test::shell_split;

// `words` parsed as `snug train` parses them (--device-memory converted as the commands do).
TrainingArguments parse(const std::vector<std::string>& words) {
  return test::parse_training_flags(words);
}

// A value for `f` other than its default, as command-line words and as the config holds it.
std::pair<std::vector<std::string>, nlohmann::json> sample(const TrainingFlag& f) {
  const std::string flag = f.name();
  const nlohmann::json d = f.value(TrainingArguments{});
  if (f.form == FlagForm::presence || f.form == FlagForm::recipe) return {{flag}, true};
  if (d.is_boolean()) return {{flag, d.get<bool>() ? "false" : "true"}, !d.get<bool>()};
  if (d.is_string()) return {{flag, "a b'c*"}, "a b'c*"};
  if (d.is_number_unsigned())
    return {{flag, std::to_string(d.get<uint64_t>() + 3)}, d.get<uint64_t>() + 3};
  if (d.is_number_integer())
    return {{flag, std::to_string(d.get<int64_t>() + 3)}, d.get<int64_t>() + 3};
  if (d.is_number_float()) return {{flag, "0.12345678901234567"}, 0.12345678901234567};
  if (d.is_null()) return {{flag, "512"}, 512};  // within every shape flag's range
  if (d.is_array())
    return {{flag, "x y", flag, "h.[0-1].*"}, nlohmann::json::array({"x y", "h.[0-1].*"})};
  ADD_FAILURE() << flag << ": no sample for " << d.dump();
  return {};
}

nlohmann::json at_key(const nlohmann::json& config, std::string key) {
  for (char& ch : key)
    if (ch == '.') ch = '/';
  return config.at(nlohmann::json::json_pointer("/" + key));
}

TEST(FlagTable, NamesAndKeysAreUnique) {
  std::set<std::string> names, keys;
  for (const TrainingFlag& f : training_flags()) {
    std::string spaced = f.names;
    for (char& ch : spaced)
      if (ch == ',') ch = ' ';
    for (const std::string& n : shell_split(spaced)) EXPECT_TRUE(names.insert(n).second) << n;
    if (!f.key.empty()) {
      EXPECT_TRUE(keys.insert(f.key).second) << f.key;
      EXPECT_EQ(&flag_for_key(f.key), &f);
    }
  }
  EXPECT_THROW(flag_for_key("no_such_key"), Error);
}

TEST(FlagTable, EveryFlagRoundTripsThroughMemberJsonAndRendering) {
  for (const TrainingFlag& f : training_flags()) {
    const auto [words, want] = sample(f);
    const TrainingArguments a = parse(words);
    EXPECT_EQ(f.value(a), want) << f.names;
    EXPECT_FALSE(f.is_default(a)) << f.names;
    if (!f.key.empty()) {
      EXPECT_EQ(at_key(a.to_json(), f.key), want) << f.names;
    }
    const std::string rendered = f.render(a);
    EXPECT_EQ(rendered.rfind(f.name(), 0), 0u) << rendered;
    EXPECT_EQ(f.value(parse(shell_split(rendered))), want) << f.names << ": " << rendered;
  }
}

TEST(FlagTable, ConfigHoldsEveryKeyAndNothingElse) {
  const nlohmann::json j = TrainingArguments{}.to_json();
  size_t keyed = 0;
  for (const TrainingFlag& f : training_flags())
    if (!f.key.empty()) {
      ++keyed;
      EXPECT_NO_THROW(at_key(j, f.key)) << f.key;
    }
  size_t leaves = 0;
  for (const auto& [k, v] : j.items()) leaves += v.is_object() ? v.size() : 1;
  EXPECT_EQ(leaves, keyed);
}

TEST(FlagTable, NumbersRenderAsPrintfGWhereExactElseInFull) {
  EXPECT_EQ(format_number(6e-4), "0.0006");
  EXPECT_EQ(format_number(1e-05), "1e-05");
  EXPECT_EQ(format_number(8), "8");
  EXPECT_EQ(std::stod(format_number(0.1 + 0.2)), 0.1 + 0.2);
  EXPECT_EQ(shell_word("a'b"), "'a'\\''b'");
  EXPECT_EQ(shell_word(""), "''");
}

// An optimizer setting is part of what a resume must match, and only it is not a config change.
TEST(FlagTable, OptimizerSettingsAreInTheRunRecord) {
  const TrainingArguments a;
  int marked = 0;
  for (const TrainingFlag& f : training_flags()) {
    if (!f.optimizer_record) continue;
    ++marked;
    const TrainingArguments b = parse(sample(f).first);
    EXPECT_FALSE(same_run(make_run_record(a), make_run_record(b))) << f.names;
    try {
      check_same_run(make_run_record(a), make_run_record(b), "here");
      ADD_FAILURE() << f.names << " is not checked on resume";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("optimizer." + f.key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("(" + f.name() + ")"), std::string::npos) << e.what();
    }
    EXPECT_EQ(make_run_record(b)["optimizer"][f.key], f.value(b)) << f.names;
    EXPECT_TRUE(config_changes(a.to_json(), b.to_json()).empty()) << f.names;
  }
  EXPECT_GT(marked, 0);
}

// The advisor's "run:" line sets every flag it shows to the run's value.
TEST(FlagTable, AdvisorCommandLineParsesBackToTheRun) {
  TrainingArguments a;
  a.model = "gpt2-124m";
  a.model_shape.n_layer = 4;
  a.data = "my data.txt";
  a.seq_len = 512;
  a.per_device_train_batch_size = 2;
  a.gradient_accumulation_steps = 4;
  a.max_steps = 10;
  a.learning_rate = 1.2345678901234e-4;
  a.optim = "sgd";
  a.momentum = 0.9;
  a.bf16_full = true;
  a.gradient_checkpointing = true;
  a.checkpoint_policy = "every-k:2";
  a.freeze = {"transformer.h.[0-1].*"};
  a.neftune_noise_alpha = 5;
  const std::string line = train_command_line(a, "rtx4090-24gb");
  const std::vector<std::string> words = shell_split(line);
  ASSERT_GE(words.size(), 2u);
  EXPECT_EQ(words[0], "snug");
  EXPECT_EQ(words[1], "train");
  const TrainingArguments b = parse(std::vector<std::string>(words.begin() + 2, words.end()));
  EXPECT_EQ(b.device_memory, parse_device_memory("rtx4090-24gb"));
  for (const TrainingFlag& f : training_flags())
    if (f.shown != Shown::never && f.form != FlagForm::external) {
      EXPECT_EQ(f.value(b), f.value(a)) << f.names << " in " << line;
    }
}

}  // namespace flag_table_test
}  // namespace
}  // namespace snug
