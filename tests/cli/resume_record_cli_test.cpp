// Resume from a changed model folder (issue 29, item 4): the run record covers the folder's
// config and tokenizer files, and --resume-from DIR takes the checkpoint saved last.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {

using ::testing::HasSubstr;

// Item 4: editing the model folder's config.json between save and --resume-from resumed with
// exit 0 and no note; the run record holds the content of the folder's config and tokenizer files.
TEST(HostileRoundTwoCli, ResumeFromAnEditedModelFolderIsRefused) {
  TempDir tmp;
  const std::string dir = tmp.path("model");
  ASSERT_EQ(run_snug("export-init -o " + dir, 60).exit_code, 0);
  const std::string out = tmp.path("out");
  const std::string run =
      "train --model " + dir + " --seq-len 16 --threads 1 --save-steps 1 --output-dir " + out;
  CliResult r = run_snug(run + " --max-steps 1", 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json config = nlohmann::json::parse(slurp(dir + "/config.json"));
  config["layer_norm_epsilon"] = 1e-3;
  write_file(dir + "/config.json", config.dump(2));
  r = run_snug(run + " --max-steps 2 --resume-from " + out, 120);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(": the checkpoint's run has model_files.config \""));
  EXPECT_THAT(r.err, HasSubstr("(--model (its config.json))"));
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

}  // namespace
}  // namespace snug::test
