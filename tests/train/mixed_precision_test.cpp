// Mixed precision (--bf16 / --fp16), to the byte and to the value:
//  - weights peak at 4P of fp32 masters plus 2 bytes per compute-copied GEMM weight; gradients
//    and optimizer state are AdamW's fp32 4P and 8P; the copies are gone after the run;
//  - saved activations equal the closed form with the 16-bit tensors at 2 bytes;
//  - meta reports what cpu measures;
//  - gradients stay close to fp32's (the error of 16-bit rounding, not of a bug);
//  - fp16's loss scaler skips a step whose gradients overflowed and halves its scale, and grows
//    it after growth_interval good steps (GradScaler's rules).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/compare.h"
#include "support/configs.h"
#include "support/memory_checks.h"
#include "support/random.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace mixed_precision_test {

using test::at;

using test::odd_config;
using test::rel_l2;

TrainingArguments args(int64_t B, int64_t T, int64_t steps, bool fp16) {
  TrainingArguments a;
  a.per_device_train_batch_size = B;
  a.seq_len = T;
  a.max_steps = steps;
  a.data = "dummy";
  a.fp16 = fp16;
  a.bf16 = !fp16;
  return a;
}

struct RunOutcome {
  MemoryStats mem;
  TrainResult result;
  std::vector<std::vector<float>> weights;
  int64_t copies = 0;
};

RunOutcome train_on(const Backend& kind, const GPT2Config& cfg, const TrainingArguments& a,
                    std::optional<GradScalerOptions> scaler = std::nullopt) {
  Device dev(kind);
  GPT2 model(cfg, dev);
  model.init_weights(a.seed);
  auto data = open_dataset(a.data, cfg.vocab_size, a.seed);
  Trainer trainer(a, model, data.get());
  if (scaler) trainer.set_grad_scaler_options(*scaler);
  RunOutcome r;
  r.result = trainer.train();
  r.mem = dev.pool().stats();
  r.copies = model.num_compute_copy_params();
  if (!dev.is_meta())
    for (Parameter* p : model.parameters())
      r.weights.emplace_back(p->value.data<float>(), p->value.data<float>() + p->value.numel());
  return r;
}

// What forward keeps (GPT2LayerActivations) with ln1, qkv, atty, ln2, fch, fch_gelu (14 BTC)
// and naive attention's probabilities at 2 bytes; res2, out (2 BTC), the LayerNorm statistics
// (4 BT), flash's log-sum-exps, the embeddings and ln_f (2 BTC + 2 BT) and full logits at 4.
int64_t expected_half_activations(const GPT2Config& c, int64_t B, int64_t T, bool naive,
                                  bool full_logits) {
  const int64_t C = c.n_embd, BT = B * T, NH = c.n_head;
  const int64_t per_layer =
      2 * 14 * BT * C + 4 * (2 * BT * C + 4 * BT) + (naive ? 2 * NH * B * T * T : 4 * NH * BT);
  return c.n_layer * per_layer + 4 * (2 * BT * C + 2 * BT) +
         (full_logits ? 4 * (BT * c.vocab_size + BT) : 0);
}

TEST(MixedPrecision, WeightsAreFp32MastersPlusHalfCopies) {
  for (bool fp16 : {false, true}) {
    const RunOutcome r = train_on(cpu_backend(), odd_config(), args(2, 16, 2, fp16));
    ASSERT_TRUE(r.result.error.empty()) << r.result.error;
    const int64_t P = odd_config().num_params();
    const int64_t C = odd_config().n_embd;
    // wte plus the four Linear weights of each layer (12 C^2 per layer).
    EXPECT_EQ(r.copies, odd_config().vocab_size * C + odd_config().n_layer * 12 * C * C);
    EXPECT_EQ(at(r.mem.max_by_category, Category::weights), 4 * P + 2 * r.copies);
    EXPECT_EQ(at(r.mem.max_by_category, Category::gradients), 4 * P);
    EXPECT_EQ(at(r.mem.max_by_category, Category::optimizer_state), 8 * P);
    EXPECT_EQ(r.mem.live_total, 12 * P);  // the compute copies die with backward
  }
}

TEST(MixedPrecision, ActivationsMatchClosedForm) {
  for (bool fp16 : {false, true})
    for (const char* attention : {"flash", "naive"})
      for (const char* logits : {"chunked", "full"}) {
        auto a = args(3, 17, 1, fp16);
        a.attention = attention;
        a.logits = logits;
        const RunOutcome r = train_on(cpu_backend(), odd_config(), a);
        ASSERT_TRUE(r.result.error.empty()) << r.result.error;
        EXPECT_EQ(at(r.mem.max_by_category, Category::activations),
                  expected_half_activations(odd_config(), 3, 17, std::string(attention) == "naive",
                                            std::string(logits) == "full"))
            << attention << " " << logits << " fp16=" << fp16;
      }
}

TEST(MixedPrecision, MetaReportsWhatCpuMeasures) {
  std::vector<TrainingArguments> cases;
  cases.push_back(args(2, 16, 2, false));
  {
    auto a = args(2, 16, 2, true);
    a.gradient_accumulation_steps = 2;
    a.gradient_checkpointing = true;
    cases.push_back(a);
  }
  {
    auto a = args(3, 11, 2, false);
    a.gradient_checkpointing = true;
    a.checkpoint_policy = "selective";
    a.attention = "naive";
    a.logits = "full";
    cases.push_back(a);
  }
  for (const TrainingArguments& a : cases) {
    const RunOutcome cpu = train_on(cpu_backend(), odd_config(), a);
    const RunOutcome meta = train_on(meta_backend(), odd_config(), a);
    ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
    test::expect_meta_equals_cpu(meta.mem, cpu.mem);
  }
}

