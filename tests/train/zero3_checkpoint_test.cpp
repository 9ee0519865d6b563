// ZeRO stage 3's checkpoint (train/checkpoint.h, save_checkpoint with a gatherer): rank 0 writes
// model.safetensors a parameter at a time, each gathered whole only while it is written. On one
// process (GPT-2 at n_embd 65: odd sizes):
//  - the file is byte for byte a stage-0 run's (the same values, header and order), and the run's
//    losses are the stage-0 run's;
//  - saving adds nothing to the weights' maximum: it is the run's without --save-steps (the
//    shards and one gathered block), where gathering the whole model to write it held the shards
//    and the whole model at once;
//  - a resume reads each parameter's slice (Parameter::shard) and gives the uninterrupted run's
//    next loss bit for bit, with no more weights than that run.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/backends.h"
#include "support/compare.h"
#include "support/configs.h"
#include "support/gpt2_train.h"
#include "support/memory_checks.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace zero3_checkpoint_test {

using test::at;

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TrainingArguments run(int stage, const std::string& out) {
  TrainingArguments a;
  a.optim = "adamw_torch";
  a.zero_stage = stage;
  a.per_device_train_batch_size = 2;
  a.seq_len = 16;
  a.max_steps = 2;
  a.data = "dummy";
  a.weight_decay = 0.1;
  if (!out.empty()) {
    a.save_steps = 2;
    a.output_dir = out;
  }
  return a;
}

TEST(Zero3Checkpoint, WrittenAParameterAtATimeItIsTheStageZeroFile) {
  testing_data::TempDir dir;
  const test::Gpt2Train zero(cpu_backend(), test::odd_config(), run(0, dir.file("s0")));
  const test::Gpt2Train three(cpu_backend(), test::odd_config(), run(3, dir.file("s3")));
  const test::Gpt2Train unsaved(cpu_backend(), test::odd_config(), run(3, ""));
  ASSERT_TRUE(zero.result.error.empty()) << zero.result.error;
  ASSERT_TRUE(three.result.error.empty()) << three.result.error;
  ASSERT_TRUE(unsaved.result.error.empty()) << unsaved.result.error;
  EXPECT_TRUE(test::same_bits(zero.result.loss, three.result.loss));
  const std::vector<char> a = bytes_of(dir.file("s0/checkpoint-2/model.safetensors"));
  const std::vector<char> b = bytes_of(dir.file("s3/checkpoint-2/model.safetensors"));
  ASSERT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b);
  const int64_t saved = at(three.dev.pool().stats().max_by_category, Category::weights);
  EXPECT_EQ(saved, at(unsaved.dev.pool().stats().max_by_category, Category::weights));
  // The shards of a world of one are the whole model (4 bytes a parameter): the model gathered
  // whole beside them would have been twice that.
  int64_t model_bytes = 0;
  for (const Parameter* p : three.model.parameters()) model_bytes += 4 * p->numel();
  EXPECT_LT(saved, 2 * model_bytes);
}

TEST(Zero3Checkpoint, AResumeReadsEachSliceAndGoesOnBitForBit) {
  testing_data::TempDir dir;
  TrainingArguments first = run(3, dir.file("s3"));  // saves at step 2 of 3
  first.max_steps = 3;
  TrainingArguments resumed = run(3, "");
  resumed.max_steps = 3;
  resumed.resume_from = dir.file("s3/checkpoint-2");
  const test::Gpt2Train straight(cpu_backend(), test::odd_config(), first);
  const test::Gpt2Train again(cpu_backend(), test::odd_config(), resumed, /*init_seed=*/7);
  ASSERT_TRUE(straight.result.error.empty()) << straight.result.error;
  ASSERT_TRUE(again.result.error.empty()) << again.result.error;
  ASSERT_EQ(straight.result.loss.size(), 3u);
  ASSERT_EQ(again.result.loss.size(), 1u);
  EXPECT_TRUE(test::same_bits(std::vector<double>{straight.result.loss[2]}, again.result.loss));
  // The checkpoint's weights are read into host staging and each slice kept: the resumed run's
  // weights never exceed the uninterrupted run's (loading them whole held the shards and the
  // model at once).
  EXPECT_EQ(at(again.dev.pool().stats().max_by_category, Category::weights),
            at(straight.dev.pool().stats().max_by_category, Category::weights));
}

}  // namespace zero3_checkpoint_test
}  // namespace
}  // namespace snug
