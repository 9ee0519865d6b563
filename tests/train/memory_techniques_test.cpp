// The memory effect of each technique, measured by dry runs on the meta device (the same code
// as a real run, exact bytes): issue 3's acceptance lines 2 and 3.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "plan/what_if.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace memory_techniques_test {

int64_t activations(const TrainingArguments& a) {
  return dry_run(a).max_by_category[static_cast<int>(Category::activations)];
}

TrainingArguments gpt2_124m(int64_t B, int64_t T) {
  TrainingArguments a;
  a.model = "gpt2-124m";
  a.data = "dummy";
  a.per_device_train_batch_size = B;
  a.seq_len = T;
  return a;
}

TEST(MemoryTechniques, CheckpointingCutsActivationsOnGpt2_124m) {
  TrainingArguments a = gpt2_124m(4, 512);
  const int64_t none = activations(a);
  a.gradient_checkpointing = true;
  const int64_t every_layer = activations(a);
  a.checkpoint_policy = "sqrt";
  const int64_t sqrt_policy = activations(a);
  EXPECT_LE(every_layer * 4, none) << every_layer << " vs " << none;
  EXPECT_GT(sqrt_policy, every_layer);
  EXPECT_LT(sqrt_policy, none);
}

TEST(MemoryTechniques, FlashAttentionIsLinearInSequenceLength) {
  test::TempDir tmp;
  const std::string config = tmp.path("config.json");
  std::ofstream(config) << R"({"vocab_size": 50257, "n_positions": 4096, "n_embd": 768,
                               "n_layer": 12, "n_head": 12})";
  auto ratio = [&](const char* attention) {
    TrainingArguments a;
    a.model = config;
    a.data = "dummy";
    a.per_device_train_batch_size = 1;
    a.attention = attention;
    a.seq_len = 1024;
    const double at1024 = static_cast<double>(activations(a));
    a.seq_len = 2048;
    return static_cast<double>(activations(a)) / at1024;
  };
  EXPECT_LT(ratio("flash"), 2.2);
  EXPECT_GT(ratio("naive"), 2.7);
}

}  // namespace memory_techniques_test
}  // namespace
}  // namespace snug
