// Hostile input (issue 15): files and flag values built to crash a parser or overflow a size.
// snug must answer each with one message naming what and where, and a documented exit status,
// never a signal (134 abort, 135 bus error, 139 segmentation fault).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace hostile_input_cli_test {

using ::testing::HasSubstr;

// A safetensors file: the 8-byte little-endian header length, the header, then `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data = "") {
  std::string s(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return s + header + data;
}

// A header whose one tensor's shape nests `depth` arrays.
std::string deeply_nested_shape_header(int depth) {
  return R"({"w":{"dtype":"F32","shape":)" + std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']') + R"(,"data_offsets":[0,0]}})";
}

TEST(HostileInputCli, DeeplyNestedSafetensorsHeaderIsAnErrorNotACrash) {
  TempDir tmp;
  const std::string f = tmp.path("deep.safetensors");
  write_file(f, safetensors_bytes(deeply_nested_shape_header(100000)));
  CliResult r = run_snug("train --max-steps 1 --init-from " + f);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(f));
  EXPECT_THAT(r.err, HasSubstr("nested"));
  r = run_snug("quantize --input " + f);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(f));
  EXPECT_THAT(r.err, HasSubstr("nested"));
}

TEST(HostileInputCli, HugeBatchSizeIsRefusedByName) {
  for (const char* cmd : {"train --max-steps 1", "plan", "estimate"}) {
    const CliResult r = run_snug(std::string(cmd) + " --per-device-train-batch-size 99999999999");
    EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("--per-device-train-batch-size 99999999999")) << cmd;
  }
}

TEST(HostileInputCli, HugeAccumulationAndCountAreRefusedByName) {
  CliResult r = run_snug("train --max-steps 1 --gradient-accumulation-steps 100000000000");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--gradient-accumulation-steps 100000000000"));
  r = run_snug("train --max-steps 1 --gradient-accumulation-steps 1e11");  // not an integer
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--gradient-accumulation-steps"));
  r = run_snug("quantize --count 99999999999999");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--count 99999999999999"));
}

TEST(HostileInputCli, ConfigJsonWithWrongTypesNamesTheKey) {
  TempDir tmp;
  const std::string base = R"("vocab_size": 256, "n_embd": 64, "n_layer": 2, "n_head": 2)";
  const std::string eps = tmp.path("eps.json");
  write_file(eps, "{" + base + R"(, "layer_norm_epsilon": "small"})");
  CliResult r = run_snug("train --max-steps 1 --model " + eps);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(eps));
  EXPECT_THAT(r.err, HasSubstr("layer_norm_epsilon"));
  const std::string type = tmp.path("type.json");
  write_file(type, "{" + base + R"(, "model_type": 5})");
  r = run_snug("train --max-steps 1 --model " + type);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(type));
  EXPECT_THAT(r.err, HasSubstr("model_type"));
}

TEST(HostileInputCli, FifoAsDataIsRefusedNotWaitedOn) {
  TempDir tmp;
  const std::string fifo = tmp.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // `timeout` only bounds a regression (a hang); the assertion is on the message.
  const CliResult r = run_snug("train --max-steps 1 --data " + fifo, 120);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(fifo));
  EXPECT_THAT(r.err, HasSubstr("not a regular file"));
}

}  // namespace hostile_input_cli_test
}  // namespace
}  // namespace snug::test
