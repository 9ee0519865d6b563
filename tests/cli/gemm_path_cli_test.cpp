// --gemm-path through the CLI: the report and --version name the path each dtype takes, and the
// dispatch follows oneDNN's ISA, checked on this machine by masking it (ONEDNN_MAX_CPU_ISA, as
// oneDNN documents) down to AVX2 (no bf16 matmul at all) and to AVX-512 without BF16 (only an
// emulated one). Masking works on every CPU at least as capable as the mask; on a CPU below
// it oneDNN keeps its real ISA, which the assertions allow for.
#include <gtest/gtest.h>

#include <string>

#include "kernels/gemm_library.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace gemm_path_cli_test {

using test::read_json;
using test::run_snug;
using test::TempDir;

const std::string kRun = "train --max-steps 1 --per-device-train-batch-size 2 --seq-len 16 --bf16";

TEST(GemmPathCli, ReportAndVersionNameThePathOfEachDtype) {
  TempDir tmp;
  const auto r = run_snug(kRun + " --report-json " + tmp.path("r.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sys = read_json(tmp.path("r.json")).at("system");
  EXPECT_EQ(sys.at("gemm_path").at("fp32"), kernels::sgemm_name());
  const std::string bf16 = sys.at("gemm_path").at("bf16");
  EXPECT_EQ(bf16.rfind(kernels::bf16_matmul_support().native ? "onednn-bf16" : "widen", 0), 0u)
      << bf16;
  EXPECT_EQ(sys.at("onednn_isa"), kernels::onednn_cpu_isa());
  const auto v = run_snug("--version");
  ASSERT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("bf16 " + bf16), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("oneDNN ISA " + kernels::onednn_cpu_isa()), std::string::npos) << v.out;
  // Forcing widen is always possible and named as such.
  const auto w = run_snug(kRun + " --gemm-path widen --report-json " + tmp.path("w.json"));
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string wb = read_json(tmp.path("w.json")).at("system").at("gemm_path").at("bf16");
  EXPECT_EQ(wb.rfind("widen", 0), 0u) << wb;
  EXPECT_EQ(read_json(tmp.path("w.json")).at("config").at("gemm_path"), "widen");
}

TEST(GemmPathCli, InfoPrintsThePathsAndWritesJson) {
  TempDir tmp;
  const auto r = run_snug("info --json " + tmp.path("i.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("oneDNN ISA   " + kernels::onednn_cpu_isa()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::string("GEMM fp32    ") + kernels::sgemm_name()), std::string::npos)
      << r.out;
  const auto j = read_json(tmp.path("i.json"));
  EXPECT_EQ(j.at("gemm_path").at("fp32"), kernels::sgemm_name());
  EXPECT_EQ(j.at("onednn_isa"), kernels::onednn_cpu_isa());
  EXPECT_FALSE(j.contains("gemm_peak_flops"));  // only measured with --gemm-peak
}

TEST(GemmPathCli, WithoutAvx512OneDnnHasNoBf16MatmulAndAutoWidens) {
  TempDir tmp;
  const std::string env = "ONEDNN_MAX_CPU_ISA=AVX2 ";
  const auto masked = test::run_snug_env(env, "--version");
  ASSERT_EQ(masked.exit_code, 0);
  EXPECT_NE(masked.out.find("bf16 widen"), std::string::npos) << masked.out;
  const auto r = test::run_snug_env(env, kRun + " --report-json " + tmp.path("r.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::string(read_json(tmp.path("r.json")).at("system").at("gemm_path").at("bf16"))
                .rfind("widen", 0),
            0u);
  const auto forced = test::run_snug_env(env, kRun + " --gemm-path onednn-bf16");
  EXPECT_NE(forced.exit_code, 0) << forced.err;  // refused before anything runs
  EXPECT_NE(forced.err.find("--gemm-path onednn-bf16"), std::string::npos) << forced.err;
  EXPECT_NE(forced.err.find("no bf16 matmul"), std::string::npos) << forced.err;
  const auto unknown = run_snug(kRun + " --gemm-path amx");
  EXPECT_NE(unknown.exit_code, 0) << unknown.err;
  EXPECT_NE(unknown.err.find("known: auto, widen, onednn-bf16"), std::string::npos) << unknown.err;
}

TEST(GemmPathCli, EmulatedBf16IsNotChosenAutomaticallyButCanBeForced) {
  if (!kernels::built_with_onednn()) GTEST_SKIP() << "built without oneDNN (SNUG_ONEDNN=OFF)";
  if (kernels::onednn_cpu_isa() == "avx2" || kernels::onednn_cpu_isa() == "avx2_vnni")
    GTEST_SKIP() << "this CPU has no AVX-512, so oneDNN cannot even emulate bf16 here";
  const std::string env = "ONEDNN_MAX_CPU_ISA=AVX512_CORE ";
  const auto masked = test::run_snug_env(env, "--version");
  ASSERT_EQ(masked.exit_code, 0);
  EXPECT_NE(masked.out.find("bf16 widen"), std::string::npos) << masked.out;
  TempDir tmp;
  const auto forced = test::run_snug_env(
      env, kRun + " --gemm-path onednn-bf16 --report-json " + tmp.path("f.json"));
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  const std::string bf16 = read_json(tmp.path("f.json")).at("system").at("gemm_path").at("bf16");
  EXPECT_NE(bf16.find("emulated"), std::string::npos) << bf16;
}

}  // namespace gemm_path_cli_test
}  // namespace
}  // namespace snug
