// LoRA adapters on GPT-2: PEFT's parameter count and shapes, finite-difference gradients of the
// bypass (adapters and the input gradient it adds), the merged weight reproducing the adapted
// model, dropout masks that survive recomputation, and exact memory on meta.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/device.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "plan/what_if.h"
#include "support/configs.h"
#include "support/random.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace lora_test {

LoraConfig lora(int64_t r, const std::vector<std::string>& targets, double dropout = 0.0) {
  LoraConfig c;
  c.r = r;
  c.alpha = 2.0 * static_cast<double>(r);
  c.dropout = dropout;
  c.target_modules = targets;
  return c;
}

// Random B (PEFT starts it at zero, which would make A's gradient and the bypass vanish).
void randomize_b(GPT2& model, uint64_t seed) {
  for (const auto& ad : model.lora_adapters()) {
    const auto v = test::random_floats(ad.B->value.numel(), seed++, -0.2f, 0.2f);
    std::copy(v.begin(), v.end(), ad.B->value.data<float>());
  }
}

TEST(Lora, TrainableParametersAreTheAdaptersWithPeftsCount) {
  Device meta(meta_backend());
  GPT2 model(resolve_gpt2("gpt2-124m"), meta);
  model.add_lora(lora(8, {"c_attn"}), 1);
  // Per layer A (8, 768) + B (2304, 8): PEFT prints "trainable params: 294,912".
  EXPECT_EQ(count_params(model.parameters(), true), 294912);
  EXPECT_EQ(count_params(model.parameters()), 124439808 + 294912);
  ASSERT_EQ(model.lora_adapters().size(), 12u);
  EXPECT_EQ(model.lora_adapters()[3].module, "transformer.h.3.attn.c_attn");
  EXPECT_EQ(model.lora_adapters()[3].A->name, "transformer.h.3.attn.c_attn.lora_A.weight");
  EXPECT_EQ(model.lora_adapters()[3].A->value.shape(), (Shape{8, 768}));
  EXPECT_EQ(model.lora_adapters()[3].B->value.shape(), (Shape{2304, 8}));
  for (const Parameter* p : model.parameters())
    EXPECT_EQ(p->requires_grad, p->name.find(".lora_") != std::string::npos) << p->name;

  // "c_proj" adapts both attn.c_proj and mlp.c_proj, as PEFT's suffix match does.
  GPT2 both(resolve_gpt2("gpt2-124m"), meta);
  both.add_lora(lora(4, {"c_proj"}), 1);
  EXPECT_EQ(count_params(both.parameters(), true), 12 * (4 * 768 + 768 * 4 + 4 * 3072 + 768 * 4));
  GPT2 all(resolve_gpt2("gpt2-124m"), meta);
  all.add_lora(lora(8, {"all-linear"}), 1);
  EXPECT_EQ(all.lora_adapters().size(), 48u);
}

