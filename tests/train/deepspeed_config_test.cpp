// --deepspeed ds_config.json (train/deepspeed_config.h): a config of the keys snug reads gives the
// arguments of the equivalent flags; "auto" takes the flag's value; every other key, a value snug
// cannot honour, a contradiction with a flag given on the command line and a train_batch_size
// that does not multiply out are refused, each naming the JSON path.
#include "train/deepspeed_config.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "support/expect_error.h"
#include "support/run_cli.h"
#include "support/training_flags.h"

namespace snug {
namespace {
namespace deepspeed_config_test {

using testing_data::error_message;
using testing_data::HasSubstr;

// `snug train WORDS` parsed as the command parses it (the --deepspeed hook included).
TrainingArguments parse_train(const std::string& line) {
  CLI::App app;
  const auto c = cli::add_training_subcommand(app, "train", "");
  std::vector<std::string> words = test::shell_split("train " + line);
  app.parse(std::vector<std::string>(words.rbegin(), words.rend()));
  return c.flags->args;
}

// The config JSON without the file's own path.
nlohmann::json config_of(TrainingArguments a) {
  a.deepspeed.clear();
  return a.to_json();
}

struct DsFile {
  test::TempDir dir;
  std::string path;
  explicit DsFile(const std::string& text) : path(dir.path("ds_config.json")) {
    test::write_file(path, text);
  }
};

TEST(DeepSpeedConfig, AcceptedConfigEqualsTheFlags) {
  const DsFile ds(R"({
    "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "none"},
                          "offload_param": {"device": "none"}},
    "bf16": {"enabled": true},
    "fp16": {"enabled": false},
    "gradient_accumulation_steps": 4,
    "gradient_clipping": 0.5,
    "train_micro_batch_size_per_gpu": 2,
    "train_batch_size": 8,
    "optimizer": {"type": "AdamW",
                  "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1}}
  })");
  const TrainingArguments from_file = parse_train("--model gpt2-tiny --deepspeed " + ds.path);
  const TrainingArguments from_flags = parse_train(
      "--model gpt2-tiny --bf16 --gradient-accumulation-steps 4 --max-grad-norm 0.5 "
      "--per-device-train-batch-size 2 --optim adamw_torch --learning-rate 3e-4 --adam-beta1 0.8 "
      "--adam-beta2 0.95 --adam-epsilon 1e-6 --weight-decay 0.1");
  EXPECT_EQ(from_file.deepspeed, ds.path);
  EXPECT_EQ(config_of(from_file), config_of(from_flags));
  EXPECT_TRUE(from_file.bf16);
  EXPECT_EQ(from_file.gradient_accumulation_steps, 4);
  EXPECT_EQ(from_file.adam_beta2, 0.95);
}

TEST(DeepSpeedConfig, StageThreeSetsTheFlag) {
  const DsFile ds(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "none"}}})");
  const TrainingArguments a = parse_train("--model gpt2-tiny --deepspeed " + ds.path);
  EXPECT_EQ(a.zero_stage, 3);
  EXPECT_EQ(config_of(a), config_of(parse_train("--model gpt2-tiny --zero-stage 3")));
}

// DeepSpeed's CPU optimizer offload is --offload-optimizer cpu (train/offload.h); a flag that
// says otherwise is a contradiction.
TEST(DeepSpeedConfig, OptimizerOffloadToCpuSetsTheFlag) {
  const DsFile ds(R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})");
  const TrainingArguments a = parse_train("--model gpt2-tiny --deepspeed " + ds.path);
  EXPECT_EQ(a.offload_optimizer, "cpu");
  EXPECT_EQ(config_of(a),
            config_of(parse_train("--model gpt2-tiny --zero-stage 2 --offload-optimizer cpu")));
  EXPECT_TRUE(
      HasSubstr(error_message([&] {
                  parse_train("--model gpt2-tiny --offload-optimizer none --deepspeed " + ds.path);
                }),
                "zero_optimization.offload_optimizer.device is \"cpu\", but the command line gives "
                "--offload-optimizer none"));
}

