// A run that fails because of its input says so (issue 15): the report is written also when
// setup fails, and a NaN the input would cause is refused naming the input, not the learning
// rate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace input_cause_cli_test {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(InputCauseCli, SetupFailureStillWritesTheReport) {
  TempDir tmp;
  const std::string report = tmp.path("r.json"), data = tmp.path("missing.tok");
  const CliResult r = run_snug("train --max-steps 1 --data " + data + " --report-json " + report);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(data));
  const nlohmann::json j = read_json(report);
  EXPECT_THAT(j["error"].get<std::string>(), HasSubstr(data));
  EXPECT_EQ(j["config"]["data"], data);
}

TEST(InputCauseCli, NanInInitWeightsIsNamedNotBlamedOnTheLearningRate) {
  TempDir tmp;
  const std::string w = tmp.path("w.safetensors");
  ASSERT_EQ(run_snug("export-init -o " + w).exit_code, 0);
  {
    std::fstream f(w, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    const uint32_t nan_bits = 0x7fc00000u;  // the first tensor in data order is F32
    f.seekp(static_cast<std::streamoff>(8 + n));
    f.write(reinterpret_cast<const char*>(&nan_bits), 4);
  }
  const CliResult r = run_snug("train --max-steps 1 --init-from " + w);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(w));
  EXPECT_THAT(r.err, HasSubstr("nan at element 0"));
  EXPECT_THAT(r.err, Not(HasSubstr("learning-rate")));
}

TEST(InputCauseCli, NonPositiveLayerNormEpsilonIsRefused) {
  TempDir tmp;
  for (const char* eps : {"-1", "0"}) {
    const std::string cfg = tmp.path("config.json");
    std::ofstream(cfg) << R"({"vocab_size": 256, "n_embd": 64, "n_layer": 2, "n_head": 2, )"
                       << R"("n_positions": 128, "layer_norm_epsilon": )" << eps << "}";
    const CliResult r = run_snug("train --max-steps 1 --model " + cfg);
    EXPECT_EQ(r.exit_code, 1) << eps;
    EXPECT_THAT(r.err, HasSubstr(cfg)) << eps;
    EXPECT_THAT(r.err, HasSubstr("layer_norm_epsilon")) << eps;
    EXPECT_THAT(r.err, Not(HasSubstr("learning-rate"))) << eps;
  }
}

}  // namespace input_cause_cli_test
}  // namespace
}  // namespace snug::test
