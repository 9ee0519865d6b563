// --precision-layout deepspeed (DeepSpeed's mixed-precision layout, ZeRO's K = 12), to the value
// and to the byte:
//  - the master-weight AdamW kernel: fast == reference bit for bit; two steps on a unit tensor
//    equal a hand transcription of that recipe (fp32 master AdamW, then a bf16 copy rounded to
//    nearest) bit for bit, and torch.optim.AdamW on an fp32 master followed by .to(bfloat16)
//    (golden values from torch 2.x, foreach=False) within 4 ulp, the same bf16 weights;
//  - model states are 2P + 2P + 12P = 16 bytes per parameter (gpt2-124m, and the 7.5e9-parameter
//    Llama shape of ZeRO's figure: 120 GB), and the estimate says the same;
//  - meta reports what cpu measures (the plan equals the measured peak to the byte);
//  - after training, every weight is its master rounded to nearest even, and the loss falls as in
//    fp32;
//  - checkpoints hold the F32 master ("<name>.fp32") and resume bit for bit;
//  - optimizers without master weights, --fp16, --bf16-full and unknown layouts are refused by
//    name; --deepspeed's bf16.enabled does not imply the layout.
#include <gtest/gtest.h>

#include <cmath>
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
#include "models/registry.h"
#include "optim/optimizer.h"
#include "plan/dry_run.h"
#include "plan/estimate.h"
#include "support/configs.h"
#include "support/gpt2_train.h"
#include "support/memory_checks.h"
#include "support/random.h"
#include "support/run_cli.h"
#include "train/deepspeed_config.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace precision_layout_test {

namespace fs = std::filesystem;
using test::odd_config;

using test::at;

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f32_to_bf16(x[i]);
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TrainingArguments ds_args(const std::string& optim = "adamw_torch") {
  TrainingArguments a;
  a.precision_layout = "deepspeed";
  a.optim = optim;
  return a;
}

TEST(PrecisionLayout, MasterKernelFastEqualsReferenceBitForBit) {
  const int64_t n = 3 * 8192 + 77;  // several parallel chunks and a ragged end
  for (float wd : {0.0f, 0.1f}) {
    std::vector<float> master(n), m(n, 0.0f), v(n, 0.0f);
    const std::vector<uint16_t> p0 = to_bf16(test::random_floats(n, 1));
    for (int64_t i = 0; i < n; ++i) master[i] = bf16_to_f32(p0[i]);
    std::vector<uint16_t> p = p0, pr = p0;
    std::vector<float> mr = m, vr = v, masterr = master;
    for (int t = 1; t <= 3; ++t) {
      const std::vector<uint16_t> g = to_bf16(test::random_floats(n, 10 + t));
      kernels::adamw_update_master(p.data(), g.data(), master.data(), m.data(), v.data(), n, 1e-3f,
                                   0.9f, 0.999f, 1e-8f, wd, t, false);
      ref::adamw_update_master(pr.data(), g.data(), masterr.data(), mr.data(), vr.data(), n, 1e-3f,
                               0.9f, 0.999f, 1e-8f, wd, t, false);
      ASSERT_EQ(p, pr) << "step " << t;
      ASSERT_EQ(master, masterr) << "step " << t;
      ASSERT_EQ(m, mr) << "step " << t;
      ASSERT_EQ(v, vr) << "step " << t;
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], f32_to_bf16(master[i])) << i;
  }
}

