// Checkpoints resume exactly: 20 steps in one go equal 10 steps, a save, and 10 more steps in
// fresh objects resumed from the checkpoint (losses and final weights bit for bit), for every
// optimizer with state (AdamW, 8-bit AdamW, Adafactor, SGD with momentum, Lion, 8-bit Lion,
// GaLore across projector refreshes, AdaLOMO) and LOMO. Damaged checkpoints are refused naming the
// file, resuming from an output directory skips a save that was interrupted, and a snug process
// killed (SIGKILL) in the middle of a save leaves the previous checkpoint loadable.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/configs.h"
#include "support/run_cli.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace checkpoint_test {

namespace fs = std::filesystem;

TrainingArguments tiny_args(const std::string& optim, int64_t max_steps, const std::string& out) {
  TrainingArguments a = test::tiny_run(max_steps, out);
  a.optim = optim;
  a.warmup_steps = 3;
  return a;
}

struct RunOutcome {
  TrainResult result;
  std::vector<std::vector<float>> weights;
};

// Fresh device, model, data and trainer, as a new process would build them.
RunOutcome train_fresh(const TrainingArguments& args, uint64_t init_seed = 42) {
  Device dev(cpu_backend());
  const GPT2Config cfg = resolve_gpt2(args.model);
  GPT2 model(cfg, dev);
  model.init_weights(init_seed);
  const auto data = open_dataset(args.data, cfg.vocab_size, args.seed);
  Trainer trainer(args, model, data.get());
  RunOutcome r;
  r.result = trainer.train();
  for (const Parameter* p : model.parameters())
    r.weights.emplace_back(p->value.data<float>(), p->value.data<float>() + p->value.numel());
  return r;
}

void expect_exact_resume(const std::string& optim,
                         const std::function<void(TrainingArguments&)>& tweak = {}) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  TrainingArguments full = tiny_args(optim, 20, out);
  if (tweak) tweak(full);
  full.save_steps = 10;
  const RunOutcome a = train_fresh(full);
  ASSERT_TRUE(a.result.error.empty()) << a.result.error;
  ASSERT_EQ(a.result.loss.size(), 20u);
  ASSERT_EQ(a.result.checkpoints.size(), 2u);

  TrainingArguments resumed = tiny_args(optim, 20, out);
  if (tweak) tweak(resumed);
  resumed.resume_from = (fs::path(out) / "checkpoint-10").string();
  // Different initial weights: everything must come from the checkpoint.
  const RunOutcome b = train_fresh(resumed, 1234);
  ASSERT_TRUE(b.result.error.empty()) << b.result.error;
  EXPECT_EQ(b.result.resumed_from_step, 10);
  EXPECT_EQ(b.result.steps, 20);
  ASSERT_EQ(b.result.loss.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(std::memcmp(&a.result.loss[10 + i], &b.result.loss[i], sizeof(double)), 0)
        << optim << " step " << 11 + i << ": " << a.result.loss[10 + i] << " vs "
        << b.result.loss[i];
    EXPECT_EQ(a.result.learning_rate[10 + i], b.result.learning_rate[i]);
  }
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t p = 0; p < a.weights.size(); ++p) {
    ASSERT_EQ(a.weights[p].size(), b.weights[p].size());
    EXPECT_EQ(std::memcmp(a.weights[p].data(), b.weights[p].data(), a.weights[p].size() * 4), 0)
        << optim << ": parameter " << p << " differs";
  }
}

TEST(Checkpoint, ResumeIsBitExactAdamW) {
  expect_exact_resume("adamw_torch");
}
TEST(Checkpoint, ResumeIsBitExactAdamW8bit) {
  expect_exact_resume("adamw_bnb_8bit");
}
TEST(Checkpoint, ResumeIsBitExactAdafactor) {
  expect_exact_resume("adafactor");
}
TEST(Checkpoint, ResumeIsBitExactSgdWithMomentum) {
  expect_exact_resume("sgd", [](TrainingArguments& a) {
    a.momentum = 0.9;
    a.learning_rate = 0.05;
  });
}
TEST(Checkpoint, ResumeIsBitExactLion) {
  expect_exact_resume("lion", [](TrainingArguments& a) { a.weight_decay = 0.1; });
}
TEST(Checkpoint, ResumeIsBitExactLion8bit) {
  expect_exact_resume("lion_8bit");
}
TEST(Checkpoint, ResumeIsBitExactGaloreAcrossProjectorRefreshes) {
  // Refreshes at steps 0, 4, 8, 12, 16: the resumed run must reuse the saved projector for
  // steps 11-12 and refresh at 12 like the uninterrupted one.
  expect_exact_resume("galore_adamw", [](TrainingArguments& a) {
    a.galore_rank = 16;
    a.galore_update_proj_gap = 4;
  });
}
TEST(Checkpoint, ResumeIsBitExactLomoAndAdaLomo) {
  expect_exact_resume("lomo", [](TrainingArguments& a) { a.learning_rate = 0.1; });
  expect_exact_resume("adalomo");
}

// Saves checkpoint-2 of a 2-step adamw_torch run into `out`.
void save_two_steps(const std::string& out) {
  TrainingArguments a = tiny_args("adamw_torch", 2, out);
  a.save_steps = 2;
  const RunOutcome r = train_fresh(a);
  ASSERT_TRUE(r.result.error.empty()) << r.result.error;
  ASSERT_TRUE(fs::exists(fs::path(out) / "checkpoint-2" / "trainer_state.json"));
}

