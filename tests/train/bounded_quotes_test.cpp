// A checkpoint's trainer_state.json is read from disk (issue 29, item 6): a megabyte file name in
// its "files" record or optimizer name is quoted as a short excerpt, naming the file and field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/bounded_quote.h"
#include "support/fnv1a_oracle.h"
#include "train/trainer_state.h"

namespace snug::test {
namespace {
namespace train_bounded_quotes_test {

using nlohmann::json;

constexpr const char* kPath = "out/checkpoint-3/trainer_state.json";

json valid_state() {
  json j;
  j["format_version"] = 2;
  j["global_step"] = 3;
  j["data"] = {{"epoch", 1}, {"position", 5}};
  j["seed"] = 42;
  j["optimizer"] = {{"name", "adamw_torch"}, {"steps", 3}, {"extra_state", nullptr}};
  j["config"] = json::object();
  j["run"] = json::object();
  j["checksum_algorithm"] = "fnv1a64";
  j["files"] = {{"model.safetensors", {{"size", 100}, {"fnv1a64", "0123456789abcdef"}}},
                {"optimizer.safetensors", {{"size", 0}, {"fnv1a64", "fedcba9876543210"}}}};
  return j;
}

std::string signed_text(json j) {
  j["state_fnv1a64"] = hex_fnv1a64(j.dump());
  return j.dump();
}

TEST(BoundedQuotes, TrainerStateFileRecords) {
  const std::string big = megabyte();
  json j = valid_state();
  j["files"][big] = 3;
  EXPECT_TRUE(refuses_bounded([text = signed_text(j)] { (void)parse_trainer_state(text, kPath); },
                              {kPath, "files[\"xxxx", "is not an object"}));
  j = valid_state();
  j["files"][big] = {{"size", -1}, {"fnv1a64", "0123456789abcdef"}};
  EXPECT_TRUE(refuses_bounded([text = signed_text(j)] { (void)parse_trainer_state(text, kPath); },
                              {kPath, "files[\"xxxx", ".size is negative"}));
}

}  // namespace train_bounded_quotes_test
}  // namespace
}  // namespace snug::test
