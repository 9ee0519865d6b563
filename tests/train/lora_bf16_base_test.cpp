// LoRA on a 16-bit base (issue 26 point 6): --bf16-full (or --torch-dtype bfloat16|float16) with
// --lora-r stores the frozen base in 16 bits and the adapters, their gradients and their
// optimizer state in fp32, as PEFT does on a model loaded with torch_dtype=bfloat16.
//  - model states to the byte on meta: qwen2-0.5b is 2 bytes per base parameter + 4 per adapter
//    parameter of weights (0.99 GB, PEFT's), 4 of gradients and 8 of AdamW state per adapter
//    parameter; gpt2-124m likewise;
//  - meta reports what cpu measures (peak, every category's maximum, allocation count) for GPT-2
//    and Llama shapes, with dropout, checkpointing, accumulation, SGD, an fp16 base under fp16
//    compute, and a 4-bit base whose other parameters are bf16 (QLoRA as usually run);
//  - values: the forward and the adapters' gradients on a bf16 base equal, bit for bit, those on
//    an fp32 base holding the same bf16-rounded values, under fp32 and under bf16 compute; the
//    adapters' gradients on the bf16 base match central finite differences; against the
//    unrounded fp32 weights the loss moves by the rounding only (within 1e-2 relative);
//  - the run trains as on an fp32 base (final loss within 2%), and the base stays as loaded.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "models/registry.h"
#include "plan/what_if.h"
#include "support/memory_checks.h"
#include "support/random.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace lora_bf16_base_test {

using test::at;

// The fp32 LoRA adapters of a model: A and B parameter elements.
int64_t adapter_params(const Model& m) {
  int64_t n = 0;
  for (const LoraAdapter& a : m.lora_adapters()) n += a.A->numel() + a.B->numel();
  return n;
}

TrainingArguments lora_args(const std::string& model) {
  TrainingArguments a;
  a.model = model;
  a.bf16_full = true;
  a.lora_r = 8;
  a.per_device_train_batch_size = 1;
  a.seq_len = 64;
  return a;
}

TEST(LoraBf16Base, ModelStatesAreTwoBytesPerBaseParameterAndFp32Adapters) {
  // qwen2-0.5b, PEFT's default targets (q_proj, v_proj), r 8: per layer q A (8,896) B (896,8)
  // and v A (8,896) B (128,8) (2 kv heads of 64).
  TrainingArguments a = lora_args("qwen2-0.5b");
  const int64_t P = a.model_config().num_params;
  EXPECT_EQ(P, 494032768);
  const int64_t A = 24 * (8 * 896 + 896 * 8 + 8 * 896 + 128 * 8);
  const MemoryStats m = dry_run(a);
  EXPECT_EQ(at(m.max_by_category, Category::weights), 2 * P + 4 * A);  // 990,228,224: 0.99 GB
  EXPECT_EQ(at(m.max_by_category, Category::gradients), 4 * A);
  EXPECT_EQ(at(m.max_by_category, Category::optimizer_state), 8 * A);
  // The same with --torch-dtype bfloat16 (bf16 compute, no --bf16-full): the same storage.
  TrainingArguments t = a;
  t.bf16_full = false;
  t.torch_dtype = "bfloat16";
  EXPECT_EQ(dry_run(t).max_by_category, m.max_by_category);
  // The fp32 base it replaces: 4 bytes per base parameter (plus bf16 copies under --bf16).
  TrainingArguments f = a;
  f.bf16_full = false;
  EXPECT_EQ(at(dry_run(f).max_by_category, Category::weights), 4 * P + 4 * A);

  // gpt2-124m with c_attn adapters: PEFT's 294,912 trainable parameters.
  TrainingArguments g = lora_args("gpt2-124m");
  g.target_modules = "c_attn";
  const MemoryStats mg = dry_run(g);
  EXPECT_EQ(at(mg.max_by_category, Category::weights), 2 * 124439808LL + 4 * 294912);
  EXPECT_EQ(at(mg.max_by_category, Category::gradients), 4 * 294912);
  EXPECT_EQ(at(mg.max_by_category, Category::optimizer_state), 8 * 294912);
}

struct RunOutcome {
  MemoryStats mem;
  TrainResult result;
  int64_t base_params = 0, adapters = 0;
  std::vector<std::vector<float>> base_before, base_after;  // cpu only
};