TEST(Lora, UnknownTargetModuleIsAnErrorNamingIt) {
  Device meta(meta_backend());
  GPT2 model(resolve_gpt2("gpt2-tiny"), meta);
  try {
    model.add_lora(lora(8, {"c_attn", "q_proj"}), 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q_proj'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(model.lora_adapters().empty());
  EXPECT_TRUE(model.parameters()[0]->requires_grad);  // nothing changed
}

// The adapters' gradients follow from the merged model's by the chain rule: with
// W' = W + s A^T B^T (Conv1D (in,out)), dA = s B^T dW'^T and dB = s dW'^T A^T; and the input
// gradient the bypass adds reaches wpe exactly as the merged model's does. (The bypass kernels
// themselves are checked against finite differences in tests/kernels/lora_kernel_test.cpp.)
TEST(Lora, GradientsAreTheMergedModelsByTheChainRule) {
  Device cpu(cpu_backend());
  const GPT2Config cfg = test::odd_config();
  GPT2 adapted(cfg, cpu);
  adapted.init_weights(5);
  adapted.add_lora(lora(3, {"all-linear"}), 7);
  randomize_b(adapted, 100);
  adapted.find("transformer.wpe.weight")->requires_grad = true;
  GPT2 merged(cfg, cpu);
  merged.init_weights(5);
  for (const auto& ad : adapted.lora_adapters()) {
    const std::vector<float> w = adapted.merged_weight(ad);
    std::copy(w.begin(), w.end(), merged.find(ad.base->name)->value.data<float>());
  }
  const int64_t B = 2, T = 7;
  const auto in = test::random_ints(B * T, 3, 0, 300);
  const auto tg = test::random_ints(B * T, 4, 0, 300);
  const float la = adapted.forward(in.data(), tg.data(), B, T);
  adapted.backward();
  const float lm = merged.forward(in.data(), tg.data(), B, T);
  merged.backward();
  EXPECT_NEAR(la, lm, 1e-5f);
  auto close = [](const float* x, const std::vector<double>& y, const std::string& what) {
    double scale = 1e-6, worst = 0;
    for (double v : y) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]) / scale);
    EXPECT_LT(worst, 1e-4) << what;
  };
  const double s = adapted.lora_config().scaling();
  for (const auto& ad : adapted.lora_adapters()) {
    const int64_t r = 3, IC = ad.A->value.dim(1), OC = ad.B->value.dim(0);
    const float* dW = merged.find(ad.base->name)->grad.data<float>();  // (IC, OC)
    const float* A = ad.A->value.data<float>();
    const float* Bv = ad.B->value.data<float>();
    std::vector<double> dA(static_cast<size_t>(r * IC)), dB(static_cast<size_t>(OC * r));
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < IC; ++i)
        for (int64_t o = 0; o < OC; ++o) dA[k * IC + i] += s * Bv[o * r + k] * dW[i * OC + o];
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t k = 0; k < r; ++k)
        for (int64_t i = 0; i < IC; ++i) dB[o * r + k] += s * dW[i * OC + o] * A[k * IC + i];
    close(ad.A->grad.data<float>(), dA, ad.A->name);
    close(ad.B->grad.data<float>(), dB, ad.B->name);
  }
  const Parameter* wpe_a = adapted.find("transformer.wpe.weight");
  const Parameter* wpe_m = merged.find("transformer.wpe.weight");
  close(wpe_a->grad.data<float>(),
        std::vector<double>(wpe_m->grad.data<float>(),
                            wpe_m->grad.data<float>() + wpe_m->grad.numel()),
        "wpe");
}

TEST(Lora, MergedWeightsGiveTheAdaptedModelsLogits) {
  Device cpu(cpu_backend());
  const GPT2Config cfg = test::odd_config();
  GPT2 adapted(cfg, cpu);
  adapted.init_weights(5);
  adapted.add_lora(lora(4, {"c_attn", "mlp.c_proj"}), 7);
  randomize_b(adapted, 200);
  GPT2 merged(cfg, cpu);
  merged.init_weights(5);
  for (const auto& ad : adapted.lora_adapters()) {
    const std::vector<float> w = adapted.merged_weight(ad);
    std::copy(w.begin(), w.end(), merged.find(ad.base->name)->value.data<float>());
  }
  const int64_t B = 2, T = 9;
  const auto in = test::random_ints(B * T, 8, 0, 300);
  adapted.set_logits_mode(LogitsMode::full);
  merged.set_logits_mode(LogitsMode::full);
  adapted.forward(in.data(), nullptr, B, T, false);
  merged.forward(in.data(), nullptr, B, T, false);
  const float* a = adapted.logits().data<float>();
  const float* m = merged.logits().data<float>();
  double worst = 0;
  for (int64_t i = 0; i < adapted.logits().numel(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - m[i])));
  EXPECT_LT(worst, 1e-5);
  // And the adapters really changed the model.
  GPT2 base(cfg, cpu);
  base.init_weights(5);
  base.set_logits_mode(LogitsMode::full);
  base.forward(in.data(), nullptr, B, T, false);
  EXPECT_GT(std::fabs(base.logits().data<float>()[3] - a[3]), 1e-4);
}

struct Grads {
  float loss = 0;
  std::vector<std::vector<float>> g;
};