// DeepSpeed's CPU parameter offload at stage 3 is --offload-param cpu (train/offload.h).
TEST(DeepSpeedConfig, ParamOffloadToCpuSetsTheFlag) {
  const DsFile ds(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
                                            "offload_optimizer": {"device": "cpu"}}})");
  const TrainingArguments a = parse_train("--model gpt2-tiny --deepspeed " + ds.path);
  EXPECT_EQ(a.offload_param, "cpu");
  EXPECT_EQ(config_of(a), config_of(parse_train("--model gpt2-tiny --zero-stage 3 --offload-param "
                                                "cpu --offload-optimizer cpu")));
  EXPECT_TRUE(
      HasSubstr(error_message([&] {
                  parse_train("--model gpt2-tiny --offload-param none --deepspeed " + ds.path);
                }),
                "zero_optimization.offload_param.device is \"cpu\", but the command line gives "
                "--offload-param none"));
  // Below stage 3 the flag it sets is refused, naming both flags.
  const DsFile two(R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})");
  EXPECT_TRUE(HasSubstr(
      error_message([&] { parse_train("--model gpt2-tiny --deepspeed " + two.path).validate(); }),
      "--offload-param cpu with --zero-stage 2"));
}

TEST(DeepSpeedConfig, AutoTakesTheFlagsValue) {
  const DsFile ds(R"({"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto",
    "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 2000, "hysteresis": 1,
    "min_loss_scale": 1},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                               "weight_decay": "auto"}}})");
  const std::string flags =
      "--fp16 --gradient-accumulation-steps 3 --per-device-train-batch-size 5 --learning-rate 1e-3";
  EXPECT_EQ(config_of(parse_train(flags + " --deepspeed " + ds.path)),
            config_of(parse_train(flags)));
  // A flag given with the value the file states is no contradiction.
  const DsFile same(R"({"gradient_accumulation_steps": 3, "train_batch_size": 15})");
  EXPECT_EQ(parse_train(flags + " --deepspeed " + same.path).gradient_accumulation_steps, 3);
}

std::string refusal(const std::string& json, const std::string& flags = "") {
  const DsFile ds(json);
  return error_message([&] { parse_train(flags + " --deepspeed " + ds.path); });
}

TEST(DeepSpeedConfig, TheZeroStageIsTheFlags) {
  for (int stage : {1, 2}) {
    const DsFile ds(detail::concat(R"({"zero_optimization": {"stage": )", stage, "}}"));
    const TrainingArguments from_file = parse_train("--model gpt2-tiny --deepspeed " + ds.path);
    const TrainingArguments from_flags =
        parse_train(detail::concat("--model gpt2-tiny --zero-stage ", stage));
    EXPECT_EQ(from_file.zero_stage, stage);
    EXPECT_EQ(config_of(from_file), config_of(from_flags));
  }
  EXPECT_TRUE(HasSubstr(refusal(R"({"zero_optimization": {"stage": 1}})", "--zero-stage 2"),
                        "zero_optimization.stage is 1, but the command line gives --zero-stage 2"));
}

TEST(DeepSpeedConfig, EveryOtherKeyIsRefusedByItsPath) {
  EXPECT_TRUE(HasSubstr(refusal(R"({"steps_per_print": 10})"),
                        ": steps_per_print is not a key snug reads (it reads zero_optimization, "));
  EXPECT_TRUE(HasSubstr(refusal(R"({"zero_optimization": {"stage": 0, "overlap_comm": true}})"),
                        "zero_optimization.overlap_comm is not a key snug reads (it reads "
                        "zero_optimization: stage, offload_optimizer, offload_param;"));
  EXPECT_TRUE(HasSubstr(
      refusal(
          R"({"zero_optimization": {"offload_optimizer": {"device": "none", "pin_memory": true}}})"),
      "zero_optimization.offload_optimizer.pin_memory is not a key snug reads"));
  EXPECT_TRUE(
      HasSubstr(refusal(R"({"optimizer": {"type": "AdamW", "params": {"torch_adam": true}}})"),
                "optimizer.params.torch_adam is not a key snug reads"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"scheduler": {"type": "WarmupLR"}})"),
                        "scheduler is not a key snug reads"));
  // A huge key is quoted as an excerpt.
  const std::string huge(5000, 'k');
  const std::string m = refusal("{\"" + huge + "\": 1}");
  EXPECT_TRUE(HasSubstr(m, "(5000 bytes)"));
  EXPECT_LT(m.size(), 700u);
}

