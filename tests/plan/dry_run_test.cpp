// Dry runs that replay a run's data (plan/dry_run.h): the peak of a replay on meta is the peak a
// cpu run of the same examples measures, to the byte, for padded and packed rows with gradient
// accumulation, evaluation and prefetching, also when the replay skips the steps whose shapes
// repeat (train/replay_memo.h). Without data, a dry run says it assumed full rows.
#include "plan/dry_run.h"

#include <gtest/gtest.h>

#include "core/device.h"
#include "data/batches.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "support/configs.h"
#include "support/random.h"
#include "train/replay_memo.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace dry_run_test {

// `n` examples of 2..max_len tokens of ids < 256 (llama-tiny's vocabulary), their first token
// masked from the loss.
std::vector<Example> examples(int n, int max_len, uint64_t seed) {
  const std::vector<int32_t> lens = test::random_ints(n, seed, 2, max_len);
  const std::vector<int32_t> ids = test::random_ints(n * max_len, seed + 1, 0, 255);
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) {
    Example e;
    e.ids.assign(ids.begin() + i * max_len, ids.begin() + i * max_len + lens[i]);
    e.labels = e.ids;
    e.labels[0] = kIgnoreIndex;
    out.push_back(std::move(e));
  }
  return out;
}

TrainingArguments run_args() {
  TrainingArguments a =
      test::args_of({.model = "llama-tiny", .seq_len = 24, .batch = 3, .accumulation = 2});
  a.max_steps = 40;
  a.eval_split = 0.1;  // evaluation on: the data below is the eval set
  a.eval_steps = 15;
  a.per_device_eval_batch_size = 5;
  a.dataloader_num_workers = 1;
  return a;
}

MemoryStats cpu_run(const TrainingArguments& args, const DryRunData& data) {
  Device dev(cpu_backend());
  const auto model = create_model(args.model_config(), dev, args.param_dtype());
  model->init_weights(args.seed);
  Trainer trainer(args, *model, data.train, data.eval);
  const TrainResult r = trainer.train();
  EXPECT_EQ(r.error, "");
  return dev.pool().stats();
}

TEST(DryRun, ReplayOfExamplesIsTheCpuRunsPeakPaddedAndPacked) {
  for (const bool packing : {false, true}) {
    SCOPED_TRACE(packing ? "packed" : "padded");
    ExampleBatching how;
    how.packing = packing;
    const ExampleData train(examples(50, 20, 7), "train", how);
    const ExampleData eval(examples(12, 24, 9), "eval", how);
    const TrainingArguments a = run_args();
    const DryRun d = replay(a, {&train, &eval});
    const MemoryStats cpu = cpu_run(a, {&train, &eval});
    EXPECT_EQ(d.memory.peak_total, cpu.peak_total);
    EXPECT_EQ(d.memory.max_by_category, cpu.max_by_category);
    EXPECT_TRUE(d.batches.replayed);
    EXPECT_EQ(d.batches.steps, 40);
    EXPECT_EQ(d.batches.evaluations, 3);  // steps 15, 30 and the end
    EXPECT_EQ(d.batches.packed, packing);
    if (packing)
      EXPECT_EQ(d.batches.longest, 24);  // packed rows are seq_len long
    else
      EXPECT_LE(d.batches.longest, 20);
    // Full rows would be another number: the rows here are shorter, or carry position ids.
    EXPECT_NE(dry_run(a).peak_total, cpu.peak_total);
  }
}

TEST(DryRun, FullRowsWithoutData) {
  TrainingArguments a = run_args();
  a.eval_split = 0.0;
  a.eval_steps = 0;
  a.dataloader_num_workers = 0;
  const DryRun d = replay(a, {});
  EXPECT_FALSE(d.batches.replayed);
  EXPECT_EQ(d.batches.steps, 2);  // two steps: the second holds the optimizer state
  EXPECT_EQ(d.batches.longest, 24);
  EXPECT_EQ(d.batches.evaluations, 0);
  a.max_steps = 1;
  EXPECT_EQ(replay(a, {}).batches.steps, 1);
  EXPECT_LT(replay(a, {}).memory.peak_total, d.memory.peak_total);
}

TEST(ReplayMemo, SkipsAStepWhoseMicroBatchShapesAllOccurredAfterTheFirstStep) {
  ReplayMemo memo(true);
  EXPECT_FALSE(memo.skip_step({10, 12}, false));  // the first step: never, nor recorded
  EXPECT_FALSE(memo.skip_step({10, 12}, true));   // recorded now
  EXPECT_TRUE(memo.skip_step({10, 12}, true));
  EXPECT_FALSE(memo.skip_step({12, 10}, true));  // 12 not seen as a first micro-batch
  EXPECT_TRUE(memo.skip_step({12, 12}, true));   // both seen in their positions
  EXPECT_TRUE(memo.skip_step({10, 10}, true));
  EXPECT_FALSE(memo.skip_step({10, 11}, true));
  ReplayMemo off(false);
  EXPECT_FALSE(off.skip_step({10}, true));
  EXPECT_FALSE(off.skip_step({10}, true));
}

}  // namespace dry_run_test
}  // namespace
}  // namespace snug