Grads lora_step(const std::string& policy, double dropout, bool train = true) {
  Device cpu(cpu_backend());
  GPT2 model(test::odd_config(), cpu);
  model.init_weights(5);
  model.add_lora(lora(4, {"all-linear"}, dropout), 7);
  randomize_b(model, 300);
  model.set_checkpointing(parse_checkpoint_policy(policy, 3));
  const int64_t B = 2, T = 11;
  const auto in = test::random_ints(B * T, 9, 0, 300);
  const auto tg = test::random_ints(B * T, 10, 0, 300);
  Grads r;
  r.loss = model.forward(in.data(), tg.data(), B, T, train);
  if (!train) return r;
  model.backward();
  for (const Parameter* p : model.parameters())
    if (p->grad.defined())
      r.g.emplace_back(p->grad.data<float>(), p->grad.data<float>() + p->grad.numel());
  EXPECT_EQ(cpu.pool().live(Category::activations), 0);
  EXPECT_EQ(cpu.pool().live(Category::temporary), 0);
  return r;
}

TEST(Lora, CheckpointingRecomputesTheSameDropoutMasks) {
  const Grads none = lora_step("none", 0.25);
  EXPECT_EQ(none.g.size(), 24u);  // 12 adapters x (A, B); nothing else has a gradient
  for (const char* policy : {"every-layer", "every-k:2", "selective"}) {
    SCOPED_TRACE(policy);
    const Grads r = lora_step(policy, 0.25);
    EXPECT_EQ(std::memcmp(&r.loss, &none.loss, sizeof(float)), 0);
    ASSERT_EQ(r.g.size(), none.g.size());
    for (size_t i = 0; i < r.g.size(); ++i)
      EXPECT_EQ(std::memcmp(r.g[i].data(), none.g[i].data(), r.g[i].size() * sizeof(float)), 0)
          << "gradient " << i;
  }
}

TEST(Lora, DropoutActsInTrainingOnly) {
  EXPECT_NE(lora_step("none", 0.25).loss, lora_step("none", 0.0).loss);
  EXPECT_EQ(lora_step("none", 0.25, false).loss, lora_step("none", 0.0, false).loss);
}

TEST(Lora, NeftuneNoiseInTrainingOnly) {
  Device cpu(cpu_backend());
  GPT2 model(test::odd_config(), cpu);
  model.init_weights(5);
  const int64_t B = 2, T = 11;
  const auto in = test::random_ints(B * T, 9, 0, 300);
  const auto tg = test::random_ints(B * T, 10, 0, 300);
  const float clean = model.forward(in.data(), tg.data(), B, T, true);
  model.free_activations();
  model.set_neftune_noise_alpha(5.0);
  const float noisy = model.forward(in.data(), tg.data(), B, T, true);
  model.free_activations();
  const float eval = model.forward(in.data(), tg.data(), B, T, false);
  EXPECT_NE(noisy, clean);
  EXPECT_EQ(eval, clean);
}

TEST(Lora, GradientsAndOptimizerStateHoldAdaptersOnlyExactly) {
  // gpt2-124m, r = 8 on c_attn, AdamW: a dry run's categories, to the byte.
  TrainingArguments a;
  a.model = "gpt2-124m";
  a.seq_len = 128;
  a.per_device_train_batch_size = 2;
  a.lora_r = 8;
  a.lora_alpha = 16;
  const MemoryStats m = dry_run(a);
  const int64_t P = 124439808, Pa = 294912;
  EXPECT_EQ(m.max_by_category[static_cast<int>(Category::weights)], 4 * (P + Pa));
  EXPECT_EQ(m.max_by_category[static_cast<int>(Category::gradients)], 4 * Pa);
  EXPECT_EQ(m.max_by_category[static_cast<int>(Category::optimizer_state)], 8 * Pa);
  // Full fine-tuning for comparison: 4P of gradients.
  a.lora_r = 0;
  EXPECT_EQ(dry_run(a).max_by_category[static_cast<int>(Category::gradients)], 4 * P);
}

TEST(Lora, LossFallsOnTheBuiltInData) {
  const TrainingArguments a = test::small_lora_run(/*r=*/8, /*max_steps=*/30);
  Device cpu(cpu_backend());
  GPT2 model(a.model_config(), cpu);
  model.init_weights(a.seed);
  const auto data = open_dataset(a.data, model.config().vocab_size, a.seed);
  Trainer t(a, model, data.get());
  const TrainResult r = t.train();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.loss.size(), 30u);
  EXPECT_LT(r.loss.back(), 0.9 * r.loss.front()) << r.loss.front() << " -> " << r.loss.back();
}

}  // namespace lora_test
}  // namespace
}  // namespace snug
