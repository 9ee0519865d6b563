// `snug export-init` writes what `snug train` with the same flags starts from: the shape flags and
// --config-override shape the written weights as they shape the run (before, export-init
// resolved --model alone and silently wrote the preset's shape).
#include <gtest/gtest.h>

#include <string>

#include "io/safetensors.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace export_init_cli_test {

TEST(ExportInitCli, ShapeFlagsAndConfigOverrideShapeTheWrittenWeights) {
  TempDir tmp;
  const std::string one = tmp.path("one.safetensors"), two = tmp.path("two.safetensors");
  const CliResult a = run_snug("export-init --model gpt2-tiny --n-layer 1 -o " + one);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CliResult b =
      run_snug("export-init --model gpt2-tiny --config-override n_layer=2 -o " + two);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const SafetensorsFile f1(one), f2(two);
  EXPECT_TRUE(f1.contains("transformer.h.0.attn.c_attn.weight"));
  EXPECT_FALSE(f1.contains("transformer.h.1.attn.c_attn.weight"));
  EXPECT_TRUE(f2.contains("transformer.h.1.attn.c_attn.weight"));
  EXPECT_FALSE(f2.contains("transformer.h.2.attn.c_attn.weight"));
  // And the run with the same flags starts from that file.
  const CliResult t =
      run_snug("train --model gpt2-tiny --n-layer 1 --max-steps 1 --init-from " + one);
  EXPECT_EQ(t.exit_code, 0) << t.err;
}

}  // namespace export_init_cli_test
}  // namespace
}  // namespace snug::test
