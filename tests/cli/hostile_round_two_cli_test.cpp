// Hostile input, round two (issue 29): flag values that crashed snug or ran a silently wrong
// computation (items 1 and 5): each numeric flag's declared range refuses them with one message
// naming the flag, the value and the range (exit 1; 2 for a value that does not parse), and a
// file size limit ends a save with a message, never a signal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace hostile_round_two_cli_test {

using ::testing::HasSubstr;

// Item 1: --lora-r was unbounded: 2^58 aborted ("category optimizer_state went negative", 134),
// 2^62 wrapped into a size that reached the GEMM, and plan said 2^62 fits with 0 trainable.
TEST(HostileRoundTwoCli, HugeLoraRankIsRefusedByItsRange) {
  for (const char* cmd : {"train --max-steps 1", "plan"}) {
    const CliResult r =
        run_snug(std::string(cmd) + " --model gpt2-tiny --seq-len 16 --lora-r 288230376151711744");
    EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.err;
    EXPECT_EQ(r.err,
              "snug: error: --lora-r 288230376151711744 is out of range: --lora-r takes an "
              "integer in [0, 65536]\n")
        << cmd;
  }
  const CliResult r = run_snug("plan --model gpt2-124m --lora-r 4611686018427387904");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--lora-r 4611686018427387904 is out of range"));
}

// Item 1: --threads 100000 died by SIGSEGV inside the OpenMP runtime (train and generate).
TEST(HostileRoundTwoCli, HugeThreadCountIsRefusedByItsRange) {
  for (const char* cmd : {"train --max-steps 1", "generate --prompt hi --max-new-tokens 1"}) {
    const CliResult r = run_snug(std::string(cmd) + " --threads 100000", 60);
    EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.err;
    EXPECT_EQ(r.err,
              "snug: error: --threads 100000 is out of range: --threads takes an integer in [0, "
              "1024]\n")
        << cmd;
  }
}

// Item 1: a checkpoint save past `ulimit -f` died by SIGXFSZ (exit 153); with the signal
// ignored the write fails with EFBIG and the run ends with the file and the reason.
TEST(HostileRoundTwoCli, FileSizeLimitIsAMessageNotASignal) {
  TempDir tmp;
  const CliResult r = run_snug_env(
      "ulimit -f 64; ", "train --max-steps 1 --save-steps 1 --output-dir " + tmp.path("out"), 120);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("File too large"));
  EXPECT_THAT(r.err, HasSubstr(tmp.path("out")));
}

// Item 5: values that wrapped or saturated: an integer beyond 64 bits does not parse (exit 2),
// "" is not 0, and a number out of range names the range.
TEST(HostileRoundTwoCli, NumbersThatWrappedOrMeantNothingAreRefused) {
  CliResult r = run_snug("train --max-steps 1 --seed 18446744073709551616");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--seed '18446744073709551616' does not parse: --seed takes an "
                               "integer in [0, 18446744073709551615]"));
  r = run_snug("train --max-steps 1 --seed -1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_snug("train --max-steps 1 --learning-rate ''");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--learning-rate '' does not parse"));
  r = run_snug("export-init --max-steps 4611686018427387904 --gradient-accumulation-steps 4");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--max-steps 4611686018427387904 is out of range"));
  r = run_snug("quantize --method nf4 --block-size 9223372036854775807");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--block-size 9223372036854775807 is out of range"));
  r = run_snug("generate --prompt hi --temperature 1e-45 --do-sample");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--temperature 1e-45 is out of range"));
  r = run_snug("generate --prompt hi --num-beams 2 --length-penalty nan");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--length-penalty nan is out of range"));
  r = run_snug("generate --prompt hi --max-new-tokens 9223372036854775807");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--max-new-tokens 9223372036854775807 is out of range"));
  r = run_snug("plan --num-beams 9223372036854775807 --inference");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--num-beams 9223372036854775807 is out of range"));
  r = run_snug("plan --device-memory 9223372036854775807");  // 2^63-1 is "at most 2^63-1"
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_snug("plan --seq-len 2147483647");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--seq-len 2147483647 is out of range"));
}

// Item 3: hyperparameters that wrote an all-NaN checkpoint with exit 0.
TEST(HostileRoundTwoCli, NonFiniteOrDegenerateHyperparametersAreRefused) {
  for (const char* flag : {"--adam-epsilon nan", "--adam-epsilon 0", "--learning-rate inf",
                           "--weight-decay inf", "--galore-scale nan", "--adam-beta1 0.999999999",
                           "--lora-alpha 1e308", "--neftune-noise-alpha inf"}) {
    const CliResult r = run_snug(std::string("train --max-steps 1 ") + flag);
    EXPECT_EQ(r.exit_code, 1) << flag << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(std::string(flag) + " is out of range")) << flag;
  }
}

}  // namespace hostile_round_two_cli_test
}  // namespace
}  // namespace snug::test
