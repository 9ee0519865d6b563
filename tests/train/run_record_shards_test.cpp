// The run record covers the weights a --model folder holds by each shard's name, size and the
// FNV-1a 64 of its safetensors header (the 8-byte length and the JSON), not a hash of every byte
// (issue 29, item 4): hashing a 7B folder's 14 GB took as long as loading it. A resume refuses a
// shard whose size or header changed, naming it; a value changed inside the data, header the
// same, is not seen (the documented trade-off, docs/checkpoints.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "support/fnv1a_oracle.h"
#include "support/run_cli.h"
#include "train/run_record.h"
#include "train/training_args.h"

namespace snug::test {
namespace {
namespace run_record_shards_test {

namespace fs = std::filesystem;
using nlohmann::json;

// The first 8 + N bytes of a safetensors file: its header's length and the header.
std::string header_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string h(8 + n, '\0');
  in.seekg(0);
  in.read(h.data(), static_cast<std::streamsize>(h.size()));
  return h;
}

TEST(RunRecordShards, EachShardBySizeAndHeaderHash) {
  TempDir tmp;
  const std::string dir = tmp.path("model");
  ASSERT_EQ(run_snug("export-init -o " + dir, 60).exit_code, 0);
  TrainingArguments args;
  args.model = dir;
  const json r = make_run_record(args);
  const std::string file = dir + "/model.safetensors";
  const json shard = {{"name", "model.safetensors"},
                      {"size", static_cast<int64_t>(fs::file_size(file))},
                      {"header_fnv1a64", hex_fnv1a64(header_bytes(file))}};
  EXPECT_EQ(r["model_files"]["weights"], json::array({shard}));
  EXPECT_EQ(r["started_from"]["shards"], json::array({shard}));
  EXPECT_FALSE(r["started_from"].contains("fnv1a64"));  // no hash of the whole file
  // A folder without weights (a config.json alone): null.
  TrainingArguments none;
  none.model = dir + "/config.json";
  EXPECT_TRUE(make_run_record(none)["model_files"]["weights"].is_null());
}

std::string refusal(const json& saved, const json& current) {
  try {
    check_same_run(saved, current, "ck/trainer_state.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunRecordShards, AResumeNamesTheShardThatChanged) {
  const json a = {{"name", "model-00001-of-00002.safetensors"},
                  {"size", 1000},
                  {"header_fnv1a64", "0123456789abcdef"}};
  const json b = {{"name", "model-00002-of-00002.safetensors"},
                  {"size", 2000},
                  {"header_fnv1a64", "fedcba9876543210"}};
  auto record = [](const json& shards) {
    return json{{"model_files", {{"config", "0000000000000001"}, {"weights", shards}}}};
  };
  const json saved = record({a, b});
  EXPECT_EQ(refusal(saved, record({a, b})), "");

  json renamed = b;
  renamed["header_fnv1a64"] = "fedcba9876543211";
  std::string m = refusal(saved, record({a, renamed}));
  EXPECT_NE(m.find("ck/trainer_state.json"), std::string::npos) << m;
  EXPECT_NE(m.find("weight shard model-00002-of-00002.safetensors: its safetensors header "
                   "differs (fnv1a64 fedcba9876543210, now fedcba9876543211)"),
            std::string::npos)
      << m;
  json grown = a;
  grown["size"] = 1004;
  m = refusal(saved, record({grown, b}));
  EXPECT_NE(m.find("weight shard model-00001-of-00002.safetensors: 1000 bytes, now 1004"),
            std::string::npos)
      << m;
  m = refusal(saved, record(json::array({a})));
  EXPECT_NE(m.find("weight shard model-00002-of-00002.safetensors: no longer in the folder"),
            std::string::npos)
      << m;
  m = refusal(record(json::array({a})), record({a, b}));
  EXPECT_NE(m.find("weight shard model-00002-of-00002.safetensors: not in the checkpoint's run"),
            std::string::npos)
      << m;
  m = refusal(record(nullptr), record(json::array({a})));
  EXPECT_NE(m.find("model_files.weights"), std::string::npos) << m;

  // A checkpoint of an earlier snug has no weights record: not compared on it.
  EXPECT_EQ(
      refusal(json{{"model_files", {{"config", "0000000000000001"}}}}, record(json::array({a}))),
      "");
}

}  // namespace run_record_shards_test
}  // namespace
}  // namespace snug::test
