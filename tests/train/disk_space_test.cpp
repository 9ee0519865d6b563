// A save that would not fit on the disk is refused before writing, naming the bytes needed and
// free (io/disk_space.h; issue 31, acceptance 4). A small filesystem needs root, so the tests
// set SNUG_FREE_DISK_BYTES, which replaces the statvfs query.
#include "io/disk_space.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "models/hf_weights.h"
#include "support/configs.h"
#include "support/run_cli.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace disk_space_test {

namespace fs = std::filesystem;

// Sets SNUG_FREE_DISK_BYTES for one scope.
class FreeBytes {
 public:
  explicit FreeBytes(const std::string& v) { ::setenv("SNUG_FREE_DISK_BYTES", v.c_str(), 1); }
  ~FreeBytes() { ::unsetenv("SNUG_FREE_DISK_BYTES"); }
  FreeBytes(const FreeBytes&) = delete;
  FreeBytes& operator=(const FreeBytes&) = delete;
};

TEST(DiskSpace, StatvfsGivesTheFreeBytesOfADirectory) {
  test::TempDir tmp;
  fs::create_directories(tmp.path("d"));
  EXPECT_GT(free_disk_bytes(tmp.path("d")), 0);
  EXPECT_THROW(free_disk_bytes(tmp.path("missing")), Error);
  {
    const FreeBytes f("12345");
    EXPECT_EQ(free_disk_bytes(tmp.path("missing")), 12345);
  }
  const FreeBytes bad("12k");
  try {
    free_disk_bytes(tmp.path("d"));
    ADD_FAILURE() << "a bad override was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SNUG_FREE_DISK_BYTES"), std::string::npos) << e.what();
  }
}

TEST(DiskSpace, MessageNamesBytesNeededAndFree) {
  const FreeBytes f("1000");
  try {
    check_disk_space("/some/dir", 1073741824, "/some/dir/checkpoint-3");
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/some/dir/checkpoint-3: not saved"), std::string::npos) << m;
    EXPECT_NE(m.find("needs 1073741824 bytes (1.00 GiB)"), std::string::npos) << m;
    EXPECT_NE(m.find("which has 1000 bytes"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(check_disk_space("/some/dir", 1000, "x"));
}

TrainResult run_with_save(const std::string& out) {
  const GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  Device dev(cpu_backend());
  GPT2 model(cfg, dev);
  model.init_weights(42);
  const auto data = open_dataset("builtin", cfg.vocab_size, 42);
  TrainingArguments a = test::args_of({.seq_len = 16, .batch = 2});
  a.max_steps = 2;
  a.save_steps = 2;
  a.output_dir = out;
  Trainer trainer(a, model, data.get());
  return trainer.train();
}

TEST(DiskSpace, ACheckpointThatDoesNotFitIsRefusedBeforeWriting) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  // gpt2-tiny: model 4P bytes and AdamW 8P bytes, P ~ 0.85M: about 10 MB; 1 MB is too little.
  std::string message;
  {
    const FreeBytes f("1000000");
    try {
      const TrainResult r = run_with_save(out);
      message = r.error;
    } catch (const Error& e) {
      message = e.what();
    }
  }
  EXPECT_NE(message.find("checkpoint-2: not saved: it needs "), std::string::npos) << message;
  EXPECT_NE(message.find("which has 1000000 bytes (0.00 GiB) free"), std::string::npos) << message;
  // Nothing of the checkpoint was written: no folder, no temporary one.
  EXPECT_FALSE(fs::exists(fs::path(out) / "checkpoint-2"));
  EXPECT_FALSE(fs::exists(fs::path(out) / "checkpoint-2.tmp"));
  // Enough space: saved, and the checkpoint is smaller than the bound the check asked for.
  const FreeBytes f("1000000000");
  const TrainResult r = run_with_save(tmp.path("out2"));
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(fs::exists(fs::path(tmp.path("out2")) / "checkpoint-2"));
}

TEST(DiskSpace, ModelExportThatDoesNotFitIsRefused) {
  test::TempDir tmp;
  fs::create_directories(tmp.path("m"));
  Device dev(cpu_backend());
  GPT2 model(resolve_gpt2("gpt2-tiny"), dev);
  model.init_weights(1);
  const std::string path = tmp.path("m") + "/model.safetensors";
  {
    const FreeBytes f("100");
    EXPECT_THROW(save_hf_weights(model, path, {}), Error);
    EXPECT_FALSE(fs::exists(path));
  }
  save_hf_weights(model, path, {});
  EXPECT_TRUE(fs::exists(path));
}

}  // namespace disk_space_test
}  // namespace
}  // namespace snug
