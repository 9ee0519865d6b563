// --offload-optimizer cpu (train/offload.h; DeepSpeed's offload_optimizer.device "cpu"), to the
// value and to the byte:
//  - on a cpu device the optimizer's state moves from the device pool to the host pool beside it
//    (the device's optimizer_state 0, the host's the figure the run without the flag has on the
//    device, state_bytes_formula's), and the losses and weights are those of the run without the
//    flag bit for bit, for every optimizer with state (fp32, bf16, 8-bit and factored states);
//  - the same at ZeRO stages 1-3 in one process (the rank's pieces' state in the host pool);
//  - meta reports what cpu measures, for both pools (the plan equals the run to the byte);
//  - LOMO/AdaLOMO, a device the host does not address and unknown values are refused by name; a
//    plan for a GPU says so (DryRun::unbuilt).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "optim/optimizer.h"
#include "plan/dry_run.h"
#include "support/compare.h"
#include "support/configs.h"
#include "support/expect_error.h"
#include "support/gpt2_train.h"
#include "support/memory_checks.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace offload_test {

using test::same_bits;

using test::odd_config;
using testing_data::error_message;
using testing_data::HasSubstr;

using test::at;

struct Outcome {
  MemoryStats device;
  MemoryStats host;  // the host pool; equal to `device` (the same pool) without offload
  bool host_apart = false;
  TrainResult result;
  std::vector<std::vector<uint8_t>> weights;  // every parameter's bytes
  int64_t state_formula = 0;                  // state_bytes_formula for the model's parameters
};

Outcome train_on(const Backend& kind, const TrainingArguments& a) {
  test::Gpt2Train run(kind, odd_config(), a);
  Outcome r;
  r.result = run.result;
  r.device = run.dev.pool().stats();
  r.host_apart = &run.dev.host() != &run.dev;
  r.host = run.dev.host().pool().stats();
  r.state_formula = state_bytes_formula(a.optim, run.model.parameters(), a.optimizer_options());
  if (!run.dev.is_meta())
    for (Parameter* p : run.model.parameters()) {
      const auto* b = static_cast<const uint8_t*>(p->value.raw());
      r.weights.emplace_back(b, b + p->value.nbytes());
    }
  return r;
}

TrainingArguments small_run(const std::string& optim) {
  TrainingArguments a;
  a.optim = optim;
  a.per_device_train_batch_size = 2;
  a.seq_len = 16;
  a.max_steps = 3;
  a.gradient_accumulation_steps = 2;
  a.data = "dummy";
  a.weight_decay = 0.1;
  a.momentum = 0.9;  // sgd keeps a momentum buffer
  return a;
}

// Offloaded against not, on cpu: the state's bytes move pools, nothing else changes.
void expect_offload_moves_only_the_state(const TrainingArguments& plain) {
  TrainingArguments off = plain;
  off.offload_optimizer = "cpu";
  const Outcome a = train_on(cpu_backend(), plain);
  const Outcome b = train_on(cpu_backend(), off);
  ASSERT_TRUE(a.result.error.empty()) << a.result.error;
  ASSERT_TRUE(b.result.error.empty()) << b.result.error;
  EXPECT_FALSE(a.host_apart);
  EXPECT_TRUE(b.host_apart);
  EXPECT_TRUE(same_bits(a.result.loss, b.result.loss)) << plain.optim;
  EXPECT_EQ(a.weights, b.weights) << plain.optim;
  const int64_t state = at(a.device.max_by_category, Category::optimizer_state);
  EXPECT_GT(state, 0) << plain.optim;
  EXPECT_EQ(at(b.device.max_by_category, Category::optimizer_state), 0) << plain.optim;
  EXPECT_EQ(at(b.host.max_by_category, Category::optimizer_state), state) << plain.optim;
  EXPECT_EQ(at(b.host.live, Category::optimizer_state), state) << plain.optim;
  if (plain.zero_stage == 0) {
    EXPECT_EQ(state, a.state_formula) << plain.optim;
  }
  // Weights and gradients stay on the device.
  for (Category c : {Category::weights, Category::gradients}) {
    EXPECT_EQ(at(b.device.max_by_category, c), at(a.device.max_by_category, c)) << plain.optim;
    EXPECT_EQ(at(b.host.max_by_category, c), 0) << plain.optim;
  }
}

TEST(OffloadOptimizer, StateMovesToTheHostPoolValuesBitForBit) {
  for (const char* optim : {"adamw_torch", "sgd", "lion", "adafactor", "adamw_bnb_8bit"}) {
    SCOPED_TRACE(optim);
    expect_offload_moves_only_the_state(small_run(optim));
  }
}

