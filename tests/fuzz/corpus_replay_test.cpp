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
namespace corpus_replay_test {

namespace fs = std::filesystem;

std::vector<char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <class Entry>
size_t replay(const std::string& target, Entry entry) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(SNUG_FUZZ_CORPUS_DIR) / target)) {
    if (!e.is_regular_file()) continue;
    const std::vector<char> bytes = read_bytes(e.path());
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

TEST(FuzzCorpus, AdapterFoldersAreAcceptedOrRefused) {
  EXPECT_GE(replay("adapter_folder", fuzz::adapter_folder), 10u);
}

// The hand-written seeds (fuzz/make_adapter_seeds.py) reach the load: the valid ones load onto
// the shrunk llama and gpt2, each defect is refused.
TEST(FuzzCorpus, AdapterSeedsLoadOrAreRefusedAsWritten) {
  auto loads = [](const char* seed) {
    const std::vector<char> b =
        read_bytes(fs::path(SNUG_FUZZ_CORPUS_DIR) / "adapter_folder" / seed);
    return fuzz::adapter_folder(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };
  for (const char* ok : {"llama_qv_f32", "llama_all_f16_rslora", "gpt2_c_attn_bf16"})
    EXPECT_TRUE(loads(ok)) << ok;
  for (const char* bad :
       {"llama_nan", "llama_inf_bf16", "llama_wrong_rank", "llama_missing_tensor",
        "llama_extra_target", "llama_unknown_target", "llama_alpha_huge", "llama_regex_targets",
        "llama_dora", "llama_f64_tensor", "gpt2_truncated_weights", "not_json", "empty_weights"})
    EXPECT_FALSE(loads(bad)) << bad;
}

}  // namespace corpus_replay_test
}  // namespace
}  // namespace snug
