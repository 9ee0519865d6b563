// Resume from a changed model folder (issue 29, item 4): the run record covers the folder's
// config and tokenizer files, and --resume-from DIR takes the checkpoint saved last.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace resume_record_cli_test {

using ::testing::HasSubstr;

// A model folder written by export-init and a run on it that saved checkpoint-1: what the
// tests below edit between save and --resume-from. `run` is the train command without its steps.
struct SavedRun {
  std::string dir, out, run;
};
SavedRun saved_run(TempDir& tmp) {
  SavedRun s{tmp.path("model"), tmp.path("out"), ""};
  s.run =
      "train --model " + s.dir + " --seq-len 16 --threads 1 --save-steps 1 --output-dir " + s.out;
  EXPECT_EQ(run_snug("export-init -o " + s.dir, 60).exit_code, 0);
  const CliResult r = run_snug(s.run + " --max-steps 1", 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return s;
}

// Item 4: editing the model folder's config.json between save and --resume-from resumed with
// exit 0 and no note; the run record holds the content of the folder's config and tokenizer files.
TEST(HostileRoundTwoCli, ResumeFromAnEditedModelFolderIsRefused) {
  TempDir tmp;
  const auto [dir, out, run] = saved_run(tmp);
  ASSERT_FALSE(::testing::Test::HasFailure());
  CliResult r;
  nlohmann::json config = nlohmann::json::parse(slurp(dir + "/config.json"));
  config["layer_norm_epsilon"] = 1e-3;
  write_file(dir + "/config.json", config.dump(2));
  r = run_snug(run + " --max-steps 2 --resume-from " + out, 120);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(": the checkpoint's run has model_files.config \""));
  EXPECT_THAT(r.err, HasSubstr("(--model (its config.json))"));
}

// Item 4: the record covers each weight shard of the folder by its size and a hash of its
// safetensors header. A tensor renamed in model.safetensors (same length: the same size) between
// save and --resume-from resumed with exit 0; now it is refused naming the shard. A value changed
// inside the data, header the same, is accepted: the header hash does not read the data (a 7B
// folder's 14 GB), which is the trade-off docs/checkpoints.md states.
TEST(HostileRoundTwoCli, ResumeFromAFolderWithAChangedShardHeaderIsRefused) {
  TempDir tmp;
  const auto [dir, out, run] = saved_run(tmp);
  ASSERT_FALSE(::testing::Test::HasFailure());
  CliResult r;
  const std::string file = dir + "/model.safetensors";
  const std::string original = slurp(file);
  uint64_t n = 0;
  std::memcpy(&n, original.data(), 8);
  const std::string header = original.substr(8, n);

  // A value inside the data: accepted.
  std::string edited = original;
  edited[edited.size() - 1] ^= 0x01;
  write_file(file, edited);
  r = run_snug(run + " --max-steps 2 --resume-from " + out + "/checkpoint-1", 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // A tensor renamed (one letter of its name): the same size, another header.
  edited = original;
  const size_t at = header.find("wte.weight");
  ASSERT_NE(at, std::string::npos) << header;
  edited[8 + at] = 'W';
  write_file(file, edited);
  r = run_snug(run + " --max-steps 3 --resume-from " + out + "/checkpoint-2", 120);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("weight shard model.safetensors: its safetensors header differs"));
  EXPECT_THAT(r.err, HasSubstr("(--model (its weight shards))"));
}

// Item 4: after a resume from checkpoint-2 of a run that had saved 2, 4 and 6, a later
// --resume-from DIR continued the abandoned trajectory's checkpoint-6 instead of the checkpoint-4
// the resumed run wrote last.
TEST(HostileRoundTwoCli, ResumeFromADirTakesTheCheckpointSavedLast) {
  TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string run = "train --seq-len 16 --threads 1 --save-steps 2 --output-dir " + out;
  ASSERT_EQ(run_snug(run + " --max-steps 6", 120).exit_code, 0);
  CliResult r = run_snug(run + " --max-steps 4 --resume-from " + out + "/checkpoint-2", 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_snug(run + " --max-steps 6 --resume-from " + out, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("resuming " + out + " at step 4\n"));
}

}  // namespace resume_record_cli_test
}  // namespace
}  // namespace snug::test