TEST(DeepSpeedConfig, ValuesSnugCannotHonourAreRefused) {
  EXPECT_TRUE(HasSubstr(refusal(R"({"zero_optimization": {"stage": 4}})"),
                        "zero_optimization.stage must be an integer in [0, 3] or \"auto\", got 4"));
  EXPECT_TRUE(
      HasSubstr(refusal(R"({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}})"),
                "zero_optimization.offload_optimizer.device is \"nvme\": snug does not offload "
                "the optimizer to nvme"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"zero_optimization": {"offload_param": {"device": "nvme"}}})"),
                        "zero_optimization.offload_param.device is \"nvme\": snug does not "
                        "offload parameters to nvme (\"none\" or \"cpu\" are accepted)"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"fp16": {"enabled": true, "loss_scale_window": 1000}})"),
                        "fp16.loss_scale_window is 1000; snug's loss scaler doubles the scale "
                        "after 2000 steps without overflow (torch's GradScaler), so only 2000"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"fp16": {"loss_scale": 128}})"),
                        "fp16.loss_scale is 128; snug's loss scaler is dynamic"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"fp16": {"hysteresis": 2}})"), "fp16.hysteresis is 2"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"fp16": {"initial_scale_power": 32}})"),
                        "fp16.initial_scale_power is 32"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"fp16": {"min_loss_scale": 2}})"),
                        "fp16.min_loss_scale is 2; snug's loss scaler has no floor"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"optimizer": {"type": "Lamb"}})"),
                        "optimizer.type is \"Lamb\": snug maps only \"AdamW\""));
  EXPECT_TRUE(HasSubstr(refusal(R"({"gradient_accumulation_steps": 0})"),
                        "gradient_accumulation_steps must be an integer in [1, 1048576] or "
                        "\"auto\", got 0"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"bf16": {"enabled": "yes"}})"),
                        "bf16.enabled must be true, false or \"auto\", got \"yes\""));
  EXPECT_TRUE(HasSubstr(refusal(R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})"),
                        "bf16 and fp16 are both enabled"));
  EXPECT_TRUE(HasSubstr(refusal("[1, 2]"), "the file must be a JSON object, got [1,2]"));
  EXPECT_TRUE(HasSubstr(refusal("{"), "--deepspeed "));
}

TEST(DeepSpeedConfig, AContradictionWithAGivenFlagNamesBoth) {
  EXPECT_TRUE(
      HasSubstr(refusal(R"({"gradient_accumulation_steps": 4})", "--gradient-accumulation-steps 2"),
                "gradient_accumulation_steps is 4, but the command line gives "
                "--gradient-accumulation-steps 2"));
  EXPECT_TRUE(
      HasSubstr(refusal(R"({"gradient_clipping": 1.5})", "--max-grad-norm 0.3"),
                "gradient_clipping is 1.5, but the command line gives --max-grad-norm 0.3"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"bf16": {"enabled": false}})", "--bf16"),
                        "bf16.enabled is false, but the command line gives --bf16"));
  EXPECT_TRUE(HasSubstr(refusal(R"({"optimizer": {"type": "AdamW"}})", "--optim sgd"),
                        "optimizer.type is AdamW, but the command line gives --optim sgd"));
  EXPECT_TRUE(
      HasSubstr(refusal(R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 0.95]}}})",
                        "--adam-beta2 0.99"),
                "optimizer.params.betas[1] is 0.95, but the command line gives --adam-beta2 0.99"));
}

TEST(DeepSpeedConfig, TrainBatchSizeMustMultiplyOut) {
  EXPECT_TRUE(
      HasSubstr(refusal(R"({"train_micro_batch_size_per_gpu": 2,
                                    "gradient_accumulation_steps": 3, "train_batch_size": 12})"),
                "train_batch_size is 12, but micro-batch 2 x accumulation 3 x 1 rank is 6"));
  TrainingArguments a;
  EXPECT_TRUE(HasSubstr(error_message([&] {
                          apply_deepspeed_config(
                              nlohmann::json::parse(R"({"train_batch_size": 8})"), "ds", {}, 2, a);
                        }),
                        "ds: train_batch_size is 8, but micro-batch 8 x accumulation 1 x 2 ranks "
                        "is 16"));
  apply_deepspeed_config(nlohmann::json::parse(R"({"train_batch_size": 16})"), "ds", {}, 2, a);
}

}  // namespace deepspeed_config_test
}  // namespace
}  // namespace snug
