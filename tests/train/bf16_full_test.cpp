// --bf16-full (bf16 parameters, gradients and optimizer state), to the byte and to the value:
//  - model states are 2P + 2P + 4P with AdamW (P = 124,439,808 for gpt2-124m) and 2 + 2 + 2
//    with SGD momentum, on meta; meta reports what cpu measures for several configurations;
//  - initialization and --init-from hold the fp32 values rounded to nearest;
//  - gradients are the mixed-precision (--bf16) gradients rounded to bf16, bit for bit, for every
//    parameter touched once per backward (all but the tied wte), and close to fp32's;
//  - training lowers the loss as fp32 does (within 2% after 60 steps);
//  - checkpoints hold BF16 tensors and resume bit for bit (20 steps == 10 + save + resume + 10);
//  - optimizers without bf16 support and --fp16 are refused naming the flags (lomo and adalomo
//    update bf16 parameters: tests/train/lomo_bf16_test.cpp);
//  - `snug estimate` stays within 10% of the plan on model states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "kernels/kernels.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_weights.h"
#include "optim/optimizer.h"
#include "plan/estimate.h"
#include "plan/what_if.h"
#include "support/configs.h"
#include "support/gpt2_train.h"
#include "support/memory_checks.h"
#include "support/random.h"
#include "support/run_cli.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace train_bf16_full_test {

namespace fs = std::filesystem;
using test::odd_config;

using test::at;

// Values of an f32 or bf16 tensor as floats (bf16 widening is exact and injective: equal
// vectors mean equal bits).
std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::f32)
    std::memcpy(v.data(), t.data<float>(), v.size() * sizeof(float));
  else
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(t.data_u16()[i]);
  return v;
}

TrainingArguments full_args(const std::string& optim = "adamw_torch") {
  TrainingArguments a;
  a.bf16_full = true;
  a.optim = optim;
  return a;
}

TEST(Bf16Full, Gpt2SmallModelStatesAreTwoTwoFourBytesPerParameterOnMeta) {
  TrainingArguments a = full_args();
  a.model = "gpt2-124m";
  a.per_device_train_batch_size = 1;
  a.seq_len = 128;
  const MemoryStats m = dry_run(a);
  const int64_t P = 124439808;
  ASSERT_EQ(resolve_gpt2("gpt2-124m").num_params(), P);
  // No fp32 master and no compute copies: the bf16 parameters are all of `weights`.
  EXPECT_EQ(at(m.max_by_category, Category::weights), 2 * P);
  EXPECT_EQ(at(m.max_by_category, Category::gradients), 2 * P);
  EXPECT_EQ(at(m.max_by_category, Category::optimizer_state), 4 * P);
  // SGD with momentum: a bf16 buffer.
  a.optim = "sgd";
  a.momentum = 0.9;
  EXPECT_EQ(at(dry_run(a).max_by_category, Category::optimizer_state), 2 * P);
  // The same run in fp32: 4 + 4 + 8.
  TrainingArguments f = a;
  f.bf16_full = false;
  f.optim = "adamw_torch";
  const MemoryStats m32 = dry_run(f);
  EXPECT_EQ(at(m32.max_by_category, Category::weights), 4 * P);
  EXPECT_EQ(at(m32.max_by_category, Category::optimizer_state), 8 * P);
}

struct RunOutcome {
  MemoryStats mem;
  TrainResult result;
  std::vector<std::vector<float>> weights;
};

RunOutcome train_on(const Backend& kind, const GPT2Config& cfg, const TrainingArguments& a,
                    uint64_t init_seed = 42) {
  test::Gpt2Train run(kind, cfg, a, init_seed);
  RunOutcome r;
  r.result = run.result;
  r.mem = run.dev.pool().stats();
  if (!run.dev.is_meta())
    for (Parameter* p : run.model.parameters()) r.weights.push_back(values(p->value));
  return r;
}