std::vector<std::vector<float>> base_values(const Model& m) {
  std::vector<std::vector<float>> v;
  for (const Parameter* p : m.parameters()) {
    if (p->name.find(".lora_") != std::string::npos || p->quantized()) continue;
    v.emplace_back(static_cast<size_t>(p->numel()));
    m.read_values(*p, v.back().data());
  }
  return v;
}

// A run as `snug train` makes it: the model in the run's storage, initialized from the seed.
RunOutcome train_on(const Backend& kind, const TrainingArguments& a) {
  Device dev(kind);
  const ModelConfig cfg = a.model_config();
  auto model = create_model(cfg, dev, a.param_dtype(), a.weight_quant());
  if (kind.backed()) model->init_weights(a.seed);
  auto data = open_dataset(a.data, cfg.shape.vocab_size, a.seed);
  RunOutcome r;
  Trainer trainer(a, *model, data.get());
  if (kind.backed()) r.base_before = base_values(*model);
  r.result = trainer.train();
  r.mem = dev.pool().stats();
  r.adapters = adapter_params(*model);
  r.base_params = count_params(model->parameters()) - r.adapters;
  if (kind.backed()) r.base_after = base_values(*model);
  return r;
}

TEST(LoraBf16Base, MetaReportsWhatCpuMeasures) {
  const auto base = [](const std::string& model) {
    TrainingArguments a = lora_args(model);
    a.lora_r = 4;
    a.per_device_train_batch_size = 2;
    a.seq_len = 16;
    a.max_steps = 2;
    a.data = "dummy";
    a.logging_steps = 1000;
    return a;
  };
  std::vector<TrainingArguments> cases;
  cases.push_back(base("gpt2-tiny"));
  {
    auto a = base("gpt2-tiny");
    a.target_modules = "all-linear";
    a.lora_dropout = 0.1;
    a.gradient_accumulation_steps = 2;
    a.gradient_checkpointing = true;
    cases.push_back(a);
  }
  {
    auto a = base("llama-tiny");
    a.target_modules = "all-linear";
    a.gradient_checkpointing = true;
    a.checkpoint_policy = "selective";
    a.optim = "sgd";
    a.momentum = 0.9;
    cases.push_back(a);
  }
  {
    auto a = base("llama-tiny");  // an fp16 base under fp16 compute: the loss scaler runs too
    a.bf16_full = false;
    a.torch_dtype = "float16";
    cases.push_back(a);
  }
  {
    auto a = base("qwen2-tiny");  // QLoRA with the embeddings and norms in bf16
    a.apply_qlora_recipe();
    a.lora_r = 4;
    cases.push_back(a);
  }
  for (const TrainingArguments& a : cases) {
    SCOPED_TRACE(a.model + " " + a.target_modules + (a.torch_dtype.empty() ? "" : " f16") +
                 (a.load_in_4bit ? " 4-bit" : ""));
    const RunOutcome cpu = train_on(cpu_backend(), a);
    const RunOutcome meta = train_on(meta_backend(), a);
    ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
    ASSERT_TRUE(meta.result.error.empty()) << meta.result.error;
    test::expect_meta_equals_cpu(meta.mem, cpu.mem);
    EXPECT_EQ(at(cpu.mem.max_by_category, Category::gradients), 4 * cpu.adapters);
    if (!a.load_in_4bit) {
      EXPECT_EQ(at(cpu.mem.max_by_category, Category::weights),
                2 * cpu.base_params + 4 * cpu.adapters);
    }
    // The frozen base is exactly as it was initialized.
    EXPECT_EQ(cpu.base_after, cpu.base_before);
    if (a.torch_dtype == "float16") {
      EXPECT_GT(cpu.result.loss_scale, 0.0);
    }
  }
}

// A GPT-2 or Llama model with `dtype` parameters, LoRA on every Linear with B nonzero.
std::unique_ptr<Model> adapted(const std::string& name, Device& dev, DType dtype,
                               ComputeDType compute) {
  auto m = create_model(resolve_model(name), dev, dtype);
  m->init_weights(5);
  LoraConfig c;
  c.r = 3;
  c.alpha = 5;
  c.target_modules = {"all-linear"};
  m->add_lora(c, 7);
  uint64_t seed = 100;
  for (const LoraAdapter& ad : m->lora_adapters()) {
    const auto v = test::random_floats(ad.B->numel(), seed++, -0.3f, 0.3f);
    std::copy(v.begin(), v.end(), ad.B->value.data<float>());
  }
  m->set_compute_dtype(compute);
  m->set_logits_mode(LogitsMode::full);
  return m;
}