// Two AdamW steps (lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight decay 0.1) from bf16 weights
// with bf16 gradients, through the optimizer as a run drives it: a bf16 Parameter, AdamW with
// master_weights.
TEST(PrecisionLayout, TwoStepsEqualTorchAdamWOnAnFp32MasterThenBf16) {
  // The inputs are bf16 values (exact in float).
  const std::vector<float> w0 = {0.5f,        -1.25f, 0.0030059814453125f, 2.0f,
                                 -0.0078125f, 1.0f,   0.333984375f,        -7.5f};
  const std::vector<float> g1 = {0.10009765625f,          -0.02001953125f, 1.5f,         -3.0f,
                                 0.00010013580322265625f, 0.25f,           -0.69921875f, 0.0f};
  const std::vector<float> g2 = {
      -0.30078125f, 0.050048828125f, 0.8984375f, 2.0f, -0.0002002716064453125f,
      0.125f,       0.6015625f,      1.0f};
  // torch: master = w0.float(); AdamW(foreach=False) steps on g1, g2 (as float); w =
  // master.to(bfloat16). Master bits and the bf16 weights, as torch printed them.
  const uint32_t torch_master[] = {0x3efce7e3, 0xbf9ef7ad, 0xbc87ae76, 0x400079db,
                                   0xbc676ce3, 0x3f7a8b61, 0x3eafe33c, 0xc0efc225};
  const std::vector<float> torch_w = {0.494140625f,       -1.2421875f, -0.0166015625f, 2.0f,
                                      -0.01409912109375f, 0.98046875f, 0.34375f,       -7.5f};
  const int64_t n = static_cast<int64_t>(w0.size());

  // The hand transcription of the recipe, in float, with the per-step scalars formed in double
  // from the float hyperparameters a run hands the optimizer (torch forms them from Python
  // floats: its master differs from this one by the rounding of lr, wd and the betas to float,
  // a few ulp).
  std::vector<float> master(w0), m(n, 0.0f), v(n, 0.0f);
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
  int t = 0;
  for (const auto* g : {&g1, &g2}) {
    ++t;
    const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * wd);
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(b1), t)));
    const float bc2_sqrt =
        static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
    for (int64_t i = 0; i < n; ++i) {
      const float gi = (*g)[i];
      m[i] = b1 * m[i] + static_cast<float>(1.0 - b1) * gi;
      v[i] = b2 * v[i] + static_cast<float>(1.0 - b2) * gi * gi;
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      master[i] = master[i] * decay - step_size * (m[i] / denom);
    }
  }

  Device dev(cpu_backend());
  Parameter p;
  p.name = "w";
  p.value = Tensor::empty({n}, DType::bf16, Category::weights, dev);
  p.grad = Tensor::empty({n}, DType::bf16, Category::gradients, dev);
  for (int64_t i = 0; i < n; ++i) p.value.data_u16()[i] = f32_to_bf16(w0[i]);
  OptimizerOptions o;
  o.beta1 = 0.9f;
  o.beta2 = 0.999f;
  o.eps = 1e-8f;
  o.weight_decay = 0.1f;
  o.master_weights = true;
  auto opt = make_optimizer("adamw_torch", {&p}, o);
  for (const auto* g : {&g1, &g2}) {
    for (int64_t i = 0; i < n; ++i) p.grad.data_u16()[i] = f32_to_bf16((*g)[i]);
    opt->step(1e-2f);
  }
  const auto state = opt->state_tensors();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "w.fp32");
  const Tensor& got_master = *state[0].second;
  ASSERT_EQ(got_master.dtype(), DType::f32);
  for (int64_t i = 0; i < n; ++i) {
    const float mi = got_master.data<float>()[i];
    EXPECT_EQ(bits(mi), bits(master[i])) << i;
    float tm;
    std::memcpy(&tm, &torch_master[i], 4);
    EXPECT_NEAR(mi, tm, 4 * std::abs(tm) * 0x1p-24f) << i;  // within 4 ulp of torch's
    EXPECT_EQ(bf16_to_f32(p.value.data_u16()[i]), torch_w[i]) << i;
    EXPECT_EQ(p.value.data_u16()[i], f32_to_bf16(master[i])) << i;
  }
  // 12 bytes of fp32 state per element; the weights stay bf16.
  EXPECT_EQ(state_bytes_formula("adamw_torch", {&p}, o), 12 * n);
  int64_t state_bytes = 0;
  for (const auto& [name, tensor] : state) state_bytes += tensor->nbytes();
  EXPECT_EQ(state_bytes, 12 * n);
}

TEST(PrecisionLayout, Gpt2SmallModelStatesAreSixteenBytesPerParameterOnMeta) {
  TrainingArguments a = ds_args();
  a.model = "gpt2-124m";
  a.per_device_train_batch_size = 1;
  a.seq_len = 128;
  const MemoryStats m = dry_run(a);
  const int64_t P = 124439808;
  EXPECT_EQ(at(m.max_by_category, Category::weights), 2 * P);
  EXPECT_EQ(at(m.max_by_category, Category::gradients), 2 * P);
  EXPECT_EQ(at(m.max_by_category, Category::optimizer_state), 12 * P);
  const MemoryEstimate est = estimate_memory(a);
  EXPECT_EQ(at(est.bytes, Category::weights), 2 * P);
  EXPECT_EQ(at(est.bytes, Category::gradients), 2 * P);
  EXPECT_EQ(at(est.bytes, Category::optimizer_state), 12 * P);
  EXPECT_EQ(est.model_states(), 16 * P);
}

