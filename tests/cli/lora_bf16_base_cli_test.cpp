// LoRA on a 16-bit base through the `snug` command (issue 26 point 6): `--bf16-full --lora-r`
// and `--torch-dtype bfloat16|float16 --lora-r` train fp32 adapters on a frozen 16-bit base, and
//  - `snug plan` equals the measured peak to the byte (GPT-2, Llama, Qwen2 shapes; checkpointing,
//    an fp16 base, QLoRA with a bf16 base), the report saying which storage and compute ran;
//  - a resumed run continues bit for bit (bf16 base and fp32 adapters in the checkpoint);
//  - `snug export --adapter` writes F32 adapters and `snug export-init` the BF16 base;
//  - what cannot train is refused by name: a 16-bit base without adapters unless --bf16-full
//    trains it, an fp16 one in any case, an unknown --torch-dtype, and contradicting flags.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace lora_bf16_base_cli_test {

using ::testing::HasSubstr;

TEST(LoraBf16BaseCli, PlanEqualsTheMeasuredPeak) {
  TempDir tmp;
  struct Case {
    std::string flags;
    const char* param_dtype;
    const char* compute_dtype;
  };
  const Case cases[] = {
      {"--model gpt2-tiny --bf16-full --lora-r 4", "bf16", "bf16"},
      {"--model llama-tiny --bf16-full --lora-r 4 --target-modules all-linear "
       "--gradient-checkpointing --lora-dropout 0.1",
       "bf16", "bf16"},
      {"--model qwen2-tiny --torch-dtype bfloat16 --lora-r 8 --optim adamw_bnb_8bit", "bf16",
       "bf16"},
      {"--model llama-tiny --torch-dtype float16 --lora-r 4", "f16", "fp16"},
      {"--model gpt2-tiny --qlora --bf16-full --target-modules all-linear", "bf16", "bf16"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string flags = c.flags + " --per-device-train-batch-size 2 --seq-len 32";
    SCOPED_TRACE(flags);
    const PlanAndTrain pt = plan_and_train(tmp, flags, std::to_string(i++));
    ASSERT_TRUE(plan_equals_run(pt));
    EXPECT_EQ(pt.train_json["param_dtype"], c.param_dtype);
    EXPECT_EQ(pt.train_json["compute_dtype"], c.compute_dtype);
    // Gradients: the fp32 adapters' only.
    EXPECT_EQ(pt.train_json["memory"]["max_by_category"]["gradients"].get<int64_t>(),
              4 * pt.plan_json["config"]["trainable_params"].get<int64_t>());
  }
}

TEST(LoraBf16BaseCli, ResumesBitForBitAndExportsFp32AdaptersOnTheBf16Base) {
  TempDir tmp;
  const std::string run =
      " --model gpt2-tiny --bf16-full --lora-r 4 --lora-alpha 8 --target-modules c_attn,c_fc "
      "--seq-len 32 --per-device-train-batch-size 2 --learning-rate 1e-2 --seed 3";
  const std::string out = tmp.path("out");
  ASSERT_TRUE(resumes_bit_for_bit(tmp, run, run));
  CliResult r;
  // The checkpoint holds the base as BF16 and the adapters as F32.
  {
    const SafetensorsFile ck(out + "/checkpoint-6/model.safetensors");
    EXPECT_EQ(ck.info("transformer.h.0.attn.c_attn.weight").dtype, "BF16");
    EXPECT_EQ(ck.info("transformer.h.0.attn.c_attn.lora_A.weight").dtype, "F32");
  }
  r = run_snug("export --adapter -o " + tmp.path("adapter") + " --checkpoint " + out + run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile ad(tmp.path("adapter") + "/adapter_model.safetensors");
  EXPECT_EQ(ad.names().size(), 16u);  // 4 layers x 2 modules x A, B
  for (const std::string& n : ad.names()) EXPECT_EQ(ad.info(n).dtype, "F32") << n;
  r = run_snug("export-init -o " + tmp.path("base") + run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json cfg = read_json(tmp.path("base") + "/config.json");
  EXPECT_EQ(cfg["dtype"], "bfloat16");
  const SafetensorsFile base(tmp.path("base") + "/model.safetensors");
  EXPECT_EQ(base.info("transformer.h.0.attn.c_attn.weight").dtype, "BF16");
  for (const std::string& n : base.names())
    EXPECT_EQ(n.find("lora_"), std::string::npos) << n << ": the base holds no adapter";
}

TEST(LoraBf16BaseCli, WhatCannotTrainIsRefusedByName) {
  const std::string shape = " --model gpt2-tiny --seq-len 32 --max-steps 1";
  // A command line, and what its one error message says.
  const std::vector<std::pair<std::string, std::vector<std::string>>> refused = {
      {"train --torch-dtype bfloat16", {"--torch-dtype bfloat16 stores", "add --bf16-full"}},
      {"train --torch-dtype float16", {"fp16 parameters do not train"}},
      {"train --torch-dtype float64", {"--torch-dtype: unknown dtype 'float64'"}},
      {"train --bf16-full --torch-dtype float32 --lora-r 4",
       {"--bf16-full stores bf16; --torch-dtype float32 contradicts it"}},
      {"train --fp16 --torch-dtype bfloat16 --lora-r 4", {"--fp16 computes in fp16"}},
      {"plan --bf16 --torch-dtype float16 --lora-r 4", {"--bf16 computes in bf16"}},
  };
  for (const auto& [command, says] : refused) {
    SCOPED_TRACE(command);
    const CliResult r = run_snug(command + shape);
    EXPECT_EQ(r.exit_code, 1);
    for (const std::string& part : says) EXPECT_THAT(r.err, HasSubstr(part));
  }
}

}  // namespace lora_bf16_base_cli_test
}  // namespace
}  // namespace snug::test
