// A checkpoint never holds non-finite weights (issue 29, item 3): a run whose update made a
// weight NaN without a non-finite loss (here a position row the batches never reach, so the loss
// stays finite while the weight stays NaN) wrote an all-NaN-able checkpoint and exited 0. The
// save is refused naming the parameter and the element, and nothing is left on disk.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/run_cli.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace checkpoint_finite_test {

namespace fs = std::filesystem;

TEST(CheckpointFinite, NonFiniteWeightsAreNotSaved) {
  test::TempDir tmp;
  TrainingArguments a;
  a.model = "gpt2-tiny";
  a.seq_len = 16;
  a.per_device_train_batch_size = 2;
  a.max_steps = 1;
  a.save_steps = 1;
  a.output_dir = tmp.path("out");
  Device dev(cpu_backend());
  const GPT2Config cfg = resolve_gpt2(a.model);
  GPT2 model(cfg, dev);
  model.init_weights(42);
  Parameter* wpe = model.find("transformer.wpe.weight");
  ASSERT_NE(wpe, nullptr);
  ASSERT_GT(cfg.n_positions, 100);
  const int64_t element = 100 * cfg.n_embd + 3;  // position 100: beyond --seq-len 16
  wpe->value.data<float>()[element] = std::numeric_limits<float>::quiet_NaN();
  const auto data = open_dataset(a.data, cfg.vocab_size, a.seed);
  Trainer trainer(a, model, data.get());
  const TrainResult r = trainer.train();
  EXPECT_EQ(r.error, (fs::path(a.output_dir) / "checkpoint-1").string() +
                         ": not saved: parameter 'transformer.wpe.weight' holds nan at element " +
                         std::to_string(element) +
                         " after step 1; training diverged (lower --learning-rate or check the "
                         "optimizer's flags)");
  EXPECT_TRUE(r.checkpoints.empty());
  EXPECT_FALSE(fs::exists(fs::path(a.output_dir) / "checkpoint-1"));
  EXPECT_FALSE(fs::exists(fs::path(a.output_dir) / "checkpoint-1.tmp"));
}

}  // namespace checkpoint_finite_test
}  // namespace
}  // namespace snug