// Acceptance 3 of issue 30, single-process half: ZeRO's 7.5e9-parameter example, 120 GB of model
// states plainly. llama-7b with 36 layers and a 26,000-token vocabulary: 7,498,797,056
// parameters (-0.016% from 7.5e9).
TEST(PrecisionLayout, ZeroPapersSevenAndAHalfBillionNeedSixteenBytesPerParameter) {
  TrainingArguments a = ds_args();
  a.model = "llama-7b";
  a.model_shape.n_layer = 36;
  a.model_shape.vocab_size = 26000;
  a.per_device_train_batch_size = 1;
  a.seq_len = 128;
  const int64_t P = a.model_config().num_params;
  EXPECT_EQ(P, 7498797056);
  EXPECT_LT(std::abs(static_cast<double>(P) / 7.5e9 - 1.0), 0.005);
  const MemoryStats m = dry_run(a);
  const int64_t states = at(m.max_by_category, Category::weights) +
                         at(m.max_by_category, Category::gradients) +
                         at(m.max_by_category, Category::optimizer_state);
  EXPECT_EQ(states, 16 * P);  // 119,980,752,896 bytes: the paper's 120 GB
  EXPECT_EQ(at(m.max_by_category, Category::optimizer_state), 12 * P);
}

// Acceptance 3 of issue 30, the other half: the same model at --world-size 64 --zero-stage 3
// keeps 1/64 of the 16 bytes a parameter, up to each parameter's padding to a multiple of 64:
// its bf16 shards (2 bytes an element), its bf16 gradient slice (2) and its AdamW pieces' fp32
// master and moments (12), S = sum_i ceil(numel_i / 64) elements. The partition is cut from a
// whole model, so the weights' maximum (and the peak) is the whole bf16 model; the shards are
// the weights the run ends with (the plan's final_by_category).
TEST(PrecisionLayout, ZeroStageThreeOnSixtyFourRanksKeepsASixtyFourthOfSixteenBytes) {
  TrainingArguments a = ds_args();
  a.model = "llama-7b";
  a.model_shape.n_layer = 36;
  a.model_shape.vocab_size = 26000;
  a.per_device_train_batch_size = 1;
  a.seq_len = 128;
  a.zero_stage = 3;
  const int64_t P = a.model_config().num_params;
  ASSERT_EQ(P, 7498797056);
  int64_t S = 0;
  {
    Device meta(meta_backend());
    const auto m = create_model(a.model_config(), meta, a.param_dtype(), a.weight_quant());
    for (const Parameter* p : m->parameters()) S += (p->numel() + 63) / 64;
  }
  EXPECT_EQ(S, 117168704);  // P / 64 = 117,168,704: every llama-7b tensor divides by 64
  const MemoryStats m = replay(a, DryRunData{.world_size = 64}).memory;
  EXPECT_EQ(at(m.live, Category::weights), 2 * S);
  EXPECT_EQ(at(m.max_by_category, Category::gradients), 2 * S);
  EXPECT_EQ(at(m.max_by_category, Category::optimizer_state), 12 * S);
  // Partitioned as it is built (train/zero3_init.h): the shards and one gathered layer at most
  // (4*4096^2 + 3*4096*11008 + 2*4096 = 202,383,360 bf16 elements), never the whole model.
  EXPECT_EQ(at(m.max_by_category, Category::weights), 2 * S + 2 * 202383360);
  EXPECT_EQ(at(m.max_by_category, Category::weights), 639104128);
  // 1,874,699,264 bytes: the paper's 1.9 GB (16P/64 exactly).
  EXPECT_EQ(at(m.live, Category::weights) + at(m.max_by_category, Category::gradients) +
                at(m.max_by_category, Category::optimizer_state),
            16 * P / 64);
}