TEST(Bf16Full, MetaReportsWhatCpuMeasures) {
  std::vector<TrainingArguments> cases;
  auto base = [] {
    TrainingArguments a = full_args();
    a.per_device_train_batch_size = 2;
    a.seq_len = 16;
    a.max_steps = 2;
    a.data = "dummy";
    return a;
  };
  cases.push_back(base());
  {
    auto a = base();
    a.gradient_accumulation_steps = 2;
    a.gradient_checkpointing = true;
    cases.push_back(a);
  }
  {
    auto a = base();
    a.gradient_checkpointing = true;
    a.checkpoint_policy = "selective";
    a.attention = "naive";
    a.logits = "full";
    a.bf16 = true;  // implied; allowed together
    cases.push_back(a);
  }
  {
    auto a = base();
    a.optim = "sgd";
    a.momentum = 0.9;
    a.freeze = {"transformer.h.0.*"};
    cases.push_back(a);
  }
  // lomo/adalomo update inside backward, with and without the two-pass clipping.
  for (const char* optim : {"lomo", "adalomo"})
    for (double clip : {1.0, 0.0}) {
      auto a = base();
      a.optim = optim;
      a.max_grad_norm = clip;
      a.gradient_checkpointing = clip > 0.0;
      cases.push_back(a);
    }
  for (const TrainingArguments& a : cases) {
    const RunOutcome cpu = train_on(cpu_backend(), odd_config(), a);
    const RunOutcome meta = train_on(meta_backend(), odd_config(), a);
    ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
    ASSERT_TRUE(meta.result.error.empty()) << meta.result.error;
    test::expect_meta_equals_cpu(meta.mem, cpu.mem);
    // Nothing but the bf16 parameters, gradients and state outlives the run's last step.
    const int64_t P = odd_config().num_params();
    EXPECT_EQ(at(cpu.mem.max_by_category, Category::weights), 2 * P);
  }
}

TEST(Bf16Full, InitAndInitFromHoldTheFp32ValuesRounded) {
  Device dev(cpu_backend());
  GPT2 f32(odd_config(), dev);
  GPT2 bf(odd_config(), dev, DType::bf16);
  f32.init_weights(7);
  bf.init_weights(7);
  for (size_t i = 0; i < f32.parameters().size(); ++i) {
    const Parameter& a = *f32.parameters()[i];
    const Parameter& b = *bf.parameters()[i];
    ASSERT_EQ(b.value.dtype(), DType::bf16);
    for (int64_t k = 0; k < a.value.numel(); ++k)
      ASSERT_EQ(b.value.data_u16()[k], f32_to_bf16(a.value.data<float>()[k])) << a.name << " " << k;
  }
  // --init-from an fp32 file: the same rounding. The bf16 model writes BF16, read back exactly.
  test::TempDir tmp;
  save_gpt2_weights(f32, tmp.path("f32.safetensors"));
  GPT2 loaded(odd_config(), dev, DType::bf16);
  load_gpt2_weights(loaded, tmp.path("f32.safetensors"));
  save_gpt2_weights(loaded, tmp.path("bf16.safetensors"));
  const SafetensorsFile file(tmp.path("bf16.safetensors"));
  EXPECT_EQ(file.info("transformer.wte.weight").dtype, "BF16");
  GPT2 again(odd_config(), dev, DType::bf16);
  load_gpt2_weights(again, tmp.path("bf16.safetensors"));
  for (size_t i = 0; i < bf.parameters().size(); ++i) {
    EXPECT_EQ(values(loaded.parameters()[i]->value), values(bf.parameters()[i]->value));
    EXPECT_EQ(values(again.parameters()[i]->value), values(bf.parameters()[i]->value));
  }
}

// One forward + backward of the odd config; gradients per parameter as floats.
std::vector<std::vector<float>> gradients(DType params, ComputeDType compute, bool masters_bf16,
                                          float* loss) {
  Device dev(cpu_backend());
  GPT2 model(odd_config(), dev, params);
  model.init_weights(5);
  if (masters_bf16)  // fp32 masters holding exactly the bf16 model's values
    for (Parameter* p : model.parameters())
      kernels::round_to_half(p->value.data<float>(), p->value.numel(), false);
  model.set_compute_dtype(compute);
  const int64_t B = 2, T = 19;
  const auto in = test::random_ints(B * T, 21, 0, 300);
  const auto tg = test::random_ints(B * T, 22, 0, 300);
  *loss = model.forward(in.data(), tg.data(), B, T, true, 1.0f);
  model.backward(1.0f);
  std::vector<std::vector<float>> g;
  for (Parameter* p : model.parameters()) {
    EXPECT_EQ(p->grad.dtype(), params) << p->name;
    g.push_back(values(p->grad));
  }
  return g;
}

