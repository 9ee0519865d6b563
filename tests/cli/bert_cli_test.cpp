// BERT from the command line: a masked-LM run with dropout resumed from its checkpoint ends with
// the uninterrupted run's weights bit for bit (the masks are keyed by seed, step and site, the
// collator by seed and step), --task is refused for a model without the head, and `bench seeds
// --plan-only` prints the seeds' bert-large table with the differences docs/memory.md explains.
#include <gtest/gtest.h>

#include <string>

#include "io/fnv1a.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace bert_cli_test {

using test::CliResult;
using test::run_snug;
using test::TempDir;

std::string model_hash(const std::string& checkpoint) {
  return std::to_string(fnv1a64_file(checkpoint + "/model.safetensors"));
}

TEST(BertCli, ResumeWithDropoutIsBitExact) {
  for (const char* task : {"masked-lm", "sequence-classification"}) {
    SCOPED_TRACE(task);
    TempDir tmp;
    const std::string run = std::string("train --model bert-tiny --task ") + task +
                            " --data dummy --seq-len 32 --per-device-train-batch-size 2 "
                            "--attention naive --max-steps 4 --save-steps 2 --output-dir ";
    CliResult r = run_snug(run + tmp.path("a"), 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_snug(run + tmp.path("a") + " --resume-from " + tmp.path("a") + "/checkpoint-2", 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The same run uninterrupted, elsewhere.
    const std::string whole = model_hash(tmp.path("a") + "/checkpoint-4");
    TempDir other;
    r = run_snug(run + other.path("b"), 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(model_hash(other.path("b") + "/checkpoint-4"), whole);
  }
}

TEST(BertCli, TaskWithoutTheHeadIsRefusedByName) {
  CliResult r = run_snug("train --model gpt2-tiny --task masked-lm --max-steps 1", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--task masked-lm"), std::string::npos) << r.err;
  r = run_snug("train --model bert-tiny --task causal-lm --max-steps 1", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("causal-lm"), std::string::npos) << r.err;
  r = run_snug("train --model bert-tiny --task sequence-classification --max-steps 1", 60);
  EXPECT_EQ(r.exit_code, 1);  // builtin data has no labels
  EXPECT_NE(r.err.find("--data dummy"), std::string::npos) << r.err;
}

TEST(BertCli, SeedsTablePlanOnly) {
  const CliResult r =
      run_snug("bench seeds --model bert-large-uncased --device-memory v100-16gb --plan-only", 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Every row of the guide, with the measured figure and the difference; the accumulation rows
  // within 10% of the seed, the four batch-4 rows beyond it (docs/memory.md says why).
  for (const char* line :
       {"vanilla             B=4                                              10528         11871 "
        "        14949    -20.6%",
        "grad_accum          B=1, accum 4                                      6782          8125 "
        "         8681     -6.4%",
        "grad_ckpt           B=1, accum 4, ckpt                                5241          6584 "
        "         6775     -2.8%",
        "fp16                B=4, fp16                                         8378          9721 "
        "        13939    -30.3%",
        "combined            B=1, accum 4, ckpt, fp16                          5837          7180 "
        "         7275     -1.3%",
        "adafactor           B=4, adafactor                                    7974          9317 "
        "        12295    -24.2%",
        "adafactor_combined  B=1, accum 4, ckpt, fp16, adafactor               3283          4626 "
        "         4847     -4.6%",
        "adamw_8bit          B=4, adamw_bnb_8bit                               8622          9965 "
        "        13085    -23.8%",
        "all                 B=1, accum 4, ckpt, fp16, adamw_bnb_8bit          3930          5273 "
        "         5363     -1.7%"})
    EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "\n" << r.out;
}

}  // namespace bert_cli_test
}  // namespace
}  // namespace snug
