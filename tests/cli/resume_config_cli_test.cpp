// What a resume may change (issue 15, defect 3; docs/checkpoints.md): settings that would make
// the saved state wrong (model, data, sequence length, optimizer and its settings, the quantized
// base) are refused with one message naming the field, the flag and both values; the changes
// the Hugging Face Trainer allows on resume (learning rate, batch size, max steps, logging and
// save cadence) are accepted and printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace resume_config_cli_test {

using ::testing::HasSubstr;

// `snug train` with the run's flags, `over` replacing or adding some.
std::string train_flags(const std::map<std::string, std::string>& over) {
  std::map<std::string, std::string> f = {
      {"--model", "gpt2-tiny"},    {"--seq-len", "32"},  {"--per-device-train-batch-size", "2"},
      {"--learning-rate", "1e-3"}, {"--log-every", "1"}, {"--max-steps", "4"}};
  for (const auto& [k, v] : over) f[k] = v;
  std::string s = "train";
  for (const auto& [k, v] : f) s += " " + k + " " + v;
  return s;
}

void write_text(const std::string& path, const std::string& line, int copies) {
  std::ofstream f(path);
  for (int i = 0; i < copies; ++i) f << line << " " << i << "\n";
}

// A 4-step run on a text file saving checkpoint-2 and checkpoint-4.
class ResumeConfigCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.path("a.txt");
    write_text(data_, "the quick brown fox jumps over the lazy dog", 200);
    const CliResult r =
        run_snug(train_flags({{"--data", data_}, {"--save-steps", "2"}, {"--output-dir", out()}}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string out() const { return tmp_.path("out"); }
  // Resumes checkpoint-2 with the run's flags, `over` replacing some.
  CliResult resume(std::map<std::string, std::string> over) const {
    over.emplace("--data", data_);
    over["--resume-from"] = out() + "/checkpoint-2";
    return run_snug(train_flags(over));
  }
  TempDir tmp_;
  std::string data_;
};

TEST_F(ResumeConfigCli, ChangesThatMakeTheStateWrongAreRefusedNamingFieldAndValues) {
  const std::string other = tmp_.path("b.txt");
  write_text(other, "pack my box with five dozen liquor jugs", 200);
  struct Case {
    std::map<std::string, std::string> flags;
    std::string field, saved, now;
  };
  const Case cases[] = {
      {{{"--data", other}}, "data.fnv1a64", "\"", "\""},
      {{{"--data", "builtin"}}, "data.source", "\"file\"", "\"builtin\""},
      {{{"--seq-len", "16"}}, "seq_len", "32", "16"},
      {{{"--optim", "adafactor"}}, "optimizer.name", "\"adamw_torch\"", "\"adafactor\""},
      {{{"--weight-decay", "0.1"}}, "optimizer.weight_decay", "0.0", "0.1"},
      {{{"--n-layer", "2"}}, "model.n_layer", "4", "2"},
  };
  for (const Case& c : cases) {
    const CliResult r = resume(c.flags);
    EXPECT_EQ(r.exit_code, 1) << c.field << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr("trainer_state.json")) << c.field;
    EXPECT_THAT(r.err, HasSubstr(c.field + " " + c.saved)) << c.field;
    EXPECT_THAT(r.err, HasSubstr("this run " + c.now)) << c.field;
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("step 3/"))) << c.field;
  }
}

TEST_F(ResumeConfigCli, TrainerAllowedChangesAreAcceptedAndPrinted) {
  const CliResult r = resume({{"--learning-rate", "2e-3"},
                              {"--per-device-train-batch-size", "4"},
                              {"--log-every", "2"},
                              {"--save-steps", "3"},
                              {"--output-dir", out()}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* change :
       {"learning_rate 0.001 -> 0.002", "per_device_train_batch_size 2 -> 4",
        "logging_steps 1 -> 2", "save_steps 2 -> 3", "global batch 2 -> 4 rows per step"})
    EXPECT_THAT(r.out, HasSubstr(change));
  const CliResult longer = resume({{"--max-steps", "5"}});
  EXPECT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_THAT(longer.out, HasSubstr("max_steps 4 -> 5"));
  // The same global batch: nothing said about it; one process: no world_size.
  EXPECT_THAT(longer.out, ::testing::Not(HasSubstr("global batch")));
  EXPECT_THAT(longer.out, ::testing::Not(HasSubstr("world_size")));
}

TEST(ResumeConfigCliQuantized, AnotherQuantizedBaseIsRefused) {
  TempDir tmp;
  const std::string run =
      "train --model gpt2-tiny --data builtin --seq-len 32 --per-device-train-batch-size 2 "
      "--lora-r 4 --max-steps 2";
  CliResult r = run_snug(run + " --load-in-4bit --save-steps 2 --output-dir " + tmp.path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_snug(run + " --load-in-8bit --resume-from " + tmp.path("out"));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("quantized_base \"fp4"));
  EXPECT_THAT(r.err, HasSubstr("this run \"int8_blockwise"));
}

}  // namespace resume_config_cli_test
}  // namespace
}  // namespace snug::test