double rel_l2(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double num = 0, den = 0;
  for (size_t p = 0; p < a.size(); ++p)
    for (size_t i = 0; i < a[p].size(); ++i) {
      const double d = static_cast<double>(a[p][i]) - b[p][i];
      num += d * d;
      den += static_cast<double>(b[p][i]) * b[p][i];
    }
  return std::sqrt(num / den);
}

TEST(Bf16Full, GradientsAreTheMixedPrecisionGradientsRounded) {
  // Same values everywhere (fp32 masters set to the bf16 model's values, so --bf16's compute
  // copies are those values too): each parameter's bf16 gradient is its fp32 --bf16 gradient
  // rounded to nearest, bit for bit, where backward touches it once. The tied wte is touched
  // twice (LM head in forward, embedding lookup at the end of backward) and rounded in between.
  float lm = 0, lf = 0;
  const auto mixed = gradients(DType::f32, ComputeDType::bf16, true, &lm);
  const auto full = gradients(DType::bf16, ComputeDType::bf16, false, &lf);
  EXPECT_EQ(lm, lf);
  ASSERT_EQ(mixed.size(), full.size());
  for (size_t p = 1; p < mixed.size(); ++p)  // 0 is wte
    for (size_t i = 0; i < mixed[p].size(); ++i)
      ASSERT_EQ(full[p][i], bf16_to_f32(f32_to_bf16(mixed[p][i]))) << "parameter " << p << " " << i;
  EXPECT_LT(rel_l2({full[0]}, {mixed[0]}), 4e-3);
}

TEST(Bf16Full, GradientsStayCloseToFp32) {
  float l32 = 0, lbf = 0;
  const auto g32 = gradients(DType::f32, ComputeDType::f32, false, &l32);
  const auto gbf = gradients(DType::bf16, ComputeDType::bf16, false, &lbf);
  EXPECT_NEAR(lbf, l32, 1e-2 * l32);
  const double e = rel_l2(gbf, g32);
  EXPECT_LT(e, 3e-2);
  EXPECT_GT(e, 1e-4);  // really rounded
}

TEST(Bf16Full, LossFallsAsInFp32) {
  // gpt2-tiny on the built-in corpus, 60 steps of 4 x 64 tokens: fp32 and --bf16-full.
  auto run = [](bool full) {
    TrainingArguments a;
    a.max_steps = 60;
    a.per_device_train_batch_size = 4;
    a.seq_len = 64;
    a.bf16_full = full;
    return train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), a).result;
  };
  const TrainResult f32 = run(false), full = run(true);
  ASSERT_TRUE(full.error.empty()) << full.error;
  const double start = full.loss.front(), end = full.loss.back();
  EXPECT_LT(end, 0.6 * start) << start << " -> " << end;
  EXPECT_NEAR(end, f32.loss.back(), 0.02 * f32.loss.back())
      << "fp32 " << f32.loss.back() << ", --bf16-full " << end;
  std::printf("loss over 60 steps: fp32 %.4f -> %.4f, --bf16-full %.4f -> %.4f\n", f32.loss.front(),
              f32.loss.back(), start, end);
}