struct RunOutcome {
  MemoryStats mem;
  TrainResult result;
  std::vector<std::string> names;              // the parameters'
  std::vector<std::vector<uint16_t>> weights;  // bf16 bits
};

RunOutcome train_on(const Backend& kind, const GPT2Config& cfg, const TrainingArguments& a,
                    uint64_t init_seed = 42) {
  test::Gpt2Train run(kind, cfg, a, init_seed);
  RunOutcome r;
  r.result = run.result;
  r.mem = run.dev.pool().stats();
  if (!run.dev.is_meta() && a.param_dtype() == DType::bf16)
    for (Parameter* p : run.model.parameters()) {
      r.names.push_back(p->name);
      r.weights.emplace_back(p->value.data_u16(), p->value.data_u16() + p->value.numel());
    }
  return r;
}

TrainingArguments small_run() {
  TrainingArguments a = ds_args();
  a.per_device_train_batch_size = 2;
  a.seq_len = 16;
  a.max_steps = 3;
  a.data = "dummy";
  a.weight_decay = 0.1;
  return a;
}

// ZeRO stage 1 on one process with this layout: the bf16 flat buffer, the pieces' fp32 master
// and moments; the update is elementwise, so losses and weights equal stage 0's bit for bit, and
// meta counts what the CPU run holds.
TEST(PrecisionLayout, StageOneOnOneProcessEqualsStageZeroBitForBit) {
  const TrainingArguments plain = small_run();
  TrainingArguments z1 = small_run();
  z1.zero_stage = 1;
  const RunOutcome a = train_on(cpu_backend(), odd_config(), plain);
  const RunOutcome b = train_on(cpu_backend(), odd_config(), z1);
  ASSERT_TRUE(b.result.error.empty()) << b.result.error;
  ASSERT_EQ(a.result.loss.size(), 3u);
  EXPECT_EQ(a.result.loss, b.result.loss);
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.weights, b.weights);
  int64_t P = 0;
  for (const auto& w : a.weights) P += static_cast<int64_t>(w.size());
  const int64_t padded = (P + 1) / 2 * 2;  // one rank: a multiple of 2
  EXPECT_EQ(at(b.mem.max_by_category, Category::optimizer_state) -
                at(a.mem.max_by_category, Category::optimizer_state),
            12 * (padded - P));  // the padding's master and moments
  const RunOutcome meta = train_on(meta_backend(), odd_config(), z1);
  test::expect_meta_equals_cpu(meta.mem, b.mem);
}

// Stages 2 and 3 on one process: each bf16 gradient goes through the fp32 bucket (a sum over one
// rank) and is rounded back into the bf16 slice, which gives its bits back exactly, so the
// losses (and at stage 2 the weights) equal stage 0's bit for bit; meta counts what the CPU run
// holds, the bucket and the slice's fp32 temporaries included.
TEST(PrecisionLayout, StagesTwoAndThreeOnOneProcessEqualStageZeroBitForBit) {
  const RunOutcome plain = train_on(cpu_backend(), odd_config(), small_run());
  ASSERT_EQ(plain.result.loss.size(), 3u);
  for (int stage : {2, 3}) {
    TrainingArguments z = small_run();
    z.zero_stage = stage;
    test::Gpt2Train run(cpu_backend(), odd_config(), z, 42);
    ASSERT_TRUE(run.result.error.empty()) << "stage " << stage << ": " << run.result.error;
    EXPECT_EQ(run.result.loss, plain.result.loss) << "stage " << stage;
    if (stage == 2) {
      EXPECT_EQ(train_on(cpu_backend(), odd_config(), z).weights, plain.weights);
    }
    const RunOutcome meta = train_on(meta_backend(), odd_config(), z);
    ASSERT_TRUE(meta.result.error.empty()) << meta.result.error;
    test::expect_meta_equals_cpu(meta.mem, run.dev.pool().stats());
  }
}

