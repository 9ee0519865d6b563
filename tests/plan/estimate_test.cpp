// The closed-form estimate (plan/estimate.h) against the dry run's exact bytes: model states
// within 10% for the GPT-2 presets, and Korthikanti's activation formula as published.
#include "plan/estimate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "plan/what_if.h"
#include "support/configs.h"
#include "support/memory_checks.h"

namespace snug {
namespace {
namespace estimate_test {

using test::at;

int64_t plan_states(const MemoryStats& m) {
  return at(m.max_by_category, Category::weights) + at(m.max_by_category, Category::gradients) +
         at(m.max_by_category, Category::optimizer_state);
}

TEST(Estimate, ModelStatesWithinTenPercentOfThePlanForThePresets) {
  for (const char* model : {"gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b"})
    for (const char* optim : {"adamw_torch", "adafactor", "adamw_bnb_8bit", "sgd", "lion"})
      for (bool bf16 : {false, true}) {
        TrainingArguments a;
        a.model = model;
        a.optim = optim;
        a.bf16 = bf16;
        a.per_device_train_batch_size = 2;
        a.seq_len = 256;
        const MemoryEstimate est = estimate_memory(a);
        const MemoryStats plan = dry_run(a);
        const double ratio =
            static_cast<double>(est.model_states()) / static_cast<double>(plan_states(plan));
        EXPECT_NEAR(ratio, 1.0, 0.10) << model << " " << optim << (bf16 ? " bf16" : " fp32");
      }
}

TEST(Estimate, Fp32AdamWIsSixteenBytesPerParameterExactly) {
  TrainingArguments a;
  a.model = "gpt2-124m";
  const MemoryEstimate est = estimate_memory(a);
  EXPECT_EQ(est.params, 124439808);
  EXPECT_EQ(est.model_states(), 16 * est.params);
  EXPECT_EQ(est.model_states(), plan_states(dry_run(a)));
}

// LoRA and a quantized base: model states and quant_state by storage, equal to the plan's.
TEST(Estimate, LoraAndQuantizedBaseAreExact) {
  for (int storage = 0; storage < 3; ++storage) {
    TrainingArguments a;
    a.model = "gpt2-124m";
    a.lora_r = 8;
    a.target_modules = "all-linear";
    a.load_in_8bit = storage == 1;
    if (storage == 2) a.apply_qlora_recipe();
    const MemoryEstimate est = estimate_memory(a);
    const MemoryStats plan = dry_run(a);
    EXPECT_EQ(est.model_states(), plan_states(plan)) << storage;
    EXPECT_EQ(est.bytes[static_cast<int>(Category::quant_state)],
              at(plan.max_by_category, Category::quant_state))
        << storage;
  }
}

TEST(Estimate, KorthikantiActivationsAsPublished) {
  // 16-bit, attention scores stored: sbhL(34 + 5as/h).
  TrainingArguments a = test::args_of({.model = "gpt2-124m", .seq_len = 128, .batch = 2});
  a.attention = "naive";
  a.bf16 = true;
  const int64_t s = 128, b = 2, h = 768, L = 12, heads = 12;
  EXPECT_EQ(korthikanti_activation_bytes(a), s * b * h * L * 34 + 5 * heads * s * s * b * L);
  // Flash attention drops the as^2b term; fp32 doubles the 2-byte tensors (not the masks).
  a.attention = "flash";
  EXPECT_EQ(korthikanti_activation_bytes(a), s * b * h * L * 34);
  a.bf16 = false;
  EXPECT_EQ(korthikanti_activation_bytes(a), s * b * h * L * 66);
  // Full checkpointing: each layer's input plus one layer being recomputed.
  a.gradient_checkpointing = true;
  EXPECT_EQ(korthikanti_activation_bytes(a), L * 4 * s * b * h + s * b * h * 66);
  // Full logits add the fp32 (s,b,v) logits.
  a.gradient_checkpointing = false;
  a.logits = "full";
  EXPECT_EQ(korthikanti_activation_bytes(a), s * b * h * L * 66 + 4 * s * b * 50257);
}

TEST(Estimate, Fp32FlashActivationsAreCloseToThePlan) {
  // snug keeps 64 sbh of fp32 tensors per layer plus LayerNorm statistics and the flash LSE;
  // the formula's 66 sbh counts two dropout masks snug does not have: a few percent apart.
  TrainingArguments a;
  a.model = "gpt2-124m";
  a.per_device_train_batch_size = 4;
  a.seq_len = 512;
  const MemoryEstimate est = estimate_memory(a);
  const double ratio = static_cast<double>(at(est.bytes, Category::activations)) /
                       static_cast<double>(at(dry_run(a).max_by_category, Category::activations));
  EXPECT_NEAR(ratio, 1.0, 0.05);
}

}  // namespace estimate_test
}  // namespace
}  // namespace snug
