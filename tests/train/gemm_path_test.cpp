// --gemm-path on whole training runs: the onednn-bf16 path (gemm_bf16 on the bf16 compute
// copies) against the widen path (the same bf16 values widened for dnnl_sgemm):
//  - the meta device replays either path to the byte (plan == train);
//  - gradients and losses agree to the order of the fp32 sums (plus the bf16 rounding of the LM
//    head's dlogits), far closer than bf16 is to fp32;
//  - checkpoint policies stay bitwise identical to no checkpointing;
//  - the path reads the compute copies directly, so no fp32 copy of a weight is made.
// Runs of the onednn-bf16 path skip (saying why) where oneDNN has no bf16 matmul (AVX2 CPUs).
#include "kernels/gemm_path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/compare.h"
#include "support/configs.h"
#include "support/gemm_paths.h"
#include "support/memory_checks.h"
#include "support/random.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace gemm_path_test {

using test::odd_config;
using test::rel_l2;

TrainingArguments bf16_args(const std::string& path) {
  TrainingArguments a;
  a.per_device_train_batch_size = 2;
  a.seq_len = 16;
  a.max_steps = 2;
  a.data = "dummy";
  a.bf16 = true;
  a.gemm_path = path;
  a.logging_steps = 1000;
  return a;
}

struct Outcome {
  MemoryStats mem;
  TrainResult result;
};

Outcome run(const Backend& kind, const TrainingArguments& a) {
  Device dev(kind);
  GPT2 model(odd_config(), dev, a.param_dtype(), a.weight_quant());
  model.init_weights(a.seed);
  auto data = open_dataset(a.data, model.config().vocab_size, a.seed);
  Trainer trainer(a, model, data.get());
  Outcome o;
  o.result = trainer.train();
  o.mem = dev.pool().stats();
  return o;
}

std::vector<TrainingArguments> cases(const std::string& path) {
  std::vector<TrainingArguments> v;
  v.push_back(bf16_args(path));
  {
    auto a = bf16_args(path);
    a.gradient_accumulation_steps = 2;
    a.gradient_checkpointing = true;
    v.push_back(a);
  }
  {
    auto a = bf16_args(path);
    a.gradient_checkpointing = true;
    a.checkpoint_policy = "selective";
    a.attention = "naive";
    a.logits = "full";
    v.push_back(a);
  }
  {
    auto a = bf16_args(path);
    a.bf16 = false;
    a.bf16_full = true;
    v.push_back(a);
  }
  {
    auto a = bf16_args(path);  // QLoRA with --bf16: dequantized base packed to bf16
    a.apply_qlora_recipe();
    a.lora_r = 4;
    a.target_modules = "all-linear";
    v.push_back(a);
  }
  {
    auto a = bf16_args(path);  // QLoRA's bf16 compute dtype alone: the input is rounded to bf16
    a.bf16 = false;
    a.apply_qlora_recipe();
    a.lora_r = 4;
    v.push_back(a);
  }
  return v;
}

std::string describe(const TrainingArguments& a) {
  return "bf16=" + std::to_string(a.bf16) + " bf16_full=" + std::to_string(a.bf16_full) +
         " ckpt=" + std::to_string(a.gradient_checkpointing) + ":" + a.checkpoint_policy +
         " logits=" + a.logits + " qlora=" + std::to_string(a.qlora) + " path=" + a.gemm_path;
}

TEST(GemmPathRun, MetaReportsWhatCpuMeasuresOnBothPaths) {
  for (const std::string path : {"widen", "onednn-bf16"}) {
    if (path == "onednn-bf16" && !kernels::bf16_matmul_support().available) continue;
    for (const TrainingArguments& a : cases(path)) {
      SCOPED_TRACE(describe(a));
      const Outcome cpu = run(cpu_backend(), a);
      const Outcome meta = run(meta_backend(), a);
      ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
      test::expect_meta_equals_cpu(meta.mem, cpu.mem);
    }
  }
  SKIP_WITHOUT_BF16_MATMUL();
}