std::string resume_error(const std::string& from, const std::string& out) {
  TrainingArguments a = tiny_args("adamw_torch", 4, out);
  a.resume_from = from;
  try {
    train_fresh(a);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, CorruptedOptimizerFileIsRefused) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  save_two_steps(out);
  const fs::path f = fs::path(out) / "checkpoint-2" / "optimizer.safetensors";
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    const auto pos = static_cast<std::streamoff>(fs::file_size(f) / 2);
    io.seekg(pos);
    char c = 0;
    io.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    io.seekp(pos);
    io.write(&c, 1);
  }
  const std::string err = resume_error(out, out);
  EXPECT_NE(err.find("optimizer.safetensors"), std::string::npos) << err;
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
}

TEST(Checkpoint, TruncatedModelFileIsRefused) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  save_two_steps(out);
  const fs::path f = fs::path(out) / "checkpoint-2" / "model.safetensors";
  fs::resize_file(f, fs::file_size(f) - 100);
  const std::string err = resume_error((fs::path(out) / "checkpoint-2").string(), out);
  EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

TEST(Checkpoint, InterruptedSaveLeavesPreviousCheckpointLoadable) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  save_two_steps(out);
  // A save killed mid-way: a *.tmp folder with partial files, never renamed; and a folder
  // without its trainer_state.json.
  const fs::path partial = fs::path(out) / "checkpoint-30.tmp";
  fs::create_directories(partial);
  fs::copy_file(fs::path(out) / "checkpoint-2" / "model.safetensors",
                partial / "model.safetensors");
  fs::resize_file(partial / "model.safetensors", 1000);
  fs::create_directories(fs::path(out) / "checkpoint-40");
  EXPECT_EQ(fs::path(resolve_checkpoint(out)).filename(), "checkpoint-2");

  TrainingArguments a = tiny_args("adamw_torch", 4, out);
  a.resume_from = out;
  const RunOutcome r = train_fresh(a);
  EXPECT_TRUE(r.result.error.empty()) << r.result.error;
  EXPECT_EQ(r.result.resumed_from_step, 2);
  EXPECT_EQ(r.result.loss.size(), 2u);
}

// A real crash: the snug binary saves checkpoint-2, then is SIGKILLed halfway through saving
// checkpoint-4 (SNUG_TEST_CRASH_DURING_SAVE, train/checkpoint.cpp). checkpoint-2 must resume; the
// partial save is a checkpoint-4.tmp folder that resume skips, and naming it is refused with a
// message naming the missing trainer_state.json.
TEST(Checkpoint, ProcessKilledDuringSaveLeavesPreviousCheckpointLoadable) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string common =
      "train --model gpt2-tiny --data builtin --seq-len 32 --per-device-train-batch-size 2 "
      "--max-steps 6 --save-steps 2 --log-every 1 --output-dir '" +
      out + "'";
  ASSERT_EQ(::setenv("SNUG_TEST_CRASH_DURING_SAVE", "4", 1), 0);
  const test::CliResult crashed = test::run_snug(common);
  ::unsetenv("SNUG_TEST_CRASH_DURING_SAVE");
  EXPECT_NE(crashed.exit_code, 0) << crashed.out << crashed.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "checkpoint-2" / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(fs::path(out) / "checkpoint-4"));
  ASSERT_TRUE(fs::exists(fs::path(out) / "checkpoint-4.tmp" / "model.safetensors"))
      << "the kill did not happen mid-save";
  EXPECT_FALSE(fs::exists(fs::path(out) / "checkpoint-4.tmp" / "trainer_state.json"));
  EXPECT_EQ(fs::path(resolve_checkpoint(out)).filename(), "checkpoint-2");

  const test::CliResult partial =
      test::run_snug(common + " --resume-from '" + out + "/checkpoint-4.tmp'");
  EXPECT_EQ(partial.exit_code, 1) << partial.out << partial.err;
  EXPECT_NE(partial.err.find("checkpoint-4.tmp"), std::string::npos) << partial.err;
  EXPECT_NE(partial.err.find("trainer_state.json"), std::string::npos) << partial.err;

  const test::CliResult resumed = test::run_snug(common + " --resume-from '" + out + "'");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "checkpoint-6" / "trainer_state.json"));
  // The same 6 steps without a crash end at the same weights.
  test::TempDir tmp2;
  const std::string out2 = tmp2.path("out");
  const test::CliResult clean = test::run_snug(
      "train --model gpt2-tiny --data builtin --seq-len 32 "
      "--per-device-train-batch-size 2 --max-steps 6 --save-steps 6 --output-dir '" +
      out2 + "'");
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_EQ(fnv1a64_file((fs::path(out) / "checkpoint-6" / "model.safetensors").string()),
            fnv1a64_file((fs::path(out2) / "checkpoint-6" / "model.safetensors").string()));
}

TEST(Checkpoint, OptimizerMismatchIsRefused) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  save_two_steps(out);
  TrainingArguments a = tiny_args("adafactor", 4, out);
  a.resume_from = out;
  try {
    train_fresh(a);
    ADD_FAILURE() << "resumed adamw_torch state into adafactor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adamw_torch"), std::string::npos) << e.what();
  }
}

}  // namespace checkpoint_test
}  // namespace
}  // namespace snug
