// Weights that are not there, or not numbers (issue 29, item 3): a model.safetensors that is not
// a regular file is an error where it is opened, not "no weights"; an adapter's values must be
// finite and its r and lora_alpha within the flags' ranges.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace weights_not_there_cli_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Item 3: a model.safetensors that is a dangling symlink (a Hugging Face cache snapshot whose blob
// is missing), a FIFO or a directory was taken for "no weights": train fine-tuned a random model
// and generate printed from seed 42, exit 0.
TEST(HostileRoundTwoCli, WeightsThatAreNotAFileAreAnErrorNotNoWeights) {
  TempDir tmp;
  const std::string dir = tmp.path("model");
  ASSERT_EQ(run_snug("export-init -o " + dir, 60).exit_code, 0);
  const std::string w = dir + "/model.safetensors";
  struct Case {
    const char* name;
    std::function<void()> make;
    const char* reason;
  };
  const Case cases[] = {
      {"dangling symlink", [&] { fs::create_symlink(dir + "/blobs/missing", w); },
       "cannot open safetensors file: No such file or directory"},
      {"fifo", [&] { ASSERT_EQ(::mkfifo(w.c_str(), 0600), 0); }, "not a regular file"},
      {"directory", [&] { fs::create_directory(w); }, "not a regular file"},
  };
  for (const Case& c : cases) {
    fs::remove_all(w);
    c.make();
    for (const char* cmd : {"train --max-steps 1", "generate --prompt hi --max-new-tokens 1"}) {
      const CliResult r = run_snug(std::string(cmd) + " --model " + dir, 60);
      EXPECT_EQ(r.exit_code, 1) << c.name << ", " << cmd << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr(w + ": " + c.reason)) << c.name << ", " << cmd;
    }
  }
}

// Item 3: adapters were never checked: NaN tensors or lora_alpha 1e38 made `generate --adapter`
// emit one token and exit 0.
TEST(HostileRoundTwoCli, AdaptersWithNonFiniteValuesAreRefused) {
  TempDir tmp;
  const std::string run = "--model gpt2-tiny --seq-len 16 --lora-r 4 --threads 1";
  CliResult r = run_snug(
      "train " + run + " --max-steps 1 --save-steps 1 --output-dir " + tmp.path("out"), 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string adapter = tmp.path("adapter");
  r = run_snug("export --adapter -o " + adapter + " --checkpoint " + tmp.path("out") + " " + run,
               60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gen =
      "generate --model gpt2-tiny --prompt hi --max-new-tokens 4 --adapter " + adapter;
  ASSERT_EQ(run_snug(gen, 60).exit_code, 0);

  const std::string config = adapter + "/adapter_config.json";
  const std::string good_config = slurp(config);
  nlohmann::json j = nlohmann::json::parse(good_config);
  j["lora_alpha"] = 1e38;
  write_file(config, j.dump());
  r = run_snug(gen, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(config + ": lora_alpha 1e+38 is out of range: lora_alpha is a "
                                        "number in [0, 1e+06] after rounding to a 32-bit float"));
  write_file(config, good_config);

  // The first tensor's first element (the data section starts after the 8-byte length and the
  // header; the writer lays tensors out in offset order) set to a float NaN.
  const std::string weights = adapter + "/adapter_model.safetensors";
  std::string bytes = slurp(weights);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, header));
  std::string first;
  for (const auto& [name, info] : h.items())
    if (name != "__metadata__" && info["data_offsets"][0] == 0) first = name;
  ASSERT_FALSE(first.empty());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + 8 + header, &nan, 4);
  write_file(weights, bytes);
  r = run_snug(gen, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(weights + ": tensor '" + first +
                               "' holds nan at element 0; an adapter's weights must be finite"));
}

}  // namespace weights_not_there_cli_test
}  // namespace
}  // namespace snug::test
