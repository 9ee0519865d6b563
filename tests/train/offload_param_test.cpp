// --offload-param cpu (train/offload.h; DeepSpeed's offload_param.device "cpu") at ZeRO stage 3 in
// one process, to the value and to the byte:
//  - on a cpu device the rank's shards (4 bytes per trainable element in a world of one) move
//    from the device pool to the host pool beside it, category weights: the device's live weights
//    after training and its peak lose exactly the shards and the host's weights are exactly them;
//    the losses are those of the run without the flag bit for bit; the optimizer's state stays on
//    the device, or moves to the host with --offload-optimizer cpu as well;
//  - meta reports what cpu measures, for both pools (the plan equals the run to the byte);
//  - the flag below stage 3, a device the host does not address and unknown values are refused by
//    name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/compare.h"
#include "support/configs.h"
#include "support/expect_error.h"
#include "support/gpt2_train.h"
#include "support/memory_checks.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace offload_param_test {

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
  int64_t shard_bytes = 0;  // 4 bytes per trainable element: a world of one's shards
};

Outcome train_on(const Backend& kind, const TrainingArguments& a) {
  Outcome r;
  test::Gpt2Train run(kind, odd_config(), a, 42, [&](GPT2& model) {
    for (Parameter* p : model.parameters())
      if (p->requires_grad) r.shard_bytes += 4 * p->numel();
  });
  r.result = run.result;
  r.device = run.dev.pool().stats();
  r.host_apart = &run.dev.host() != &run.dev;
  r.host = run.dev.host().pool().stats();
  return r;
}

TrainingArguments stage3_run() {
  TrainingArguments a;
  a.optim = "adamw_torch";
  a.zero_stage = 3;
  a.per_device_train_batch_size = 2;
  a.seq_len = 16;
  a.max_steps = 3;
  a.gradient_accumulation_steps = 2;
  a.data = "dummy";
  a.weight_decay = 0.1;
  return a;
}

// `plain` (stage 3, its optimizer offloaded or not) against the same with --offload-param cpu.
void expect_only_the_shards_move(const TrainingArguments& plain) {
  TrainingArguments off = plain;
  off.offload_param = "cpu";
  const Outcome a = train_on(cpu_backend(), plain);
  const Outcome b = train_on(cpu_backend(), off);
  ASSERT_TRUE(a.result.error.empty()) << a.result.error;
  ASSERT_TRUE(b.result.error.empty()) << b.result.error;
  EXPECT_TRUE(b.host_apart);
  EXPECT_TRUE(same_bits(a.result.loss, b.result.loss));
  const int64_t s = a.shard_bytes;
  ASSERT_GT(s, 0);
  // After training only the shards are weights: on the device without the flag, on the host
  // with it.
  EXPECT_EQ(at(a.device.live, Category::weights), s);
  EXPECT_EQ(at(b.device.live, Category::weights), 0);
  EXPECT_EQ(at(b.host.live, Category::weights), s);
  EXPECT_EQ(at(b.host.max_by_category, Category::weights), s);
  EXPECT_EQ(b.device.live_total, a.device.live_total - s);
  // The optimizer's state and the gradients are where they were.
  const int64_t state_on_device = at(a.device.max_by_category, Category::optimizer_state);
  const int64_t state_on_host =
      a.host_apart ? at(a.host.max_by_category, Category::optimizer_state) : 0;
  EXPECT_EQ(at(b.device.max_by_category, Category::optimizer_state), state_on_device);
  EXPECT_EQ(at(b.host.max_by_category, Category::optimizer_state), state_on_host);
  EXPECT_EQ(at(b.device.max_by_category, Category::gradients),
            at(a.device.max_by_category, Category::gradients));
  EXPECT_EQ(at(b.host.max_by_category, Category::gradients), 0);
  // The shards are live for the whole run: the device's peak is lower by exactly them, at the
  // same moment (the weights then the gathered blocks alone).
  EXPECT_EQ(b.device.peak_total, a.device.peak_total - s);
  EXPECT_EQ(at(b.device.peak_by_category, Category::weights),
            at(a.device.peak_by_category, Category::weights) - s);
}

TEST(OffloadParam, ShardsMoveToTheHostPoolValuesBitForBit) {
  expect_only_the_shards_move(stage3_run());
}

TEST(OffloadParam, WithTheOptimizerOffloadedTooBothMove) {
  TrainingArguments a = stage3_run();
  a.offload_optimizer = "cpu";
  expect_only_the_shards_move(a);
  TrainingArguments ckpt = stage3_run();
  ckpt.gradient_checkpointing = true;
  expect_only_the_shards_move(ckpt);
}

TEST(OffloadParam, MetaReportsWhatCpuMeasuresForBothPools) {
  std::vector<TrainingArguments> cases(3, stage3_run());
  for (TrainingArguments& a : cases) a.offload_param = "cpu";
  cases[1].offload_optimizer = "cpu";
  cases[2].gradient_checkpointing = true;
  for (const TrainingArguments& a : cases) {
    SCOPED_TRACE(a.offload_optimizer + (a.gradient_checkpointing ? " checkpointing" : ""));
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

TEST(OffloadParam, RefusalsNameTheFlags) {
  TrainingArguments two = stage3_run();
  two.zero_stage = 2;
  two.offload_param = "cpu";
  EXPECT_TRUE(HasSubstr(error_message([&] { two.validate(); }),
                        "--offload-param cpu with --zero-stage 2: parameters are offloaded at "
                        "ZeRO stage 3 only"));
  TrainingArguments nvme = stage3_run();
  nvme.offload_param = "nvme";
  EXPECT_TRUE(HasSubstr(error_message([&] { nvme.validate(); }),
                        "--offload-param: unknown device 'nvme' (known: none, cpu)"));
  TrainingArguments remote = stage3_run();
  remote.offload_param = "cpu";
  const auto dev = make_device("cpu-remote");  // with its host pool, as `snug train` makes it
  GPT2 model(odd_config(), *dev, remote.param_dtype());
  auto data = open_dataset(remote.data, odd_config().vocab_size, remote.seed);
  EXPECT_TRUE(HasSubstr(error_message([&] { Trainer t(remote, model, data.get()); }),
                        "--offload-param cpu with --device cpu-remote: each block's gather would "
                        "upload the shards from the host"));
}

}  // namespace offload_param_test
}  // namespace
}  // namespace snug
