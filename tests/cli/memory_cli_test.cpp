// `snug plan --find-max-batch/--find-max-seq-len/--memory-timeline`, `snug estimate`,
// `snug train --memory-timeline` and `snug plot-memory`, as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace memory_cli_test {

using ::testing::HasSubstr;

int64_t plan_peak(const std::string& flags, const TempDir& tmp) {
  const std::string path = tmp.path("probe.json");
  const CliResult r = run_snug("plan " + flags + " --json " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return read_json(path)["memory"]["peak_bytes"].get<int64_t>();
}

TEST(MemoryCli, FindMaxBatchAnswerFitsAndOneMoreDoesNot) {
  TempDir tmp;
  const std::string base = "--model gpt2-tiny --seq-len 64";
  // A capacity between the peaks at batch 6 and 7.
  const int64_t capacity = plan_peak(base + " --per-device-train-batch-size 6", tmp) + 1;
  const std::string path = tmp.path("plan.json");
  const CliResult r = run_snug("plan " + base + " --device-memory " + std::to_string(capacity) +
                               " --find-max-batch --find-max-seq-len --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("largest --per-device-train-batch-size that fits"));
  const nlohmann::json j = read_json(path);
  const int64_t B = j["max_batch"].get<int64_t>();
  EXPECT_EQ(B, 6);
  EXPECT_LE(plan_peak(base + " --per-device-train-batch-size " + std::to_string(B), tmp), capacity);
  EXPECT_GT(plan_peak(base + " --per-device-train-batch-size " + std::to_string(B + 1), tmp),
            capacity);
  EXPECT_EQ(j["max_batch_search"]["above"], B + 1);
  EXPECT_TRUE(j.contains("max_seq_len"));
  EXPECT_GE(j["max_seq_len"].get<int64_t>(), 1);
}

TEST(MemoryCli, FindMaxBatchNeedsDeviceMemory) {
  const CliResult r = run_snug("plan --find-max-batch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--device-memory"));
}

TEST(MemoryCli, SevenBShapePlansFromFlags) {
  TempDir tmp;
  const std::string path = tmp.path("7b.json");
  const CliResult r = run_snug(
      "plan --model gpt2-124m --n-layer 32 --n-embd 4096 --n-head 32 --n-positions 2048 "
      "--seq-len 2048 --per-device-train-batch-size 1 --gradient-checkpointing --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("6658.40M parameters"));
  const nlohmann::json j = read_json(path);
  EXPECT_EQ(j["config"]["model_shape"]["n_layer"], 32);
  EXPECT_EQ(j["memory"]["max_by_category"]["weights"], int64_t{4} * 6658404352);
  const CliResult bad = run_snug("plan --n-embd 100 --n-head 3");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("not divisible by --n-head 3"));
}

TEST(MemoryCli, EstimateBesideThePlan) {
  TempDir tmp;
  const std::string path = tmp.path("est.json");
  const CliResult r = run_snug(
      "estimate --model gpt2-124m --per-device-train-batch-size 2 --seq-len 128 --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("est/plan"));
  EXPECT_THAT(r.out, HasSubstr("Korthikanti"));
  const nlohmann::json j = read_json(path);
  EXPECT_EQ(j["estimate"]["model_states"]["estimate_bytes"], int64_t{16} * 124439808);
  EXPECT_EQ(j["estimate"]["model_states"]["plan_bytes"], int64_t{16} * 124439808);
  EXPECT_EQ(j["estimate"]["peak"]["plan_bytes"], j["memory"]["peak_bytes"]);
}

// At ZeRO stage 3 the plan beside the formula is a rank's kept model states: its weight shards
// (not the whole model it builds first), gradients and optimizer state. gpt2-124m's fp32 AdamW
// over 4 ranks: 16 bytes x 124,439,808 / 4, the formula to the byte.
TEST(MemoryCli, EstimateAtStageThreeHasTheRanksPlanBesideTheFormula) {
  TempDir tmp;
  const std::string path = tmp.path("est.json");
  const CliResult r = run_snug(
      "estimate --model gpt2-124m --per-device-train-batch-size 2 --seq-len 128 --zero-stage 3 "
      "--world-size 4 --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json stage3 = read_json(path)["estimate"]["zero"]["stages"][3];
  EXPECT_EQ(stage3["bytes_per_rank"], int64_t{16} * 124439808 / 4);
  EXPECT_EQ(stage3["plan_bytes"], int64_t{16} * 124439808 / 4);
  EXPECT_THAT(r.out, HasSubstr("stage 3's plan counts the weights a rank keeps"));
}

// --advise on a --qlora run: the advisor also tries an fp32 and an 8-bit base, which are not the
// QLoRA recipe any more; it used to keep --qlora on them and fail ("--qlora needs a 4-bit base").
// Every fitting row is listed (--advise-top), since the 4-bit ones rank first.
TEST(MemoryCli, AdviseOnAQloraRunTriesEveryBase) {
  TempDir tmp;
  const std::string path = tmp.path("plan.json");
  const CliResult r = run_snug(
      "plan --model llama-tiny --qlora --seq-len 64 --device-memory 1GiB --advise --gemm-gflops "
      "100 --advise-top 1000 --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(path);
  bool fp32_base = false, int8_base = false;
  for (const auto& row : j["advice"]["configurations"]) {
    const std::string flags = row["flags"].get<std::string>();
    if (flags.find("--load-in-8bit") != std::string::npos) int8_base = true;
    if (flags.find("--load-in-") == std::string::npos) fp32_base = true;
  }
  EXPECT_TRUE(fp32_base) << j["advice"].dump(1);
  EXPECT_TRUE(int8_base) << j["advice"].dump(1);
  // Everything fits 1 GiB, and the run's own 4-bit base ranks first among equal times.
  EXPECT_EQ(j["advice"]["fitting"], j["advice"]["tried"]);
  const std::string top = j["advice"]["configurations"][0]["flags"];
  EXPECT_NE(top.find("--load-in-4bit"), std::string::npos) << top;
}

// --find-max-batch, --advise and `snug estimate` on an encoder (bert-tiny, both heads) and a
// decoder family (llama-tiny), as on gpt2 above: the search's answer is exact, the advisor's top
// command plans to the peak it reports, the estimate's model states are 16 bytes a parameter.
TEST(MemoryCli, FindMaxBatchAdviseAndEstimateOnBertAndLlama) {
  TempDir tmp;
  for (const char* model :
       {"bert-tiny --task masked-lm",
        "bert-tiny --task sequence-classification --num-labels 2 --data dummy", "llama-tiny"}) {
    SCOPED_TRACE(model);
    const std::string base = std::string("--model ") + model + " --seq-len 64";
    // A capacity between the peaks at batch 6 and 7.
    const int64_t capacity = plan_peak(base + " --per-device-train-batch-size 6", tmp) + 1;
    const std::string path = tmp.path("plan.json");
    const CliResult r = run_snug(
        "plan " + base + " --per-device-train-batch-size 4 --device-memory " +
        std::to_string(capacity) + " --find-max-batch --advise --gemm-gflops 100 --json " + path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = read_json(path);
    EXPECT_EQ(j["max_batch"], 6);
    const nlohmann::json& a = j["advice"];
    EXPECT_EQ(a["target_batch"], 4);
    EXPECT_GT(a["fitting"].get<int64_t>(), 0);
    EXPECT_LE(a["fitting"].get<int64_t>(), a["tried"].get<int64_t>());
    // LOMO and AdaLOMO on the splits that accumulate, at least, are refused without a row.
    EXPECT_GT(a["refused"].get<int64_t>(), 0);
    ASSERT_FALSE(a["configurations"].empty());
    for (const auto& row : a["configurations"])
      EXPECT_LE(row["peak_bytes"].get<int64_t>(), capacity) << row["flags"];
    const nlohmann::json& top = a["configurations"][0];
    const std::string command = top["command"].get<std::string>();
    const std::string train = "snug train " + base.substr(0, base.find(" --seq-len"));
    ASSERT_EQ(command.rfind(train, 0), 0u) << command;
    EXPECT_EQ(plan_peak(command.substr(std::string("snug train ").size()), tmp),
              top["peak_bytes"].get<int64_t>())
        << command;

    const CliResult e =
        run_snug("estimate " + base + " --per-device-train-batch-size 4 --json " + path);
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const nlohmann::json est = read_json(path);
    const int64_t params = est["estimate"]["params"].get<int64_t>();
    EXPECT_GT(params, 0);
    EXPECT_EQ(est["estimate"]["model_states"]["estimate_bytes"], 16 * params);  // fp32 AdamW
    EXPECT_EQ(est["estimate"]["model_states"]["plan_bytes"], 16 * params);
    EXPECT_EQ(est["estimate"]["peak"]["plan_bytes"], est["memory"]["peak_bytes"]);
  }
}

TEST(MemoryCli, TrainTimelinePeakIsTheReportsPeakAndPlots) {
  TempDir tmp;
  const std::string tl = tmp.path("tl.json"), report = tmp.path("r.json");
  const CliResult r = run_snug(
      "train --model gpt2-tiny --data dummy --per-device-train-batch-size 2 --seq-len 32 "
      "--max-steps 2 --memory-timeline " +
      tl + " --report-json " + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json t = read_json(tl);
  const nlohmann::json rep = read_json(report);
  EXPECT_EQ(t["device"], "cpu");
  EXPECT_EQ(t["peak_bytes"], rep["memory"]["peak_bytes"]);
  int64_t live = 0, max_live = 0;
  for (const auto& e : t["events"]) {
    live += (e["action"] == "alloc" ? 1 : -1) * e["bytes"].get<int64_t>();
    max_live = std::max(max_live, live);
  }
  EXPECT_EQ(max_live, rep["memory"]["peak_bytes"].get<int64_t>());

  const std::string svg = tmp.path("tl.svg");
  const CliResult p = run_snug("plot-memory " + tl + " -o " + svg + " --step 1");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  std::ifstream in(svg);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_THAT(ss.str(), HasSubstr("allocations and frees of step 1"));
  EXPECT_THAT(ss.str(), HasSubstr("activations"));

  const CliResult png = run_snug("plot-memory " + tl + " -o " + tmp.path("tl.png"));
  EXPECT_EQ(png.exit_code, 2);
  EXPECT_THAT(png.err, HasSubstr("PNG output is not supported"));
}

TEST(MemoryCli, PlanWritesATimeline) {
  TempDir tmp;
  const std::string tl = tmp.path("tl.json"), plan = tmp.path("plan.json");
  const CliResult r =
      run_snug("plan --model gpt2-tiny --memory-timeline " + tl + " --json " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json t = read_json(tl);
  EXPECT_EQ(t["device"], "meta");
  EXPECT_EQ(t["steps"], 2);
  EXPECT_EQ(t["peak_bytes"], read_json(plan)["memory"]["peak_bytes"]);
}

}  // namespace memory_cli_test
}  // namespace
}  // namespace snug::test
