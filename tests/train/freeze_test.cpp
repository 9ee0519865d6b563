// --freeze: frozen parameters get no gradient buffer and no optimizer state (exact bytes on
// meta for gpt2-124m), keep their weights bit for bit in a real run, and the rest still trains.
#include "train/freeze.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "optim/optimizer.h"
#include "plan/what_if.h"
#include "support/memory_checks.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace freeze_test {

using ::testing::HasSubstr;

using test::at;

TEST(Freeze, GlobMatchesTheWholeNameSubstringAnyPart) {
  EXPECT_TRUE(freeze_pattern_matches("transformer.h.*", "transformer.h.0.attn.c_attn.weight"));
  EXPECT_FALSE(freeze_pattern_matches("transformer.h.*", "transformer.wte.weight"));
  EXPECT_TRUE(freeze_pattern_matches("transformer.wte.*", "transformer.wte.weight"));
  EXPECT_TRUE(freeze_pattern_matches("transformer.h.[0-1].*", "transformer.h.1.ln_1.bias"));
  EXPECT_FALSE(freeze_pattern_matches("transformer.h.[0-1].*", "transformer.h.2.ln_1.bias"));
  EXPECT_FALSE(freeze_pattern_matches("transformer.h.1.*", "transformer.h.10.ln_1.bias"));
  EXPECT_TRUE(freeze_pattern_matches("*.ln_?.weight", "transformer.h.3.ln_2.weight"));
  // A glob is anchored: "h.0.*" is not a prefix of the full name.
  EXPECT_FALSE(freeze_pattern_matches("h.0.*", "transformer.h.0.mlp.c_fc.weight"));
  // No glob character: substring.
  EXPECT_TRUE(freeze_pattern_matches("attn.c_attn", "transformer.h.5.attn.c_attn.bias"));
  EXPECT_TRUE(freeze_pattern_matches("transformer.wte", "transformer.wte.weight"));
  EXPECT_FALSE(freeze_pattern_matches("wte.bias", "transformer.wte.weight"));
}

TEST(Freeze, CountsTensorsOnceAndRejectsPatternsMatchingNothing) {
  Device dev(meta_backend());
  GPT2 model(resolve_gpt2("gpt2-tiny"), dev);
  const int64_t n_layer = model.config().n_layer;
  EXPECT_EQ(apply_freeze(model.parameters(), {"transformer.h.0.*", "transformer.h.0.ln_1.weight"}),
            12);  // 12 tensors per block; the second pattern adds none
  int64_t frozen = 0;
  for (const Parameter* p : model.parameters()) frozen += p->requires_grad ? 0 : 1;
  EXPECT_EQ(frozen, 12);
  EXPECT_EQ(apply_freeze(model.parameters(), {"transformer.h.*"}), 12 * n_layer);

  GPT2 fresh(resolve_gpt2("gpt2-tiny"), dev);
  try {
    apply_freeze(fresh.parameters(), {"transformer.wte.*", "transformer.h.99.*"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--freeze 'transformer.h.99.*' matches no parameter"));
    EXPECT_THAT(e.what(), HasSubstr("transformer.wte.weight"));  // shows what names look like
  }
  // Nothing was frozen by the call that failed.
  for (const Parameter* p : fresh.parameters()) EXPECT_TRUE(p->requires_grad) << p->name;
  EXPECT_THROW(apply_freeze(fresh.parameters(), {""}), Error);
}

// gpt2-124m with every block frozen: only wte, wpe and ln_f train. Gradients hold exactly 4 bytes
// and AdamW's state exactly 8 bytes per trainable parameter; weights are still all there.
TEST(Freeze, MetaGpt2SmallBlocksFrozenHoldOnlyTheRestsGradientsAndState) {
  const GPT2Config cfg = resolve_gpt2("gpt2-124m");
  const int64_t V = cfg.vocab_size, P = cfg.n_positions, C = cfg.n_embd;
  const int64_t trainable = V * C + P * C + 2 * C;  // wte, wpe, ln_f weight and bias
  EXPECT_EQ(trainable, 39385344);

  TrainingArguments a;
  a.model = "gpt2-124m";
  a.seq_len = 64;
  a.per_device_train_batch_size = 2;
  a.freeze = {"transformer.h.*"};
  const MemoryStats frozen = dry_run(a);
  EXPECT_EQ(at(frozen.max_by_category, Category::gradients), 4 * trainable);
  EXPECT_EQ(at(frozen.max_by_category, Category::optimizer_state), 8 * trainable);
  EXPECT_EQ(at(frozen.max_by_category, Category::weights), 4 * cfg.num_params());

  // The same on a model the test builds: the Trainer froze exactly those.
  Device dev(meta_backend());
  GPT2 model(cfg, dev);
  a.device = "meta";
  a.max_steps = 1;
  Trainer trainer(a, model, nullptr);
  EXPECT_EQ(count_params(model.parameters(), true), trainable);
  EXPECT_EQ(state_bytes_formula("adamw_torch", model.parameters(), {}), 8 * trainable);
  EXPECT_EQ(state_bytes_formula("sgd", model.parameters(), {}), 0);

  // Unfrozen, the same run holds 4 and 8 bytes for every parameter.
  a.freeze.clear();
  const MemoryStats all = dry_run(a);
  EXPECT_EQ(at(all.max_by_category, Category::gradients), 4 * cfg.num_params());
  EXPECT_EQ(at(all.max_by_category, Category::optimizer_state), 8 * cfg.num_params());
}

TEST(Freeze, RealRunKeepsFrozenWeightsBitwiseAndStillLearns) {
  const GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  Device dev(cpu_backend());
  GPT2 model(cfg, dev);
  model.init_weights(5);
  TrainingArguments a;
  a.seq_len = 32;
  a.per_device_train_batch_size = 4;
  a.max_steps = 12;
  a.learning_rate = 3e-3;
  a.freeze = {"transformer.h.0.*", "transformer.wpe"};
  auto data = open_dataset(a.data, cfg.vocab_size, a.seed);
  std::vector<std::vector<float>> before;
  for (const Parameter* p : model.parameters())
    before.emplace_back(p->value.data<float>(), p->value.data<float>() + p->value.numel());
  Trainer trainer(a, model, data.get());
  const TrainResult r = trainer.train();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.loss.size(), 12u);
  EXPECT_LT(r.loss.back(), r.loss.front() - 0.3) << "the unfrozen parameters still learn";

  int64_t frozen = 0, trainable = 0;
  const ParameterList& params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    const bool same =
        std::memcmp(before[i].data(), p.value.data<float>(), sizeof(float) * before[i].size()) == 0;
    if (!p.requires_grad) {
      ++frozen;
      EXPECT_TRUE(same) << p.name << " is frozen but changed";
    } else {
      trainable += p.value.numel();
      EXPECT_FALSE(same) << p.name << " trains but did not change";
    }
  }
  EXPECT_EQ(frozen, 12 + 1);
  const MemoryStats mem = dev.pool().stats();
  EXPECT_EQ(at(mem.max_by_category, Category::gradients), 4 * trainable);
  EXPECT_EQ(at(mem.max_by_category, Category::optimizer_state), 8 * trainable);
}

}  // namespace freeze_test
}  // namespace
}  // namespace snug
