// Plans for the data given (issue 26, point 4): `snug plan` on jsonl data replays the run's own
// batches (padded to each batch's longest row, or packed with position ids, and its
// evaluations), so its peak is the run's to the byte; the what-if table a run prints after
// itself replays the run's data too, so its baseline is the peak measured above it. Without data
// the plan says that it assumed full rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace plan_data_cli_test {

namespace fs = std::filesystem;

const fs::path kExamples = fs::path(SNUG_TEST_DATA_DIR).parent_path().parent_path() / "examples";

// The README's step 2 ("Fine-tuning end to end, offline"): QLoRA on the arithmetic
// instructions with evaluation, from the tiny-llama folder (config and tokenizer: the base's
// values do not change a byte of memory), evaluating every `eval_steps`.
std::string readme_qlora_flags(int eval_steps = 25) {
  return " --model " + (kExamples / "tiny-llama").string() + " --data " +
         (kExamples / "arithmetic-instructions.jsonl").string() +
         " --qlora --target-modules all-linear --lora-r 16 --lora-alpha 32"
         " --per-device-train-batch-size 16 --seq-len 32 --learning-rate 2e-3"
         " --eval-split 0.1 --eval-steps " +
         std::to_string(eval_steps);
}

struct Compared {
  nlohmann::json plan, train;
};

// `snug plan FLAGS --json` and `snug train FLAGS --report-json`, both exiting 0, the plan saying
// "batches: <batches>".
Compared plan_and_run(const TempDir& tmp, const std::string& flags,
                      const std::string& batches = "replayed from jsonl") {
  const std::string plan = tmp.path("plan.json"), train = tmp.path("train.json");
  const CliResult p = run_snug("plan" + flags + " --json " + plan, 300);
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("batches: " + batches), std::string::npos) << p.out;
  const CliResult t =
      run_snug_env("OMP_NUM_THREADS=1 ", "train" + flags + " --report-json " + train, 300);
  EXPECT_EQ(t.exit_code, 0) << t.err;
  if (p.exit_code != 0 || t.exit_code != 0) return {};
  return {read_json(plan), read_json(train)};
}

// Every what-if row's peak and saving add up to the baseline: the run's measured peak.
void expect_what_if_baseline(const nlohmann::json& report) {
  const int64_t peak = report["memory"]["peak_bytes"];
  ASSERT_GT(report["what_if"].size(), 0u);
  for (const auto& row : report["what_if"])
    EXPECT_EQ(row["peak_bytes"].get<int64_t>() + row["saves_bytes"].get<int64_t>(), peak)
        << row.dump();
}

TEST(PlanData, ReadmeQloraStepPlanIsThePeakToTheByte) {
  TempDir tmp;
  const Compared c = plan_and_run(tmp, readme_qlora_flags() + " --max-steps 2");
  ASSERT_FALSE(c.plan.is_null());
  EXPECT_EQ(c.plan["memory"]["peak_bytes"], c.train["memory"]["peak_bytes"]);
  EXPECT_EQ(c.plan["memory"]["max_by_category"], c.train["memory"]["max_by_category"]);
  const nlohmann::json& b = c.plan["batch_shapes"];
  EXPECT_EQ(b["assumption"], "replayed");
  EXPECT_EQ(b["steps"], 2);
  EXPECT_EQ(b["rows"], 16);
  EXPECT_EQ(b["evaluations"], 1);  // at the end (--eval-steps 25 is past step 2)
  EXPECT_FALSE(b["packed"].get<bool>());
  // Padded to the longest row of each batch: the instructions are shorter than --seq-len.
  EXPECT_LT(b["longest_cols"].get<int64_t>(), 32);
  expect_what_if_baseline(c.train);
}

TEST(PlanData, PackedRunPlanIsThePeakToTheByte) {
  TempDir tmp;
  // Packed rows carry position ids; two micro-batches per step, evaluated at step 2 and the end.
  const Compared c = plan_and_run(
      tmp, readme_qlora_flags(2) + " --packing --gradient-accumulation-steps 2 --max-steps 3");
  ASSERT_FALSE(c.plan.is_null());
  EXPECT_EQ(c.plan["memory"]["peak_bytes"], c.train["memory"]["peak_bytes"]);
  EXPECT_EQ(c.plan["memory"]["max_by_category"], c.train["memory"]["max_by_category"]);
  const nlohmann::json& b = c.plan["batch_shapes"];
  EXPECT_EQ(b["assumption"], "replayed");
  EXPECT_TRUE(b["packed"].get<bool>());
  EXPECT_EQ(b["steps"], 3);
  EXPECT_EQ(b["evaluations"], 2);
  expect_what_if_baseline(c.train);
}

// Without data to read (a token stream) the plan says it assumed full rows, and a one-step run's
// what-if baseline is that step's peak (not a second step's, which holds optimizer state).
TEST(PlanData, FullRowsAreSaidAndAOneStepRunsWhatIfIsItsPeak) {
  TempDir tmp;
  const Compared c = plan_and_run(tmp,
                                  " --model gpt2-tiny --data dummy --per-device-train-batch-size 4"
                                  " --seq-len 32 --max-steps 1",
                                  "full rows assumed");
  ASSERT_FALSE(c.plan.is_null());
  const nlohmann::json& b = c.plan["batch_shapes"];
  EXPECT_EQ(b["assumption"], "full_rows");
  EXPECT_EQ(b["steps"], 1);
  EXPECT_EQ(b["longest_cols"], 32);
  EXPECT_FALSE(b.contains("data"));
  EXPECT_EQ(c.plan["memory"]["peak_bytes"], c.train["memory"]["peak_bytes"]);
  expect_what_if_baseline(c.train);
}

}  // namespace plan_data_cli_test
}  // namespace
}  // namespace snug::test
