// --config-override KEY=VALUE (models/config_override.h): the generic config.json override of
// which the shape flags are aliases. The alias and the override give the same ModelConfig, on
// the command line as in TrainingArguments, and every bad key or value is one snug::Error that
// names the flag and the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "models/registry.h"
#include "support/configs.h"
#include "support/run_cli.h"
#include "support/training_flags.h"
#include "train/training_args.h"

namespace snug {
namespace {
namespace config_override_test {

using ::testing::HasSubstr;

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.shape.name, b.shape.name);
  EXPECT_EQ(a.shape.model_type, b.shape.model_type);
  EXPECT_EQ(a.shape.n_layer, b.shape.n_layer);
  EXPECT_EQ(a.shape.n_embd, b.shape.n_embd);
  EXPECT_EQ(a.shape.n_head, b.shape.n_head);
  EXPECT_EQ(a.shape.vocab_size, b.shape.vocab_size);
  EXPECT_EQ(a.shape.n_positions, b.shape.n_positions);
  EXPECT_EQ(a.num_params, b.num_params);
  EXPECT_EQ(a.hf, b.hf);
}

// `words` parsed as `snug train` parses them.
TrainingArguments parse(const std::vector<std::string>& words) {
  return test::parse_training_flags(words);
}

// The message of the snug::Error that resolving `overrides` on gpt2-tiny throws.
std::string error_of(const std::vector<std::string>& overrides, const ModelShapeOverrides& o = {}) {
  try {
    resolve_model("gpt2-tiny", o, overrides);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a snug::Error";
  return "";
}

TEST(ConfigOverride, EachShapeFlagIsAnAliasOfTheOverride) {
  const std::vector<std::pair<std::string, std::string>> flags = {{"--n-layer", "n_layer"},
                                                                  {"--n-embd", "n_embd"},
                                                                  {"--n-head", "n_head"},
                                                                  {"--vocab-size", "vocab_size"},
                                                                  {"--n-positions", "n_positions"}};
  for (const auto& [flag, key] : flags) {
    const TrainingArguments alias = parse({"--model", "gpt2-124m", flag, "96"});
    const TrainingArguments generic =
        parse({"--model", "gpt2-124m", "--config-override", key + "=96"});
    const ModelConfig a = alias.model_config(), g = generic.model_config();
    expect_same(a, g);
    EXPECT_EQ(g.hf[key], 96) << key;
    EXPECT_EQ(g.shape.name, "gpt2-124m " + key + "=96");
  }
}

TEST(ConfigOverride, SevenBShapeFromOverridesEqualsTheShapeFlags) {
  const ModelShapeOverrides o = test::seven_b_shape();
  const ModelConfig generic = resolve_model(
      "gpt2-124m", {}, {"n_layer=32", "n_embd=4096", "n_head=32", "n_positions=2048"});
  expect_same(resolve_model("gpt2-124m", o), generic);
  EXPECT_EQ(generic.num_params, 6658404352);
  // Mixed: flags for some keys, the override for the others.
  ModelShapeOverrides some;
  some.n_layer = 32;
  some.n_embd = 4096;
  expect_same(resolve_model("gpt2-124m", some, {"n_head=32", "n_positions=2048"}), generic);
}

TEST(ConfigOverride, SetsKeysNoShapeFlagReaches) {
  const ModelConfig c = resolve_model("gpt2-tiny", {}, {"layer_norm_epsilon=1e-6"});
  EXPECT_EQ(c.hf["layer_norm_epsilon"].get<float>(), 1e-6F);
  EXPECT_EQ(c.shape.name, "gpt2-tiny layer_norm_epsilon=1e-06");
  EXPECT_EQ(c.num_params, resolve_model("gpt2-tiny").num_params);
}

TEST(ConfigOverride, BadKeysAndValuesNameTheFlagAndKey) {
  EXPECT_THAT(error_of({"n_layr=4"}),
              HasSubstr("--config-override n_layr=4: model 'gpt2-tiny' (gpt2) has no config.json "
                        "key 'n_layr' (its keys: "));
  EXPECT_THAT(error_of({"n_layer=four"}),
              HasSubstr("--config-override n_layer=four: gpt2-tiny n_layer=\"four\": key "
                        "'n_layer' must be an integer"));
  EXPECT_THAT(error_of({"n_layer=0"}), HasSubstr("--config-override n_layer=0: model 'gpt2-tiny "
                                                 "n_layer=0': every dimension must be positive"));
  EXPECT_THAT(error_of({"n_embd=102"}), HasSubstr("--config-override n_embd=102: model "
                                                  "'gpt2-tiny n_embd=102': n_embd 102 is not "
                                                  "divisible by n_head 4"));
  EXPECT_THAT(error_of({"layer_norm_epsilon=-1"}),
              HasSubstr("--config-override layer_norm_epsilon=-1: "));
  EXPECT_THAT(error_of({"n_layer"}), HasSubstr("--config-override n_layer: expected KEY=VALUE"));
  EXPECT_THAT(error_of({"=4"}), HasSubstr("--config-override =4: expected KEY=VALUE"));
  EXPECT_THAT(error_of({"n_layer=[1,"}), HasSubstr("--config-override n_layer=[1,"));
  EXPECT_THAT(error_of({"model_type=llama"}),
              HasSubstr("--config-override model_type=llama: model_type picks the family"));
  ModelShapeOverrides o;
  o.n_layer = 2;
  EXPECT_THAT(error_of({"n_layer=3"}, o),
              HasSubstr("--config-override n_layer=3: config.json key 'n_layer' is already set "
                        "by --n-layer"));
  EXPECT_THAT(error_of({"n_head=2", "n_head=4"}),
              HasSubstr("--config-override n_head=4: config.json key 'n_head' is already set by "
                        "--config-override n_head=2"));
}

TEST(ConfigOverride, PlanGivesTheSameReportAsTheShapeFlags) {
  test::TempDir tmp;
  const std::string alias = tmp.path("alias.json"), generic = tmp.path("generic.json");
  const test::CliResult a =
      test::run_snug("plan --model gpt2-tiny --n-layer 2 --n-embd 64 --json " + alias);
  const test::CliResult g = test::run_snug(
      "plan --model gpt2-tiny --config-override n_layer=2 --config-override n_embd=64 --json " +
      generic);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const nlohmann::json ja = test::read_json(alias), jg = test::read_json(generic);
  EXPECT_EQ(ja["memory"], jg["memory"]);
  EXPECT_EQ(ja["what_if"], jg["what_if"]);
  EXPECT_EQ(a.out, g.out);  // the model's name included
  const test::CliResult bad = test::run_snug("plan --model gpt2-tiny --config-override n_layr=2");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--config-override n_layr=2: model 'gpt2-tiny' (gpt2) has no "
                                 "config.json key 'n_layr'"));
}

// A real run: the alias and the override train the same model to the same losses, bit for bit.
TEST(ConfigOverride, TrainGivesTheSameLossesAsTheShapeFlag) {
  test::TempDir tmp;
  const std::string alias = tmp.path("alias.json"), generic = tmp.path("generic.json");
  const test::CliResult a =
      test::run_snug("train --n-layer 2 --max-steps 2 --report-json " + alias, 300);
  const test::CliResult g = test::run_snug(
      "train --config-override n_layer=2 --max-steps 2 --report-json " + generic, 300);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const nlohmann::json ja = test::read_json(alias), jg = test::read_json(generic);
  EXPECT_EQ(ja["model"]["n_layer"], 2);
  EXPECT_EQ(ja["model"], jg["model"]);
  ASSERT_EQ(ja["loss"].size(), 2u);
  EXPECT_EQ(ja["loss"], jg["loss"]);
  EXPECT_EQ(ja["memory"]["peak_bytes"], jg["memory"]["peak_bytes"]);
}

}  // namespace config_override_test
}  // namespace
}  // namespace snug