TEST(PrecisionLayout, MetaReportsWhatCpuMeasures) {
  std::vector<TrainingArguments> cases;
  cases.push_back(small_run());
  {
    auto a = small_run();
    a.gradient_accumulation_steps = 2;
    a.gradient_checkpointing = true;
    a.bf16 = true;  // implied; allowed together
    cases.push_back(a);
  }
  {
    auto a = small_run();
    a.freeze = {"transformer.h.0.*"};
    a.max_grad_norm = 0.0;
    cases.push_back(a);
  }
  for (const TrainingArguments& a : cases) {
    const RunOutcome cpu = train_on(cpu_backend(), odd_config(), a);
    const RunOutcome meta = train_on(meta_backend(), odd_config(), a);
    ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
    ASSERT_TRUE(meta.result.error.empty()) << meta.result.error;
    test::expect_meta_equals_cpu(meta.mem, cpu.mem);
    const int64_t P = odd_config().num_params();
    EXPECT_EQ(at(cpu.mem.max_by_category, Category::weights), 2 * P);
    if (a.freeze.empty()) {
      EXPECT_EQ(at(cpu.mem.max_by_category, Category::optimizer_state), 12 * P);
      EXPECT_EQ(at(cpu.mem.max_by_category, Category::gradients), 2 * P);
    }
  }
}

TEST(PrecisionLayout, TrainedWeightsAreTheirMastersRounded) {
  test::TempDir tmp;
  TrainingArguments a = small_run();
  a.output_dir = tmp.path("out");
  a.save_steps = a.max_steps;
  const RunOutcome cpu = train_on(cpu_backend(), odd_config(), a);
  ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
  const SafetensorsFile opt(tmp.path("out") + "/checkpoint-3/optimizer.safetensors");
  int64_t finer = 0, total = 0;
  for (size_t k = 0; k < cpu.names.size(); ++k) {
    const std::vector<float> master = opt.read_f32(cpu.names[k] + ".fp32");
    const std::vector<uint16_t>& w = cpu.weights[k];
    ASSERT_EQ(master.size(), w.size()) << cpu.names[k];
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(w[i], f32_to_bf16(master[i])) << cpu.names[k] << " " << i;
      finer += bf16_to_f32(w[i]) != master[i];
    }
    total += static_cast<int64_t>(w.size());
  }
  // The masters keep what bf16 cannot: most of them are not bf16 values.
  EXPECT_GT(finer, total / 2) << finer << " of " << total;
}

TEST(PrecisionLayout, LossFallsAsInFp32) {
  auto run = [](bool ds) {
    TrainingArguments a;
    a.max_steps = 60;
    a.per_device_train_batch_size = 4;
    a.seq_len = 64;
    if (ds) a.precision_layout = "deepspeed";
    return train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), a).result;
  };
  const TrainResult f32 = run(false), ds = run(true);
  ASSERT_TRUE(ds.error.empty()) << ds.error;
  EXPECT_LT(ds.loss.back(), 0.6 * ds.loss.front());
  EXPECT_NEAR(ds.loss.back(), f32.loss.back(), 0.02 * f32.loss.back())
      << "fp32 " << f32.loss.back() << ", deepspeed layout " << ds.loss.back();
  std::printf("loss over 60 steps: fp32 %.4f -> %.4f, --precision-layout deepspeed %.4f -> %.4f\n",
              f32.loss.front(), f32.loss.back(), ds.loss.front(), ds.loss.back());
}