// Checkpoints (the pattern of checkpoint_test.cpp): 20 steps in one go equal 10 steps, a save,
// and 10 more steps in fresh objects resumed from the checkpoint, bit for bit.
void expect_exact_resume(const std::string& optim, double momentum) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  auto args = [&](int64_t steps) {
    TrainingArguments a = full_args(optim);
    a.momentum = momentum;
    a.seq_len = 32;
    a.per_device_train_batch_size = 2;
    a.max_steps = steps;
    a.learning_rate = optim == "sgd" ? 0.05 : 1e-3;
    a.warmup_steps = 3;
    a.weight_decay = 0.1;
    a.output_dir = out;
    return a;
  };
  TrainingArguments whole = args(20);
  whole.save_steps = 10;
  const RunOutcome a = train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), whole);
  ASSERT_TRUE(a.result.error.empty()) << a.result.error;
  ASSERT_EQ(a.result.checkpoints.size(), 2u);
  const std::string ckpt = (fs::path(out) / "checkpoint-10").string();
  {
    const SafetensorsFile model(ckpt + "/model.safetensors");
    EXPECT_EQ(model.info("transformer.h.0.mlp.c_fc.weight").dtype, "BF16");
    // lomo keeps no state; adalomo's factored second moment stays fp32 (optim/lomo.h).
    if (optim != "lomo" && optim != "adalomo") {
      const SafetensorsFile opt(ckpt + "/optimizer.safetensors");
      for (const std::string& n : opt.names()) EXPECT_EQ(opt.info(n).dtype, "BF16") << n;
    }
  }
  TrainingArguments resumed = args(20);
  resumed.resume_from = ckpt;
  const RunOutcome b = train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), resumed, 1234);
  ASSERT_TRUE(b.result.error.empty()) << b.result.error;
  ASSERT_EQ(b.result.loss.size(), 10u);
  for (size_t i = 0; i < 10; ++i)
    EXPECT_EQ(std::memcmp(&a.result.loss[10 + i], &b.result.loss[i], sizeof(double)), 0)
        << optim << " step " << 11 + i;
  EXPECT_EQ(a.weights, b.weights) << optim;
  // Resuming a --bf16-full checkpoint without the flag is refused, naming it.
  TrainingArguments plain = resumed;
  plain.bf16_full = false;
  try {
    train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), plain);
    ADD_FAILURE() << "resuming a bf16 checkpoint into fp32 parameters did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--bf16-full"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, ResumeIsBitExactBf16FullAdamW) {
  expect_exact_resume("adamw_torch", 0.0);
}
TEST(Checkpoint, ResumeIsBitExactBf16FullSgdWithMomentum) {
  expect_exact_resume("sgd", 0.9);
}
// lomo and adalomo update inside backward, with LOMO's two-pass clipping (max_grad_norm 1).
TEST(Checkpoint, ResumeIsBitExactBf16FullLomo) {
  expect_exact_resume("lomo", 0.0);
}
TEST(Checkpoint, ResumeIsBitExactBf16FullAdaLomo) {
  expect_exact_resume("adalomo", 0.0);
}

TEST(Bf16Full, OtherOptimizersAndFp16AreRefusedNamingTheFlags) {
  for (const char* optim : {"adafactor", "adamw_bnb_8bit", "lion", "lion_8bit", "galore_adamw"}) {
    TrainingArguments a = full_args(optim);
    try {
      a.validate();
      ADD_FAILURE() << optim << " accepted with --bf16-full";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--bf16-full"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("--optim ") + optim), std::string::npos) << m;
    }
    // The optimizer itself refuses bf16 parameters too.
    Device dev(meta_backend());
    GPT2 model(odd_config(), dev, DType::bf16);
    EXPECT_THROW(make_optimizer(optim, model.parameters(), {}), Error) << optim;
  }
  TrainingArguments fp16 = full_args();
  fp16.fp16 = true;
  EXPECT_THROW(fp16.validate(), Error);
  TrainingArguments both = full_args();
  both.bf16 = true;  // --bf16 is implied: allowed
  EXPECT_NO_THROW(both.validate());
  EXPECT_NO_THROW(full_args("adamw").validate());
  EXPECT_NO_THROW(full_args("sgd").validate());
  EXPECT_NO_THROW(full_args("lomo").validate());
  EXPECT_NO_THROW(full_args("adalomo").validate());
}

TEST(Bf16Full, EstimateIsWithinTenPercentOfThePlanOnModelStates) {
  for (const char* model : {"gpt2-124m", "gpt2-350m"})
    for (const char* optim : {"adamw_torch", "sgd"}) {
      TrainingArguments a = full_args(optim);
      a.model = model;
      a.momentum = 0.9;
      a.per_device_train_batch_size = 1;
      a.seq_len = 256;
      const MemoryEstimate est = estimate_memory(a);
      const MemoryStats plan = dry_run(a);
      const int64_t P = est.params;
      EXPECT_EQ(at(est.bytes, Category::weights), 2 * P);
      EXPECT_EQ(at(est.bytes, Category::gradients), 2 * P);
      EXPECT_EQ(at(est.bytes, Category::optimizer_state),
                (std::string(optim) == "sgd" ? 2 : 4) * P);
      const int64_t plan_states = at(plan.max_by_category, Category::weights) +
                                  at(plan.max_by_category, Category::gradients) +
                                  at(plan.max_by_category, Category::optimizer_state);
      EXPECT_NEAR(static_cast<double>(est.model_states()) / static_cast<double>(plan_states), 1.0,
                  0.1)
          << model << " " << optim;
    }
}

}  // namespace train_bf16_full_test
}  // namespace
}  // namespace snug
