// Replays every committed fuzz input (fuzz/corpus/<target>/*: seeds and what fuzzing found)
// through the fuzz targets' entry points, so that every build (g++, release and asan presets)
// re-checks them: each must be accepted or refused with snug::Error, nothing else.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/entry_points.h"

namespace snug {
namespace {

namespace fs = std::filesystem;

size_t replay(const std::string& target, void (*entry)(const uint8_t*, size_t)) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(SNUG_FUZZ_CORPUS_DIR) / target)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    ++n;
  }
  return n;
}

TEST(FuzzCorpus, SafetensorsInputsAreAcceptedOrRefused) {
  EXPECT_GE(replay("safetensors", fuzz::safetensors_file), 5u);
}

TEST(FuzzCorpus, ModelConfigInputsAreAcceptedOrRefused) {
  EXPECT_GE(replay("model_config", fuzz::model_config), 5u);
}

TEST(FuzzCorpus, TokenFileInputsAreAcceptedOrRefused) {
  EXPECT_GE(replay("token_file", fuzz::token_file), 5u);
}

TEST(FuzzCorpus, TrainerStateInputsAreAcceptedOrRefused) {
  EXPECT_GE(replay("trainer_state", fuzz::trainer_state), 5u);
}

TEST(FuzzCorpus, TokenizerJsonInputsAreAcceptedOrRefused) {
  EXPECT_GE(replay("tokenizer_json", fuzz::tokenizer_json), 5u);
}

TEST(FuzzCorpus, JsonlRecordsAreAcceptedOrRefused) {
  EXPECT_GE(replay("jsonl_records", fuzz::jsonl_records), 10u);
}

}  // namespace
}  // namespace snug
