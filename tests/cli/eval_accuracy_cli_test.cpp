// eval_accuracy from the command line: a BERT sequence classifier logs it on every eval line and
// writes it in the report (last value and each eval_history record, k/n of the rows evaluated),
// --metric-for-best-model eval_accuracy loads the checkpoint with the highest one, and a causal
// LM refuses it by name (exit 1).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "support/run_cli.h"

namespace snug {
namespace {
namespace eval_accuracy_cli_test {

using test::CliResult;
using test::read_json;
using test::run_snug;
using test::TempDir;

const std::string kClassifier =
    "train --model bert-tiny --task sequence-classification --num-labels 3 --data dummy "
    "--eval-split 0.0005 --seq-len 32 --per-device-train-batch-size 4 --attention naive "
    "--threads 1 --learning-rate 2e-2 ";

TEST(EvalAccuracyCli, ClassifierLogsAndReportsEvalAccuracy) {
  TempDir tmp;
  const std::string report = tmp.path("r.json");
  const CliResult r =
      run_snug(kClassifier + "--max-steps 4 --eval-steps 2 --report-json " + report, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(report);
  ASSERT_EQ(j["eval_history"].size(), 2u);
  for (const nlohmann::json& e : j["eval_history"]) {
    ASSERT_TRUE(e.contains("eval_accuracy")) << e.dump();
    EXPECT_EQ(e["eval_samples"], 16);
    // k of the 16 rows right.
    const double k = e["eval_accuracy"].get<double>() * 16;
    EXPECT_EQ(k, std::round(k)) << e.dump();
    char line[160];
    std::snprintf(line, sizeof line,
                  "eval step %lld  eval_loss %.4f  perplexity %.4g  "
                  "eval_accuracy %.4f  (16 samples)",
                  static_cast<long long>(e["step"].get<int64_t>()), e["eval_loss"].get<double>(),
                  e["perplexity"].get<double>(), e["eval_accuracy"].get<double>());
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  EXPECT_EQ(j["eval_accuracy"], j["eval_history"][1]["eval_accuracy"]);
  EXPECT_NE(r.out.find("eval_accuracy: "), std::string::npos) << r.out;
}

TEST(EvalAccuracyCli, LoadBestModelAtEndByEvalAccuracy) {
  TempDir tmp;
  const std::string report = tmp.path("r.json");
  const CliResult r = run_snug(kClassifier +
                                   "--max-steps 4 --eval-steps 1 --save-steps 1 "
                                   "--load-best-model-at-end --metric-for-best-model "
                                   "eval_accuracy --output-dir " +
                                   tmp.path("out") + " --report-json " + report,
                               300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(report);
  double best = -1;
  int64_t step = 0;
  for (const nlohmann::json& e : j["eval_history"])
    if (e["eval_accuracy"].get<double>() > best) {
      best = e["eval_accuracy"].get<double>();
      step = e["step"].get<int64_t>();
    }
  EXPECT_EQ(j["best_metric"].get<double>(), best);
  EXPECT_EQ(j["best_model_checkpoint"].get<std::string>(),
            tmp.path("out") + "/checkpoint-" + std::to_string(step));
  EXPECT_NE(r.out.find("--load-best-model-at-end: loaded " + tmp.path("out") + "/checkpoint-" +
                       std::to_string(step) + " (eval_accuracy "),
            std::string::npos)
      << r.out;
}

TEST(EvalAccuracyCli, CausalLmRefusesEvalAccuracyByName) {
  CliResult r = run_snug(
      "train --max-steps 1 --seq-len 16 --eval-split 0.01 --metric-for-best-model eval_accuracy",
      60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--metric-for-best-model eval_accuracy: accuracy is computed for --task "
                       "sequence-classification only; gpt2-tiny is --task causal-lm"),
            std::string::npos)
      << r.err;
  r = run_snug("train --max-steps 1 --metric-for-best-model f1", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--metric-for-best-model f1: snug evaluates eval_loss, and eval_accuracy"),
            std::string::npos)
      << r.err;
}

}  // namespace eval_accuracy_cli_test
}  // namespace
}  // namespace snug