// One forward + backward of the odd config; gradients flattened.
std::vector<double> gradients(ComputeDType precision, float loss_scale, float* loss) {
  Device dev(cpu_backend());
  GPT2 model(odd_config(), dev);
  model.init_weights(5);
  model.set_compute_dtype(precision);
  const int64_t B = 2, T = 19;
  const auto in = test::random_ints(B * T, 21, 0, 300);
  const auto tg = test::random_ints(B * T, 22, 0, 300);
  *loss = model.forward(in.data(), tg.data(), B, T, true, loss_scale);
  model.backward(loss_scale);
  std::vector<double> g;
  for (Parameter* p : model.parameters())
    for (int64_t i = 0; i < p->grad.numel(); ++i)
      g.push_back(static_cast<double>(p->grad.data<float>()[i]) / loss_scale);
  return g;
}

TEST(MixedPrecision, GradientsStayCloseToFp32) {
  float l32 = 0, lbf = 0, lh = 0;
  const auto g32 = gradients(ComputeDType::f32, 1.0f, &l32);
  const auto gbf = gradients(ComputeDType::bf16, 1.0f, &lbf);
  const auto gh = gradients(ComputeDType::f16, 1024.0f, &lh);
  EXPECT_NEAR(lbf, l32, 1e-2 * l32);
  EXPECT_NEAR(lh, l32, 2e-3 * l32);
  // bf16 keeps 8 significant bits, fp16 11: relative errors of about 2^-8 and 2^-11 per
  // rounding, compounded over the layers.
  const double ebf = rel_l2(gbf, g32), eh = rel_l2(gh, g32);
  EXPECT_LT(ebf, 3e-2);
  EXPECT_GT(ebf, 1e-4);  // really rounded
  EXPECT_LT(eh, 5e-3);
  EXPECT_LT(eh, ebf);
}

TEST(MixedPrecision, Fp16WithoutLossScaleLosesSmallGradients) {
  // The reason for loss scaling. The test batch is small (38 tokens), so its gradients are
  // large; scaling the loss by 2^-10 gives the gradient magnitudes of a batch 1024 times larger.
  // There many fall under fp16's subnormal floor 2^-24 and are lost; scaled by 2^10 they are
  // not. (Powers of two: apart from underflow and overflow, the rounding is the same.)
  float l = 0;
  const auto g32 = gradients(ComputeDType::f32, 1.0f, &l);
  const double small = rel_l2(gradients(ComputeDType::f16, 1.0f / 1024, &l), g32);
  const double scaled = rel_l2(gradients(ComputeDType::f16, 1024.0f, &l), g32);
  EXPECT_GT(small, 10 * scaled) << small << " vs " << scaled;
}

TEST(MixedPrecision, GradientsAreDeterministic) {
  float l = 0;
  // Whatever ran before (kernels keep thread-local scratch), the same call gives the same bits.
  const auto f16_first = gradients(ComputeDType::f16, 1024.0f, &l);
  for (float sc : {1.0f, 1024.0f, 1.0f / 1024, 1024.0f}) {
    gradients(ComputeDType::f32, sc, &l);
    gradients(ComputeDType::f16, sc, &l);
    EXPECT_EQ(gradients(ComputeDType::f16, 1024.0f, &l), f16_first) << sc;
  }
}

TEST(MixedPrecision, Fp16ScalerSkipsAnOverflowedStepAndHalvesTheScale) {
  auto a = args(2, 16, 1, true);
  GradScalerOptions huge;
  huge.init_scale = std::ldexp(1.0, 40);  // dLoss * 2^40 overflows fp16's 65504
  const RunOutcome skipped = train_on(cpu_backend(), odd_config(), a, huge);
  ASSERT_TRUE(skipped.result.error.empty()) << skipped.result.error;
  EXPECT_EQ(skipped.result.skipped_steps, 1);
  EXPECT_EQ(skipped.result.loss_scale, std::ldexp(1.0, 39));
  EXPECT_TRUE(std::isnan(skipped.result.grad_norm[0]));
  // The skipped step left every weight as initialized.
  auto b = a;
  b.learning_rate = 0.0;
  const RunOutcome untouched = train_on(cpu_backend(), odd_config(), b);
  ASSERT_EQ(skipped.weights.size(), untouched.weights.size());
  for (size_t i = 0; i < skipped.weights.size(); ++i)
    EXPECT_EQ(skipped.weights[i], untouched.weights[i]) << "parameter " << i;

  // Default scale 2^16 fits: no skip, and after growth_interval good steps the scale doubles.
  GradScalerOptions grow;
  grow.growth_interval = 2;
  const RunOutcome good = train_on(cpu_backend(), odd_config(), args(2, 16, 3, true), grow);
  ASSERT_TRUE(good.result.error.empty()) << good.result.error;
  EXPECT_EQ(good.result.skipped_steps, 0);
  EXPECT_EQ(good.result.loss_scale, 131072.0);
  // bf16 needs no scaler.
  EXPECT_EQ(train_on(cpu_backend(), odd_config(), args(2, 16, 1, false)).result.loss_scale, 0.0);
}

TEST(MixedPrecision, Fp16AndBf16TogetherIsAnError) {
  auto a = args(2, 16, 1, true);
  a.bf16 = true;
  EXPECT_THROW(a.validate(), Error);
}

}  // namespace mixed_precision_test
}  // namespace
}  // namespace snug
