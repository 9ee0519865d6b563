// The llama, mistral, qwen2 and gpt_neox families through the `snug` command, on their tiny
// presets and the built-in data:
//  - each trains with LoRA and with QLoRA (Hugging Face module names) and its loss falls;
//  - techniques x families, pairwise: a strength-2 covering array (the 16-row orthogonal array
//    of five 4-level factors over GF(4): family, precision, checkpointing, optimizer, extra
//    technique, plus fp32 copies of the rows whose --bf16-full conflicts with the optimizer or
//    LoRA), each row's `snug plan` peak and per-category maxima equal to a real run's to the byte;
//  - `snug plan` on the llama-7b shape with QLoRA, checkpointing and bf16 at 1 x 2048 prints
//    (its time is docs/benchmarks.md's, not an assertion).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "support/covering_array.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace decoder_families_cli_test {

using ::testing::HasSubstr;

struct Family {
  const char* preset;
  const char* embeddings;  // for --freeze
  const char* attention;   // PEFT's default LoRA targets for the model_type
};
const std::array<Family, 4> kFamilies = {
    {{"llama-tiny", "model.embed_tokens", "q_proj,v_proj"},
     {"mistral-tiny", "model.embed_tokens", "q_proj,v_proj"},
     {"qwen2-tiny", "model.embed_tokens", "q_proj,v_proj"},
     {"gpt-neox-tiny", "gpt_neox.embed_in", "query_key_value"}}};

TEST(DecoderFamiliesCli, EachFamilyTrainsWithLoraAndQloraAndItsLossFalls) {
  TempDir tmp;
  for (const Family& f : kFamilies)
    for (const char* recipe : {"--lora-r 8 --lora-alpha 16", "--qlora"}) {
      SCOPED_TRACE(std::string(f.preset) + " " + recipe);
      nlohmann::json j;
      ASSERT_TRUE(train_report(std::string("--model ") + f.preset + " " + recipe +
                                   " --target-modules all-linear --data builtin --seq-len 64"
                                   " --per-device-train-batch-size 8 --max-steps 40"
                                   " --learning-rate 1e-2",
                               tmp.path(std::string(f.preset) + ".json"), &j));
      EXPECT_TRUE(loss_falls(j, 40, 0.3));
      EXPECT_EQ(j["model"]["name"], f.preset);
    }
}

TEST(DecoderFamiliesCli, TechniquesTimesFamiliesPairwisePlanEqualsTheMeasuredPeak) {
  auto extra = [](int level, const Family& f) -> std::string {
    switch (level) {
      case 0:
        return " --gradient-accumulation-steps 2";
      case 1:
        return std::string(" --freeze ") + f.embeddings;
      case 2:
        return " --neftune-noise-alpha 5";
      default:
        return std::string(" --load-in-8bit --lora-r 4 --target-modules ") + f.attention;
    }
  };
  const std::vector<TechniqueRow> rows = techniques_covering_array();  // support/covering_array.h
  ASSERT_EQ(rows.size(), 20u);
  TempDir tmp;
  int i = 0;
  for (const TechniqueRow& r : rows) {
    const Family& f = kFamilies[static_cast<size_t>(r.model)];
    const std::string flags = std::string(" --model ") + f.preset +
                              " --data builtin --per-device-train-batch-size 4 --seq-len 48" +
                              shared_technique_flags(r) + extra(r.extra, f);
    SCOPED_TRACE(flags);
    const PlanAndTrain pt = plan_and_train(tmp, flags, std::to_string(i++));
    ASSERT_TRUE(plan_equals_run(pt));
    EXPECT_GT(pt.train_json["memory"]["peak_bytes"].get<int64_t>(), 0);
  }
}

// QLoRA, the seeds' way, on each family: plan equals the measured peak.
TEST(DecoderFamiliesCli, QloraPlanEqualsTheMeasuredPeak) {
  TempDir tmp;
  int i = 0;
  for (const Family& f : kFamilies) {
    const std::string flags = std::string(" --model ") + f.preset +
                              " --qlora --target-modules all-linear --gradient-checkpointing"
                              " --bf16 --data builtin --per-device-train-batch-size 2"
                              " --seq-len 64";
    SCOPED_TRACE(flags);
    const PlanAndTrain pt = plan_and_train(tmp, flags, "q" + std::to_string(i++));
    ASSERT_TRUE(plan_equals_run(pt));
  }
}

// Issue 17, acceptance 4: the llama-7b shape with QLoRA, checkpointing and bf16 at 1 x 2048
// plans. How long it takes ("under 10 s") is measured, not asserted (no timed assertions in
// tests): docs/benchmarks.md records the command, the seconds and the machine.
TEST(DecoderFamiliesCli, Llama7bQloraPlans) {
  const CliResult r = run_snug(
      "plan --model llama-7b --qlora --gradient-checkpointing --bf16 "
      "--per-device-train-batch-size 1 --seq-len 2048",
      60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("llama-7b (6738.42M parameters)"));
  // --qlora trains every linear layer (all-linear, as the QLoRA paper), rank 8: per layer q, k,
  // v, o at 8 x (4096 + 4096) and gate, up, down at 8 x (4096 + 11008); 32 layers.
  EXPECT_THAT(r.out, HasSubstr("LoRA: 19988480 of 6758404096 parameters train"));
}

// Mistral beyond its window (mistral-tiny: 256 of 512 positions): plan equals the measured peak.
TEST(DecoderFamiliesCli, MistralBeyondItsSlidingWindowPlansAndTrains) {
  TempDir tmp;
  const PlanAndTrain pt = plan_and_train(
      tmp, " --model mistral-tiny --data builtin --per-device-train-batch-size 1 --seq-len 300",
      "w");
  ASSERT_EQ(pt.plan.exit_code, 0) << pt.plan.err;
  ASSERT_EQ(pt.train.exit_code, 0) << pt.train.err;
  EXPECT_EQ(pt.plan_json["memory"]["peak_bytes"], pt.train_json["memory"]["peak_bytes"]);
}

TEST(DecoderFamiliesCli, UnsupportedConfigsAreRefusedByName) {
  TempDir tmp;
  const std::string cfg = tmp.path("config.json");
  {
    std::FILE* fp = std::fopen(cfg.c_str(), "w");
    ASSERT_NE(fp, nullptr);
    std::fputs(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 256,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})",
               fp);
    std::fclose(fp);
  }
  const CliResult y = run_snug("plan --model " + cfg);
  EXPECT_EQ(y.exit_code, 1) << y.err;
  EXPECT_THAT(y.err, HasSubstr("config.json: config.json key 'rope_scaling'"));
  EXPECT_THAT(y.err, HasSubstr("'yarn'"));
}

}  // namespace decoder_families_cli_test
}  // namespace
}  // namespace snug::test