// Sets every parameter of `to` to `from`'s values (fp32 parameters holding 16-bit ones exactly).
void copy_values(const Model& from, Model& to) {
  for (const Parameter* p : from.parameters()) {
    Parameter* q = to.find(p->name);
    ASSERT_NE(q, nullptr) << p->name;
    ASSERT_EQ(q->value.dtype(), DType::f32) << p->name;
    from.read_values(*p, q->value.data<float>());
  }
}

std::vector<float> grad_of(const Parameter* p) {
  return std::vector<float>(p->grad.data<float>(), p->grad.data<float>() + p->numel());
}

TEST(LoraBf16Base, ForwardAndGradientsAreTheFp32BasesOnTheRoundedValues) {
  const int64_t B = 2, T = 9;
  for (const std::string name : {"gpt2-tiny", "llama-tiny"})
    for (const ComputeDType compute : {ComputeDType::f32, ComputeDType::bf16}) {
      SCOPED_TRACE(name + (compute == ComputeDType::f32 ? " fp32 compute" : " bf16 compute"));
      Device dev(cpu_backend());
      auto half = adapted(name, dev, DType::bf16, compute);
      auto full = adapted(name, dev, DType::f32, compute);
      copy_values(*half, *full);
      const int64_t V = half->summary().vocab_size;
      const auto in = test::random_ints(B * T, 3, 0, static_cast<int32_t>(V - 1));
      const auto tg = test::random_ints(B * T, 4, 0, static_cast<int32_t>(V - 1));
      const float lh = half->forward(in.data(), tg.data(), B, T);
      half->backward();
      const float lf = full->forward(in.data(), tg.data(), B, T);
      full->backward();
      EXPECT_EQ(lh, lf);
      ASSERT_EQ(half->lora_adapters().size(), full->lora_adapters().size());
      for (size_t i = 0; i < half->lora_adapters().size(); ++i) {
        const LoraAdapter& h = half->lora_adapters()[i];
        const LoraAdapter& f = full->lora_adapters()[i];
        EXPECT_EQ(h.A->value.dtype(), DType::f32);
        EXPECT_EQ(grad_of(h.A), grad_of(f.A)) << h.A->name;
        EXPECT_EQ(grad_of(h.B), grad_of(f.B)) << h.B->name;
      }
      for (const Parameter* p : half->parameters())
        if (p->name.find(".lora_") == std::string::npos) {
          EXPECT_EQ(p->value.dtype(), DType::bf16) << p->name;
          EXPECT_FALSE(p->grad.defined()) << p->name << ": the frozen base has no gradient";
        }
      // Against the unrounded fp32 weights, only the base's rounding moves the loss.
      auto exact = adapted(name, dev, DType::f32, compute);
      const float le = exact->forward(in.data(), tg.data(), B, T, false);
      EXPECT_NEAR(lh, le, 1e-2 * std::fabs(le));
      EXPECT_NE(lh, le);
    }
}

