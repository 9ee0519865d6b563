// ZeRO's per-rank model states (plan/zero_states.h): the paper's figure-1 numbers for a
// 7.5e9-parameter model under --precision-layout deepspeed (K = 12) at N = 64, another layout's
// own K, and the advisor's smallest world per stage (formula, then a meta replay at stages 1-2
// equal to the plan of that world).
#include "plan/zero_states.h"

#include <gtest/gtest.h>

#include "plan/dry_run.h"
#include "plan/estimate.h"

namespace snug {
namespace {
namespace zero_states_test {

TrainingArguments llama_7_5b() {
  TrainingArguments a;
  a.model = "llama-7b";
  a.model_shape.n_layer = 36;
  a.model_shape.vocab_size = 26000;
  a.per_device_train_batch_size = 1;
  a.seq_len = 128;
  a.precision_layout = "deepspeed";
  return a;
}

TEST(ZeroStates, PapersFigureOneAtSixtyFourRanks) {
  const MemoryEstimate est = estimate_memory(llama_7_5b());
  const int64_t P = est.params;  // 7,498,797,056
  ASSERT_EQ(P, 7498797056);
  const auto rows = zero_model_states(est, 64);
  EXPECT_EQ(rows[0].bytes, 16 * P);                      // 120.0 GB
  EXPECT_EQ(rows[1].bytes, 4 * P + (12 * P + 63) / 64);  // 31.4 GB
  EXPECT_EQ(rows[2].bytes, 2 * P + (14 * P + 63) / 64);  // 16.6 GB
  EXPECT_EQ(rows[3].bytes, (16 * P + 63) / 64);          // 1.875 GB
  EXPECT_EQ(rows[3].bytes, 1874699264);
  EXPECT_EQ(rows[0].formula, "(2+2+12)Ψ");
  EXPECT_EQ(rows[1].formula, "(2+2)Ψ + 12Ψ/N");
  EXPECT_EQ(rows[2].formula, "2Ψ + (2+12)Ψ/N");
  EXPECT_EQ(rows[3].formula, "(2+2+12)Ψ/N");
  const nlohmann::json j = zero_states_json(est, 64, 0, 16 * P);
  EXPECT_EQ(j["k"], 12.0);
  EXPECT_EQ(j["stages"][3]["bytes_per_rank"], 1874699264);
  EXPECT_EQ(j["stages"][0]["plan_bytes"], 16 * P);
  EXPECT_FALSE(j["stages"][1].contains("plan_bytes"));
}

TEST(ZeroStates, TableKeepsItsColumns) {
  const MemoryEstimate est = estimate_memory(llama_7_5b());
  const std::string t = zero_states_table(est, 64, 3, 1874699264);
  // Each row's bytes end in the header's column, though Ψ is two bytes of UTF-8: the column
  // where `text` ends on its line, in characters.
  const auto end_column = [&](const std::string& text) {
    const size_t at = t.find(text);
    EXPECT_NE(at, std::string::npos) << text;
    size_t chars = 0;
    for (size_t i = t.rfind('\n', at) + 1; i < at + text.size(); ++i)
      chars += (static_cast<unsigned char>(t[i]) & 0xC0) != 0x80;
    return chars;
  };
  for (const char* bytes : {"119980752896", "31401212672", "16637955968", "1874699264"})
    EXPECT_EQ(end_column(bytes), end_column("bytes per rank")) << bytes << "\n" << t;
  EXPECT_NE(t.find("(2+2+12)Ψ/N                      1874699264      1.875       1874699264\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\nstage 3's plan counts the weights a rank keeps, its shards"),
            std::string::npos)
      << t;
}

TEST(ZeroStates, Fp32AdamWHasItsOwnK) {
  TrainingArguments a;
  a.model = "gpt2-124m";
  const MemoryEstimate est = estimate_memory(a);
  const auto rows = zero_model_states(est, 4);
  EXPECT_EQ(rows[1].formula, "(4+4)Ψ + 8Ψ/N");
  EXPECT_EQ(rows[1].bytes, 8 * est.params + (8 * est.params + 3) / 4);
}

TEST(ZeroStates, AdvisorFindsTheSmallestWorldPerStageAndReplaysEachStage) {
  TrainingArguments a;
  a.model = "gpt2-124m";
  a.per_device_train_batch_size = 1;
  a.seq_len = 128;
  const int64_t one = dry_run(a).peak_total;
  const int64_t capacity = one - 1;  // one process does not fit by a byte
  const auto fits = zero_fits(a, {}, capacity, 0);
  EXPECT_EQ(fits[0].world, 0);  // stage 0 never shrinks a rank
  for (int s = 1; s <= 3; ++s) {
    ASSERT_GT(fits[s].world, 1) << s;
    EXPECT_TRUE(fits[s].replayed) << s << " " << fits[s].note;
    TrainingArguments z = a;
    z.zero_stage = s;
    const auto rank0 = [&](int64_t world) {
      return replay(z, {.world_size = static_cast<int>(world)}).memory.peak_total;
    };
    const int64_t peak = rank0(fits[s].world);
    EXPECT_EQ(fits[s].peak, peak) << s;
    EXPECT_LE(peak, capacity) << s;
    // Half the world does not fit (or is one process).
    if (fits[s].world > 2) {
      EXPECT_GT(rank0(fits[s].world / 2), capacity);
    }
  }
  // A stage that refuses the run keeps the formula's figure and says why: stage 3 under --bf16
  // (mixed precision casts every GEMM weight whole at the start of a forward).
  TrainingArguments mixed = a;
  mixed.bf16 = true;
  const auto mixed_fits = zero_fits(mixed, {}, dry_run(mixed).peak_total - 1, 0);
  EXPECT_GT(mixed_fits[3].world, 0);
  EXPECT_FALSE(mixed_fits[3].replayed);
  EXPECT_NE(mixed_fits[3].note.find("--zero-stage 3"), std::string::npos) << mixed_fits[3].note;
  // The deepspeed layout at stages 1-2 is replayed too (a bf16 flat layout, fp32 master and
  // moments per piece): 7.5B at stage 1 fits 80 GB on 2 ranks, 4P + 12P/2 + the rest.
  TrainingArguments ds_run = llama_7_5b();
  const auto ds = zero_fits(ds_run, {}, int64_t{80} * 1000 * 1000 * 1000, 0);
  EXPECT_EQ(ds[1].world, 2);
  EXPECT_TRUE(ds[1].replayed) << ds[1].note;
  ds_run.zero_stage = 1;
  EXPECT_EQ(ds[1].peak, replay(ds_run, {.world_size = 2}).memory.peak_total);
  EXPECT_EQ(ds[1].peak, 75470578176);
}

}  // namespace zero_states_test
}  // namespace
}  // namespace snug