TEST(OffloadOptimizer, Bf16FullAndDeepSpeedLayoutStatesMoveToo) {
  TrainingArguments a = small_run("adamw_torch");
  a.bf16_full = true;
  expect_offload_moves_only_the_state(a);
  TrainingArguments d = small_run("adamw_torch");
  d.precision_layout = "deepspeed";
  expect_offload_moves_only_the_state(d);
}

TEST(OffloadOptimizer, ZeroStagesInOneProcessKeepThePiecesStateOnTheHost) {
  for (int stage : {1, 2, 3}) {
    SCOPED_TRACE(stage);
    TrainingArguments a = small_run("adamw_torch");
    a.zero_stage = stage;
    expect_offload_moves_only_the_state(a);
  }
}

TEST(OffloadOptimizer, MetaReportsWhatCpuMeasuresForBothPools) {
  std::vector<TrainingArguments> cases;
  for (const char* optim : {"adamw_torch", "adafactor", "adamw_bnb_8bit"}) {
    TrainingArguments a = small_run(optim);
    a.offload_optimizer = "cpu";
    cases.push_back(a);
  }
  {
    TrainingArguments a = small_run("adamw_torch");
    a.offload_optimizer = "cpu";
    a.zero_stage = 2;
    a.gradient_checkpointing = true;
    cases.push_back(a);
  }
  for (const TrainingArguments& a : cases) {
    SCOPED_TRACE(a.optim + " stage " + std::to_string(a.zero_stage));
    const Outcome cpu = train_on(cpu_backend(), a);
    const Outcome meta = train_on(meta_backend(), a);
    ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
    ASSERT_TRUE(meta.result.error.empty()) << meta.result.error;
    ASSERT_TRUE(meta.host_apart);
    test::expect_meta_equals_cpu(meta.device, cpu.device);
    test::expect_meta_equals_cpu(meta.host, cpu.host);
    EXPECT_EQ(meta.host.live, cpu.host.live);
  }
}

TEST(OffloadOptimizer, RefusalsNameTheFlag) {
  TrainingArguments lomo = small_run("lomo");
  lomo.gradient_accumulation_steps = 1;
  lomo.offload_optimizer = "cpu";
  EXPECT_TRUE(HasSubstr(error_message([&] { train_on(cpu_backend(), lomo); }),
                        "--offload-optimizer cpu with --optim lomo: its update is fused into "
                        "backward"));
  lomo.optim = "adalomo";
  EXPECT_TRUE(HasSubstr(error_message([&] { train_on(cpu_backend(), lomo); }),
                        "--offload-optimizer cpu with --optim adalomo"));
  TrainingArguments remote = small_run("adamw_torch");
  remote.offload_optimizer = "cpu";
  const auto dev = make_device("cpu-remote");  // with its host pool, as `snug train` makes it
  GPT2 model(odd_config(), *dev, remote.param_dtype());
  auto data = open_dataset(remote.data, odd_config().vocab_size, remote.seed);
  EXPECT_TRUE(
      HasSubstr(error_message([&] { Trainer t(remote, model, data.get()); }),
                "--offload-optimizer cpu with --device cpu-remote: the update on the host would "
                "need the gradients downloaded"));
  // A plan for a GPU (meta, kernels of cuda) goes on and says why the run would stop: the same
  // words (docs/report.md plan_only).
  TrainingArguments gpu = small_run("adamw_torch");
  gpu.model = "gpt2-tiny";
  gpu.offload_optimizer = "cpu";
  gpu.device = "cuda";
  const DryRun planned = replay(gpu, {});
  EXPECT_TRUE(HasSubstr(planned.unbuilt,
                        "--offload-optimizer cpu with --device cuda: the update on the host would "
                        "need the gradients downloaded"))
      << planned.unbuilt;
  EXPECT_GT(planned.host->max_by_category[static_cast<int>(Category::optimizer_state)], 0);
  gpu.device = "cpu";
  EXPECT_EQ(replay(gpu, {}).unbuilt, "");
  TrainingArguments nvme = small_run("adamw_torch");
  nvme.offload_optimizer = "nvme";
  EXPECT_TRUE(HasSubstr(error_message([&] { nvme.validate(); }),
                        "--offload-optimizer: unknown device 'nvme' (known: none, cpu)"));
}

}  // namespace offload_test
}  // namespace
}  // namespace snug