// The adapters' gradients on a bf16 base against central differences of the loss (reference
// kernels), as directional derivatives: the loss comes back as a float, whose rounding (2.4e-7
// at 5.5) swamps a single element's change, while a step along a direction d over a whole tensor
// moves it by h g.d. Directions: sign(g) (g.d = |g|_1: an element of the wrong sign or size
// lowers the numeric value) and two random +-1 vectors; Richardson-extrapolated from steps h and
// 2h along d; agreement to 1e-3 of |g|_1.
TEST(LoraBf16Base, AdapterGradientsMatchFiniteDifferences) {
  const int64_t B = 2, T = 6;
  for (const std::string name : {"gpt2-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    Device dev(cpu_backend(), &ref_op_table());
    auto m = adapted(name, dev, DType::bf16, ComputeDType::f32);
    const int64_t V = m->summary().vocab_size;
    const auto in = test::random_ints(B * T, 8, 0, static_cast<int32_t>(V - 1));
    const auto tg = test::random_ints(B * T, 9, 0, static_cast<int32_t>(V - 1));
    m->forward(in.data(), tg.data(), B, T);
    m->backward();
    const LoraAdapter& first = m->lora_adapters().front();
    const LoraAdapter& last = m->lora_adapters().back();
    int checked = 0;
    double worst = 0;
    for (Parameter* p : {first.A, first.B, last.A, last.B}) {
      float* v = p->value.data<float>();
      const std::vector<float> g = grad_of(p), orig(v, v + p->numel());
      double l1 = 0;
      for (float x : g) l1 += std::fabs(static_cast<double>(x));
      ASSERT_GT(l1, 1e-4) << p->name << ": a vanishing gradient checks nothing";
      std::vector<std::vector<float>> dirs(3, std::vector<float>(g.size()));
      for (size_t i = 0; i < g.size(); ++i) dirs[0][i] = g[i] < 0 ? -1.0f : 1.0f;
      for (int k = 1; k < 3; ++k) {
        const auto r = test::random_floats(static_cast<int64_t>(g.size()), 40 + k, -1.0f, 1.0f);
        for (size_t i = 0; i < g.size(); ++i) dirs[k][i] = r[i] < 0 ? -1.0f : 1.0f;
      }
      for (const std::vector<float>& d : dirs) {
        double analytic = 0;
        for (size_t i = 0; i < g.size(); ++i) analytic += static_cast<double>(g[i]) * d[i];
        const auto central = [&](float h) {
          for (size_t i = 0; i < g.size(); ++i) v[i] = orig[i] + h * d[i];
          const double lp = m->forward(in.data(), tg.data(), B, T, false);
          for (size_t i = 0; i < g.size(); ++i) v[i] = orig[i] - h * d[i];
          const double lm = m->forward(in.data(), tg.data(), B, T, false);
          std::copy(orig.begin(), orig.end(), v);
          return (lp - lm) / (2.0 * static_cast<double>(h));
        };
        // Steps that would move the loss by 2e-3 along sign(g) (h |g|_1): far above its float
        // rounding, small enough for the extrapolation.
        const auto h = static_cast<float>(2e-3 / l1);
        const double numeric = (4.0 * central(h) - central(2 * h)) / 3.0;
        EXPECT_NEAR(analytic, numeric, 1e-3 * l1) << p->name;
        worst = std::max(worst, std::fabs(analytic - numeric) / l1);
        ++checked;
      }
    }
    EXPECT_EQ(checked, 12);
    std::printf("%s: worst |g.d - numeric| / |g|_1 = %.2g\n", name.c_str(), worst);
  }
}

// Trains as the fp32 base does: the loss falls, ends within 2% of an fp32 base's run (fp32
// compute, the same seed and data), and the base stays exactly as initialized.
TEST(LoraBf16Base, LossFallsAsOnAnFp32BaseAndTheBaseStaysAsLoaded) {
  TrainingArguments a = lora_args("gpt2-tiny");
  a.lora_r = 8;
  a.lora_alpha = 16;
  a.target_modules = "all-linear";
  a.per_device_train_batch_size = 4;
  a.seq_len = 64;
  a.max_steps = 30;
  a.learning_rate = 3e-3;
  a.logging_steps = 1000;
  const RunOutcome r = train_on(cpu_backend(), a);
  ASSERT_TRUE(r.result.error.empty()) << r.result.error;
  TrainingArguments f = a;
  f.bf16_full = false;
  const RunOutcome r32 = train_on(cpu_backend(), f);
  ASSERT_TRUE(r32.result.error.empty()) << r32.result.error;
  std::printf("gpt2-tiny LoRA, 30 steps: bf16 base %.4f -> %.4f, fp32 base %.4f -> %.4f\n",
              r.result.loss.front(), r.result.loss.back(), r32.result.loss.front(),
              r32.result.loss.back());
  EXPECT_LT(r.result.loss.back(), 0.9 * r.result.loss.front());
  EXPECT_NEAR(r.result.loss.back(), r32.result.loss.back(), 0.02 * r32.result.loss.back());
  EXPECT_EQ(r.base_after, r.base_before);
}

}  // namespace lora_bf16_base_test
}  // namespace
}  // namespace snug
