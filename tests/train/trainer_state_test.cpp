// parse_trainer_state (train/trainer_state.h) on documents built here, without a run: every
// field's type and value is checked and a refusal names the field. The checksum is computed by
// an FNV-1a 64 of the test's own, as a tool that rewrote the file consistently would.
#include "train/trainer_state.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "support/fnv1a_oracle.h"

namespace snug {
namespace {
namespace trainer_state_test {

constexpr const char* kPath = "out/checkpoint-3/trainer_state.json";

using test::hex_fnv1a64;

nlohmann::json valid_state() {
  nlohmann::json j;
  j["format_version"] = 2;
  j["global_step"] = 3;
  j["data"] = {{"epoch", 1}, {"position", 5}};
  j["seed"] = 42;
  j["optimizer"] = {{"name", "adamw_torch"}, {"steps", 3}, {"extra_state", nullptr}};
  j["config"] = {{"learning_rate", 0.001}};
  j["run"] = {{"seq_len", 32}};
  j["checksum_algorithm"] = "fnv1a64";
  j["files"] = {{"model.safetensors", {{"size", 100}, {"fnv1a64", "0123456789abcdef"}}},
                {"optimizer.safetensors", {{"size", 0}, {"fnv1a64", "fedcba9876543210"}}}};
  return j;
}

std::string signed_text(nlohmann::json j) {
  j.erase("state_fnv1a64");
  j["state_fnv1a64"] = hex_fnv1a64(j.dump());
  return j.dump(2);
}

// The message parse_trainer_state refuses the edited document with ("" when it accepts it).
std::string refusal(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = valid_state();
  edit(j);
  try {
    (void)parse_trainer_state(signed_text(j), kPath);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(TrainerState, AValidDocumentParsesIntoItsFields) {
  const TrainerState st = parse_trainer_state(signed_text(valid_state()), kPath);
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(st.data_epoch, 1);
  EXPECT_EQ(st.data_position, 5);
  EXPECT_EQ(st.seed, 42u);
  EXPECT_EQ(st.optimizer, "adamw_torch");
  EXPECT_EQ(st.optimizer_steps, 3);
  EXPECT_TRUE(st.optimizer_extra.is_null());
  EXPECT_EQ(st.config.at("learning_rate"), 0.001);
  EXPECT_EQ(st.run.at("seq_len"), 32);
  EXPECT_EQ(st.files.at("model.safetensors").at("size"), 100);
  // The checksum is the one save_checkpoint writes.
  nlohmann::json j = valid_state();
  EXPECT_EQ(trainer_state_checksum(j), hex_fnv1a64(j.dump()));
}

TEST(TrainerState, EveryFieldOfTheWrongTypeOrRangeIsRefusedByName) {
  struct Case {
    const char* why;
    std::function<void(nlohmann::json&)> edit;
    const char* expected;
  };
  const Case cases[] = {
      {"string step", [](nlohmann::json& j) { j["global_step"] = "3"; },
       "global_step is not an integer"},
      {"step past int64", [](nlohmann::json& j) { j["global_step"] = UINT64_MAX; },
       "global_step 18446744073709551615 is out of range"},
      {"fractional step", [](nlohmann::json& j) { j["global_step"] = 3.5; },
       "global_step is not an integer"},
      {"no data", [](nlohmann::json& j) { j.erase("data"); }, "missing field data"},
      {"data an array", [](nlohmann::json& j) { j["data"] = nlohmann::json::array(); },
       "data is not an object"},
      {"no position", [](nlohmann::json& j) { j["data"].erase("position"); },
       "missing field data.position"},
      {"negative seed", [](nlohmann::json& j) { j["seed"] = -1; },
       "seed is not a non-negative integer"},
      {"optimizer name a number", [](nlohmann::json& j) { j["optimizer"]["name"] = 5; },
       "optimizer.name is not a string"},
      {"no extra_state", [](nlohmann::json& j) { j["optimizer"].erase("extra_state"); },
       "missing field optimizer.extra_state"},
      {"config an array", [](nlohmann::json& j) { j["config"] = nlohmann::json::array(); },
       "config is not an object"},
      {"run a string", [](nlohmann::json& j) { j["run"] = "x"; }, "run is not an object"},
      {"other checksum", [](nlohmann::json& j) { j["checksum_algorithm"] = "md5"; },
       "unknown checksum_algorithm"},
      {"file size a string",
       [](nlohmann::json& j) { j["files"]["model.safetensors"]["size"] = "100"; },
       "files[\"model.safetensors\"].size is not an integer"},
      {"negative file size",
       [](nlohmann::json& j) { j["files"]["model.safetensors"]["size"] = -1; },
       "files[\"model.safetensors\"].size is negative"},
      {"bad file checksum",
       [](nlohmann::json& j) { j["files"]["optimizer.safetensors"]["fnv1a64"] = "xyz"; },
       "files[\"optimizer.safetensors\"].fnv1a64 is not 16 hex digits"},
      {"file record a number", [](nlohmann::json& j) { j["files"]["extra.bin"] = 3; },
       "files[\"extra.bin\"] is not an object"},
      {"no optimizer file", [](nlohmann::json& j) { j["files"].erase("optimizer.safetensors"); },
       "no record of optimizer.safetensors"},
      {"step 0", [](nlohmann::json& j) { j["global_step"] = 0; },
       "global_step 0 is not a number of completed steps"},
      {"step of another folder",
       [](nlohmann::json& j) {
         j["global_step"] = 4;
         j["optimizer"]["steps"] = 4;
       },
       "global_step 4 but the folder is checkpoint-3"},
      {"negative epoch", [](nlohmann::json& j) { j["data"]["epoch"] = -2; },
       "data.epoch -2 must be >= 0"},
      {"optimizer ahead", [](nlohmann::json& j) { j["optimizer"]["steps"] = 9; },
       "optimizer.steps 9 must be between 0 and global_step 3"},
  };
  for (const Case& c : cases) {
    const std::string err = refusal(c.edit);
    EXPECT_NE(err.find(kPath), std::string::npos) << c.why << ": " << err;
    EXPECT_NE(err.find(c.expected), std::string::npos) << c.why << ": " << err;
  }
}

TEST(TrainerState, TheDocumentItselfIsCheckedBeforeItsFields) {
  auto parse = [](const std::string& text) {
    try {
      (void)parse_trainer_state(text, kPath);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(parse("[2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(parse(R"({"format_version": 1})").find("unsupported format_version 1"),
            std::string::npos);
  EXPECT_NE(parse(R"({"format_version": "2"})").find("(not an integer)"), std::string::npos);
  EXPECT_NE(parse(R"({"format_version": 2})").find("no state_fnv1a64 record"), std::string::npos);
  nlohmann::json j = valid_state();
  j["state_fnv1a64"] = "0000000000000000";
  EXPECT_NE(parse(j.dump()).find("checksum mismatch"), std::string::npos);
  // A checkpoint set aside while being replaced keeps its step's name.
  EXPECT_NO_THROW(parse_trainer_state(signed_text(valid_state()),
                                      "out/checkpoint-3.replaced/trainer_state.json"));
  // A folder named otherwise (a checkpoint copied elsewhere) does not pin the step.
  EXPECT_NO_THROW(parse_trainer_state(signed_text(valid_state()), "saved/trainer_state.json"));
}

TEST(TrainerState, CheckpointFolderNames) {
  int64_t step = -1;
  EXPECT_TRUE(parse_checkpoint_name("checkpoint-0", &step));
  EXPECT_EQ(step, 0);
  EXPECT_TRUE(parse_checkpoint_name("checkpoint-9223372036854775807", &step));
  EXPECT_EQ(step, INT64_MAX);
  EXPECT_FALSE(parse_checkpoint_name("checkpoint-9223372036854775808", &step));
  EXPECT_FALSE(parse_checkpoint_name("checkpoint-", &step));
  EXPECT_FALSE(parse_checkpoint_name("checkpoint-3.tmp", &step));
  EXPECT_FALSE(parse_checkpoint_name("checkpoint--3", &step));
  EXPECT_FALSE(parse_checkpoint_name("ckpt-3", &step));
}

}  // namespace trainer_state_test
}  // namespace
}  // namespace snug