TEST(GemmPathRun, BothPathsTrainAlike) {
  SKIP_WITHOUT_BF16_MATMUL();
  const auto widen = cases("widen");
  const auto onednn = cases("onednn-bf16");
  for (size_t i = 0; i < widen.size(); ++i) {
    SCOPED_TRACE(describe(onednn[i]));
    TrainingArguments a = widen[i], b = onednn[i];
    a.max_steps = b.max_steps = 4;
    const Outcome w = run(cpu_backend(), a), o = run(cpu_backend(), b);
    test::expect_paths_train_alike(o.result.loss, w.result.loss);
  }
}

// One forward + backward of the odd config under --bf16; gradients flattened.
std::vector<double> gradients(kernels::GemmPath path, const CheckpointConfig* ckpt, float* loss) {
  Device dev(cpu_backend());
  GPT2 model(odd_config(), dev);
  model.init_weights(5);
  model.set_compute_dtype(ComputeDType::bf16);
  model.set_gemm_path(path);
  if (ckpt) model.set_checkpointing(*ckpt);
  const int64_t B = 2, T = 19;
  const auto in = test::random_ints(B * T, 21, 0, 300);
  const auto tg = test::random_ints(B * T, 22, 0, 300);
  *loss = model.forward(in.data(), tg.data(), B, T, true, 1.0f);
  model.backward(1.0f);
  std::vector<double> g;
  for (Parameter* p : model.parameters())
    for (int64_t i = 0; i < p->grad.numel(); ++i) g.push_back(p->grad.data<float>()[i]);
  return g;
}

TEST(GemmPathRun, GradientsMatchTheWidenedPathFarCloserThanFp32) {
  SKIP_WITHOUT_BF16_MATMUL();
  float lw = 0, lo = 0;
  const auto gw = gradients(kernels::GemmPath::widen, nullptr, &lw);
  const auto go = gradients(kernels::GemmPath::onednn_bf16, nullptr, &lo);
  EXPECT_NEAR(lo, lw, 1e-5 * lw);
  // bf16 against fp32 differs by ~1e-2 (MixedPrecision.GradientsStayCloseToFp32); the two bf16
  // paths by the sum order and the head's bf16 dlogits: an order of magnitude less.
  EXPECT_LT(rel_l2(go, gw), 3e-3);
}

TEST(GemmPathRun, CheckpointPoliciesStayBitwiseIdentical) {
  SKIP_WITHOUT_BF16_MATMUL();
  float l0 = 0;
  const auto g0 = gradients(kernels::GemmPath::onednn_bf16, nullptr, &l0);
  for (CheckpointPolicy p :
       {CheckpointPolicy::every_layer, CheckpointPolicy::every_k, CheckpointPolicy::selective}) {
    CheckpointConfig c;
    c.policy = p;
    c.every_k = 2;
    float l = 0;
    EXPECT_EQ(gradients(kernels::GemmPath::onednn_bf16, &c, &l), g0) << static_cast<int>(p);
    EXPECT_EQ(l, l0);
  }
}

TEST(GemmPathRun, Bf16PathMakesNoFp32CopyOfAWeight) {
  SKIP_WITHOUT_BF16_MATMUL();
  // The widen path's largest temporary is an fp32 copy of wte (V x C); the bf16 path reads the
  // bf16 compute copy itself, so its temporaries stay below that.
  const GPT2Config c = odd_config();
  const int64_t wte_f32 = 4 * c.vocab_size * c.n_embd;
  const Outcome w = run(meta_backend(), bf16_args("widen"));
  const Outcome o = run(meta_backend(), bf16_args("onednn-bf16"));
  const int tmp = static_cast<int>(Category::temporary);
  EXPECT_GE(w.mem.max_by_category[tmp], wte_f32);
  EXPECT_LT(o.mem.max_by_category[tmp], w.mem.max_by_category[tmp]);
  EXPECT_EQ(o.mem.max_by_category[static_cast<int>(Category::weights)],
            w.mem.max_by_category[static_cast<int>(Category::weights)]);
}

}  // namespace gemm_path_test
}  // namespace
}  // namespace snug
