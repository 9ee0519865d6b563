// Model shapes from flags (ModelShapeOverrides) and the exact fit searches over dry runs
// (plan/fit_search.h): the answer fits and one more does not, checked by two more dry runs.
#include "plan/fit_search.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "models/gpt2/gpt2_config.h"
#include "plan/what_if.h"
#include "support/configs.h"
#include "support/memory_checks.h"

namespace snug {
namespace {
namespace fit_search_test {

using test::at;

TrainingArguments tiny_args(int64_t B, int64_t T) {
  TrainingArguments a;
  a.model = "gpt2-tiny";
  a.per_device_train_batch_size = B;
  a.seq_len = T;
  return a;
}

TEST(ModelShapeOverrides, SevenBShapeFromFlags) {
  const ModelShapeOverrides o = test::seven_b_shape();
  const GPT2Config c = resolve_gpt2("gpt2-124m", o);
  EXPECT_EQ(c.n_layer, 32);
  EXPECT_EQ(c.head_size(), 128);
  EXPECT_EQ(c.vocab_size, 50257);  // from the preset
  // V*C + P*C + L*(12C^2 + 13C) + 2C
  const int64_t C = 4096;
  EXPECT_EQ(c.num_params(), 50257 * C + 2048 * C + 32 * (12 * C * C + 13 * C) + 2 * C);
  EXPECT_EQ(c.num_params(), 6658404352);
  EXPECT_EQ(c.name, "gpt2-124m n_layer=32 n_embd=4096 n_head=32 n_positions=2048");
}

TEST(ModelShapeOverrides, RejectsImpossibleShapesNamingTheFlag) {
  ModelShapeOverrides o;
  o.n_embd = 100;
  o.n_head = 3;
  try {
    resolve_gpt2("gpt2-tiny", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--n-embd 100 is not divisible by --n-head 3"),
              std::string::npos)
        << e.what();
  }
  ModelShapeOverrides z;
  z.n_layer = 0;
  EXPECT_THROW(resolve_gpt2("gpt2-tiny", z), Error);
}

TEST(ModelShapeOverrides, SevenBDryRunIsFourFourEightBytesPerParameter) {
  TrainingArguments a;
  a.model = "gpt2-124m";
  a.model_shape = test::seven_b_shape();
  a.seq_len = 2048;
  a.per_device_train_batch_size = 1;
  a.gradient_checkpointing = true;
  const int64_t P = a.model_config().num_params;
  const MemoryStats m = dry_run(a);
  EXPECT_EQ(at(m.max_by_category, Category::weights), 4 * P);
  EXPECT_EQ(at(m.max_by_category, Category::gradients), 4 * P);
  EXPECT_EQ(at(m.max_by_category, Category::optimizer_state), 8 * P);
}

TEST(FitSearch, MaxBatchFitsAndOneMoreDoesNot) {
  const TrainingArguments a = tiny_args(8, 64);
  // A capacity just above the peak at batch 5: the answer must be 5.
  const int64_t capacity = dry_run(tiny_args(5, 64)).peak_total + 1;
  const FitSearchResult r = find_max_fit(a, FitDimension::batch, capacity, 0, 1 << 20);
  EXPECT_EQ(r.value, 5);
  EXPECT_FALSE(r.capped);
  EXPECT_EQ(r.above, 6);
  // The two dry runs that make it the answer.
  EXPECT_LE(dry_run(tiny_args(r.value, 64)).peak_total, capacity);
  EXPECT_GT(dry_run(tiny_args(r.value + 1, 64)).peak_total, capacity);
  EXPECT_EQ(r.peak_bytes, dry_run(tiny_args(5, 64)).peak_total);
  EXPECT_EQ(r.above_peak, dry_run(tiny_args(6, 64)).peak_total);
}

TEST(FitSearch, RuntimeOverheadCountsAgainstTheCapacity) {
  const TrainingArguments a = tiny_args(8, 64);
  const int64_t peak5 = dry_run(tiny_args(5, 64)).peak_total;
  const FitSearchResult r =
      find_max_fit(a, FitDimension::batch, peak5 + 1000 + 1, 1000, int64_t{1} << 20);
  EXPECT_EQ(r.value, 5);
}

TEST(FitSearch, MaxSeqLenAndTheCap) {
  const TrainingArguments a = tiny_args(4, 128);
  const int64_t capacity = dry_run(tiny_args(4, 100)).peak_total;  // exactly fits at 100
  const FitSearchResult r = find_max_fit(a, FitDimension::seq_len, capacity, 0, 256);
  ASSERT_GE(r.value, 100);
  EXPECT_LE(dry_run(tiny_args(4, r.value)).peak_total, capacity);
  EXPECT_GT(dry_run(tiny_args(4, r.value + 1)).peak_total, capacity);
  // Plenty of memory: the model's context (256 for gpt2-tiny) is the answer.
  const FitSearchResult big = find_max_fit(a, FitDimension::seq_len, int64_t{1} << 40, 0, 256);
  EXPECT_EQ(big.value, 256);
  EXPECT_TRUE(big.capped);
}

TEST(FitSearch, NothingFitsGivesZero) {
  const FitSearchResult r =
      find_max_fit(tiny_args(8, 64), FitDimension::batch, 1000, 0, int64_t{1} << 20);
  EXPECT_EQ(r.value, 0);
  EXPECT_EQ(r.above, 1);
  EXPECT_GT(r.above_peak, 1000);
}

}  // namespace fit_search_test
}  // namespace
}  // namespace snug