TEST(PrecisionLayout, CheckpointHoldsTheMasterAndResumesBitForBit) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  auto args = [&](int64_t steps) {
    TrainingArguments a = ds_args();
    a.seq_len = 32;
    a.per_device_train_batch_size = 2;
    a.max_steps = steps;
    a.learning_rate = 1e-3;
    a.warmup_steps = 3;
    a.weight_decay = 0.1;
    a.output_dir = out;
    return a;
  };
  TrainingArguments whole = args(20);
  whole.save_steps = 10;
  const RunOutcome a = train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), whole);
  ASSERT_TRUE(a.result.error.empty()) << a.result.error;
  const std::string ckpt = (fs::path(out) / "checkpoint-10").string();
  {
    const SafetensorsFile model(ckpt + "/model.safetensors");
    EXPECT_EQ(model.info("transformer.h.0.mlp.c_fc.weight").dtype, "BF16");
    const SafetensorsFile opt(ckpt + "/optimizer.safetensors");
    EXPECT_EQ(opt.info("transformer.h.0.mlp.c_fc.weight.fp32").dtype, "F32");
    EXPECT_EQ(opt.info("transformer.h.0.mlp.c_fc.weight.exp_avg").dtype, "F32");
    EXPECT_EQ(opt.info("transformer.h.0.mlp.c_fc.weight.exp_avg_sq").dtype, "F32");
  }
  TrainingArguments resumed = args(20);
  resumed.resume_from = ckpt;
  const RunOutcome b = train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), resumed, 1234);
  ASSERT_TRUE(b.result.error.empty()) << b.result.error;
  ASSERT_EQ(b.result.loss.size(), 10u);
  for (size_t i = 0; i < 10; ++i)
    EXPECT_EQ(std::memcmp(&a.result.loss[10 + i], &b.result.loss[i], sizeof(double)), 0)
        << "step " << 11 + i;
  // (Had the resume started the masters from the bf16 weights, the losses would part at once.)
  EXPECT_EQ(a.weights, b.weights);
  // The layout is part of the run: resuming with --bf16-full instead is refused, naming the flag.
  TrainingArguments other = resumed;
  other.precision_layout = "snug";
  other.bf16_full = true;
  try {
    train_on(cpu_backend(), resolve_gpt2("gpt2-tiny"), other);
    ADD_FAILURE() << "resuming a deepspeed-layout checkpoint with --bf16-full did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--precision-layout"), std::string::npos) << e.what();
  }
}

TEST(PrecisionLayout, RefusalsNameTheFlags) {
  for (const char* optim : {"sgd", "adafactor", "adamw_bnb_8bit", "lion", "lomo", "galore_adamw"}) {
    try {
      ds_args(optim).validate();
      ADD_FAILURE() << optim << " accepted with --precision-layout deepspeed";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--precision-layout deepspeed"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("--optim ") + optim), std::string::npos) << m;
      EXPECT_NE(m.find("adamw_torch or adamw"), std::string::npos) << m;
    }
    // The optimizer factory refuses too.
    Device dev(meta_backend());
    GPT2 model(odd_config(), dev, DType::bf16);
    OptimizerOptions o;
    o.master_weights = true;
    EXPECT_THROW(make_optimizer(optim, model.parameters(), o), Error) << optim;
  }
  EXPECT_NO_THROW(ds_args("adamw").validate());
  TrainingArguments fp16 = ds_args();
  fp16.fp16 = true;
  EXPECT_THROW(fp16.validate(), Error);
  TrainingArguments full = ds_args();
  full.bf16_full = true;
  EXPECT_THROW(full.validate(), Error);
  TrainingArguments f16 = ds_args();
  f16.torch_dtype = "float16";
  EXPECT_THROW(f16.validate(), Error);
  TrainingArguments unknown;
  unknown.precision_layout = "megatron";
  try {
    unknown.validate();
    ADD_FAILURE() << "unknown layout accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: snug, deepspeed"), std::string::npos) << e.what();
  }
  TrainingArguments with_bf16 = ds_args();
  with_bf16.bf16 = true;
  EXPECT_NO_THROW(with_bf16.validate());
  EXPECT_EQ(with_bf16.param_dtype(), DType::bf16);
  EXPECT_EQ(ds_args().compute_dtype(), ComputeDType::bf16);
}

// --deepspeed's bf16.enabled sets --bf16 (HF's meaning), never the layout by itself; with the
// layout on the command line, bf16.enabled false contradicts it.
TEST(PrecisionLayout, DeepSpeedConfigBf16DoesNotImplyTheLayout) {
  const nlohmann::json config = {{"bf16", {{"enabled", true}}},
                                 {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-4}}}}}};
  TrainingArguments a;
  apply_deepspeed_config(config, "ds.json", {}, 1, a);
  EXPECT_TRUE(a.bf16);
  EXPECT_EQ(a.precision_layout, "snug");
  EXPECT_EQ(a.param_dtype(), DType::f32);
  TrainingArguments b = ds_args();
  apply_deepspeed_config(config, "ds.json", {}, 1, b);
  EXPECT_EQ(b.precision_layout, "deepspeed");
  EXPECT_NO_THROW(b.validate());
  TrainingArguments c = ds_args();
  EXPECT_THROW(apply_deepspeed_config({{"bf16", {{"enabled", false}}}}, "ds.json", {}, 1, c),
               Error);
}

}  // namespace precision_layout_test
}  // namespace
}  // namespace snug
