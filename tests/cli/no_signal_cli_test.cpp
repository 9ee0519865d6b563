// Acceptance for issue 15: on every hostile input below snug ends with its documented status (1
// error, 2 command line that does not parse) and one "snug: error" message, never by a signal
// (134 abort, 135 bus error, 139 segmentation fault) and never by hanging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace no_signal_cli_test {

using ::testing::HasSubstr;

std::string safetensors(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return s + header + std::string(data_bytes, '\0');
}

std::string nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(NoSignalCli, EveryHostileInputEndsWithItsDocumentedStatus) {
  TempDir tmp;
  const std::string deep_st = tmp.path("deep.safetensors"), tail_st = tmp.path("tail.safetensors");
  write_file(deep_st, safetensors(R"({"w":{"dtype":"F32","shape":)" + nested(100000) +
                                      R"(,"data_offsets":[0,0]}})",
                                  0));
  write_file(tail_st, safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8));
  const std::string deep_cfg = tmp.path("deep.json"), dup_cfg = tmp.path("dup.json");
  write_file(deep_cfg, R"({"vocab_size": )" + nested(100000) + "}");
  write_file(dup_cfg, R"({"vocab_size": 256, "vocab_size": 512, "n_embd": 64, "n_layer": 1,
                          "n_head": 1})");
  const std::string empty = tmp.path("empty.json"), fifo = tmp.path("fifo"), dir = tmp.path("d");
  write_file(empty, "");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string run = "train --device meta --max-steps 1 ";
  const std::vector<std::pair<std::string, int>> cases = {
      {run + "--init-from " + deep_st, 1},
      {"quantize --input " + deep_st, 1},
      {"quantize --input " + tail_st, 1},
      {"quantize --input " + fifo, 1},
      {run + "--model " + deep_cfg, 1},
      {run + "--model " + dup_cfg, 1},
      {run + "--model " + empty, 1},
      {run + "--model " + fifo, 1},
      {run + "--data " + fifo, 1},
      {run + "--data " + dir, 1},
      {run + "--data /dev/null", 1},
      {"plan --per-device-train-batch-size 99999999999", 1},
      {"estimate --per-device-train-batch-size 99999999999", 1},
      {"plan --n-embd 4294967296", 1},
      {"plan --device-memory inf", 1},
      {"train --device meta --num-train-epochs nan", 1},
      {"quantize --count 99999999999999", 1},
      {run + "--report-json " + dir, 1},
      {"plot-memory " + deep_cfg + " -o " + tmp.path("p.svg"), 1},
      {"plot-memory " + fifo + " -o " + tmp.path("p.svg"), 1},
      {"train --seq-len 1e11", 2},
      {"train --max-steps ten", 2},
  };
  for (const auto& [args, status] : cases) {
    const CliResult r = run_snug(args, 120);
    EXPECT_EQ(r.exit_code, status) << args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(status == 1 ? "snug: error: " : "")) << args;
  }
}

}  // namespace no_signal_cli_test
}  // namespace
}  // namespace snug::test
