// trainer_state.json is covered by a checksum and its values are checked before a resume uses
// them (issue 15, defect 2): a flipped bit in global_step used to skip a step, and global_step -5
// trained with a negative learning rate. The checksum ("state_fnv1a64") is FNV-1a 64 over the
// document without that field, as nlohmann::json::dump() writes it; the test computes it on its
// own to play a tool that rewrote the file consistently, which the value checks must still stop.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/configs.h"
#include "support/fnv1a_oracle.h"
#include "support/run_cli.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace checkpoint_state_test {

namespace fs = std::filesystem;

TrainingArguments args_for(int64_t max_steps, const std::string& out) {
  return test::tiny_run(max_steps, out);
}

TrainResult train(const TrainingArguments& a) {
  Device dev(cpu_backend());
  GPT2 model(resolve_gpt2(a.model), dev);
  model.init_weights(a.seed);
  const auto data = open_dataset(a.data, model.config().vocab_size, a.seed);
  Trainer t(a, model, data.get());
  return t.train();
}

// A 4-step run saving checkpoint-2 and checkpoint-4; returns checkpoint-2's trainer_state.json.
std::string save_run(const std::string& out) {
  TrainingArguments a = args_for(4, out);
  a.save_steps = 2;
  const TrainResult r = train(a);
  EXPECT_TRUE(r.error.empty()) << r.error;
  return (fs::path(out) / "checkpoint-2" / "trainer_state.json").string();
}

using test::hex_fnv1a64;

// Edits the document and writes it back with a checksum that matches the edit.
void rewrite_consistently(const std::string& path, const std::function<void(nlohmann::json&)>& f) {
  nlohmann::json j = test::read_json(path);
  f(j);
  j.erase("state_fnv1a64");
  j["state_fnv1a64"] = hex_fnv1a64(j.dump());
  std::ofstream(path) << j.dump(2) << "\n";
}

// The error of resuming checkpoint-2 for 4 steps ("" when it trains).
std::string resume_error(const std::string& out) {
  TrainingArguments a = args_for(4, out);
  a.resume_from = (fs::path(out) / "checkpoint-2").string();
  try {
    const TrainResult r = train(a);
    return r.error;
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(CheckpointState, FlippedBitInGlobalStepIsRefused) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string state = save_run(out);
  std::string text;
  {
    std::ifstream in(state);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string key = "\"global_step\": 2";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  text[at + key.size() - 1] ^= 0x01;  // '2' -> '3': one bit
  std::ofstream(state) << text;
  const std::string err = resume_error(out);
  EXPECT_NE(err.find("trainer_state.json"), std::string::npos) << err;
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
}

TEST(CheckpointState, NegativeGlobalStepIsRefusedEvenWithAMatchingChecksum) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string state = save_run(out);
  rewrite_consistently(state, [](nlohmann::json& j) { j["global_step"] = -5; });
  const std::string err = resume_error(out);
  EXPECT_NE(err.find("trainer_state.json"), std::string::npos) << err;
  EXPECT_NE(err.find("global_step -5"), std::string::npos) << err;
}

TEST(CheckpointState, GlobalStepThatDisagreesWithTheFolderIsRefused) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string state = save_run(out);
  rewrite_consistently(state, [](nlohmann::json& j) { j["global_step"] = 3; });
  const std::string err = resume_error(out);
  EXPECT_NE(err.find("global_step 3"), std::string::npos) << err;
  EXPECT_NE(err.find("checkpoint-2"), std::string::npos) << err;
}

TEST(CheckpointState, OutOfRangeDataPositionAndOptimizerStepsAreRefused) {
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string state = save_run(out);
  rewrite_consistently(state, [](nlohmann::json& j) { j["data"]["position"] = 1 << 30; });
  std::string err = resume_error(out);
  EXPECT_NE(err.find("trainer_state.json"), std::string::npos) << err;
  EXPECT_NE(err.find("data.position"), std::string::npos) << err;

  rewrite_consistently(state, [](nlohmann::json& j) {
    j["data"]["position"] = 4;
    j["optimizer"]["steps"] = 7;
  });
  err = resume_error(out);
  EXPECT_NE(err.find("optimizer.steps 7"), std::string::npos) << err;
}

TEST(CheckpointState, DeeplyNestedOrDuplicatedStateIsRefusedNotCrashedOn) {
  // The reader used to parse with nlohmann's `>>` (duplicate keys silently resolved) and to quote
  // format_version with dump(), which recurses: 100,000 nested arrays overflowed the stack.
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string state = save_run(out);
  std::ofstream(state) << "{\"format_version\": " << std::string(100000, '[')
                       << std::string(100000, ']') << "}";
  std::string err = resume_error(out);
  EXPECT_NE(err.find("trainer_state.json"), std::string::npos) << err;
  EXPECT_LT(err.size(), 1000u) << "the message must not quote the document";
  std::ofstream(state) << R"({"format_version": 2, "format_version": 2})";
  err = resume_error(out);
  EXPECT_NE(err.find("trainer_state.json"), std::string::npos) << err;
  EXPECT_NE(err.find("format_version"), std::string::npos) << err;
}

TEST(CheckpointState, MessagesQuoteNoLongValueFromTheFile) {
  // trainer_state.json is untrusted: a resume that refuses it names the field and quotes at most
  // a short value, never a megabyte that a damaged or hostile file holds (the run record's values
  // and the recorded checksum used to be quoted whole).
  test::TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string state = save_run(out);
  const std::string huge(100000, 'x');
  rewrite_consistently(state, [&](nlohmann::json& j) { j["run"]["model"]["name"] = huge; });
  std::string err = resume_error(out);
  EXPECT_NE(err.find("model.name"), std::string::npos) << err.substr(0, 300);
  EXPECT_LT(err.size(), 1000u) << "the message must not quote the whole value";
  std::ofstream(state) << R"({"format_version": 2, "state_fnv1a64": ")" << huge << R"("})";
  err = resume_error(out);
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err.substr(0, 300);
  EXPECT_LT(err.size(), 1000u) << "the message must not quote the whole value";
}

}  // namespace checkpoint_state_test
}  // namespace
}  // namespace snug
