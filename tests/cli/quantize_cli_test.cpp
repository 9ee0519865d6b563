// `snug quantize`: the seed chapter's comparison as numbers (tables, --json, --plot) and one
// clear message per bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/device.h"
#include "core/quant_format.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "report/quant_compare.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace quantize_cli_test {

using ::testing::HasSubstr;

const nlohmann::json& row(const nlohmann::json& input, const std::string& method) {
  for (const nlohmann::json& r : input["results"])
    if (r["method"] == method) return r;
  ADD_FAILURE() << "no row for " << method;
  static const nlohmann::json none;
  return none;
}

// Blocks beat per-tensor absmax on data with outliers: the JSON holds the same numbers the
// library computes on the same synthetic values, to the last bit.
TEST(QuantizeCli, BlockwiseBeatsAbsmaxOnOutliers) {
  TempDir tmp;
  const std::string path = tmp.path("q.json");
  const CliResult r =
      run_snug("quantize --synthetic outliers --count 65536 --seed 3 --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("blockwise (K=256) vs per-tensor absmax: MSE"));
  const nlohmann::json j = read_json(path);
  ASSERT_EQ(j["inputs"].size(), 1u);
  const nlohmann::json& in = j["inputs"][0];
  EXPECT_EQ(in["numel"], 65536);
  ASSERT_EQ(in["results"].size(), quant::method_names().size());
  const nlohmann::json& absmax = row(in, "absmax");
  const nlohmann::json& blockwise = row(in, "blockwise");
  EXPECT_LT(blockwise["mse"].get<double>(), absmax["mse"].get<double>() / 10);
  EXPECT_GT(blockwise["snr_db"].get<double>(), absmax["snr_db"].get<double>() + 10);
  EXPECT_LT(absmax["codes_used_fraction"].get<double>(), 0.8);  // outliers waste codes
  EXPECT_EQ(blockwise["codes_used"], 255);

  // The same values through the library.
  const quant::ValueSet v = quant::synthetic_values("outliers", 65536, 3);
  const std::vector<float>& x = v.tensors[0].values;
  const quant::QuantStats sa =
      quant::compute_stats(quant::quantize(x, quant::Format::int8_absmax), x.data());
  quant::Options ob;
  ob.block = 256;
  const quant::QuantStats sb =
      quant::compute_stats(quant::quantize(x, quant::Format::int8_blockwise, ob), x.data());
  EXPECT_DOUBLE_EQ(absmax["mse"].get<double>(), sa.mse);
  EXPECT_DOUBLE_EQ(blockwise["mse"].get<double>(), sb.mse);
  EXPECT_DOUBLE_EQ(absmax["max_abs_error"].get<double>(), sa.max_abs_error);
  EXPECT_DOUBLE_EQ(absmax["codes_used_fraction"].get<double>(), sa.codes_used_fraction);

  // Exact bits per parameter: codes + one fp32 per scale group (+ the code book for quantile).
  EXPECT_EQ(absmax["bytes"], 65536 + 4);
  EXPECT_EQ(blockwise["bytes"], 65536 + 4 * 256);
  EXPECT_DOUBLE_EQ(blockwise["bits_per_param"].get<double>(), 8.125);
  EXPECT_DOUBLE_EQ(row(in, "nf4")["bits_per_param"].get<double>(), 4.5);
  EXPECT_EQ(row(in, "quantile")["bytes"], 65536 + 4 * 256);
  // Extra memory: quantile sorts a copy of every value, the approximate one a 4096 sample.
  EXPECT_EQ(row(in, "quantile")["extra_memory_bytes"], 4 * 65536);
  EXPECT_EQ(row(in, "quantile-approx")["extra_memory_bytes"], 4 * 4096);
  EXPECT_EQ(absmax["extra_memory_bytes"], 0);
  // Code counts cover every value.
  int64_t total = 0;
  for (const auto& c : absmax["code_counts"]) total += c.get<int64_t>();
  EXPECT_EQ(total, 65536);
  EXPECT_EQ(absmax["code_counts"].size(), 255u);
}

TEST(QuantizeCli, DefaultComparesNormalAndOutliers) {
  TempDir tmp;
  const std::string path = tmp.path("q.json");
  const CliResult r = run_snug("quantize --count 8192 --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("N(0,1), 8192 values"));
  EXPECT_THAT(r.out, HasSubstr("N(0,1) with outliers"));
  const nlohmann::json j = read_json(path);
  ASSERT_EQ(j["inputs"].size(), 2u);
  EXPECT_EQ(j["inputs"][0]["name"], "normal");
  EXPECT_EQ(j["inputs"][1]["name"], "outliers");
  // Outliers hurt per-tensor absmax far more than blocks.
  const double absmax_loss = row(j["inputs"][1], "absmax")["snr_db"].get<double>() -
                             row(j["inputs"][0], "absmax")["snr_db"].get<double>();
  EXPECT_LT(absmax_loss, -15.0);
}

TEST(QuantizeCli, OneMethodWithABlockSize) {
  TempDir tmp;
  const std::string path = tmp.path("q.json");
  const CliResult r = run_snug(
      "quantize --method blockwise --block-size 64 --synthetic normal --count 4096 --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(path);
  ASSERT_EQ(j["inputs"][0]["results"].size(), 1u);
  const nlohmann::json& b = j["inputs"][0]["results"][0];
  EXPECT_EQ(b["block"], 64);
  EXPECT_EQ(b["bytes"], 4096 + 4 * 64);
  EXPECT_DOUBLE_EQ(b["bits_per_param"].get<double>(), 8.5);
  EXPECT_EQ(j["block_size"], 64);
}

TEST(QuantizeCli, TensorsOfASafetensorsFile) {
  TempDir tmp;
  Device dev(cpu_backend());
  Tensor w = Tensor::empty({64, 48}, DType::f32, Category::weights, dev);
  Tensor b = Tensor::empty({48}, DType::f32, Category::weights, dev);
  Tensor ids = Tensor::empty({5}, DType::i32, Category::weights, dev);
  for (int64_t i = 0; i < w.numel(); ++i)
    w.data<float>()[i] = 0.01f * static_cast<float>(i % 97 - 48);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = 0.5f - 0.02f * static_cast<float>(i);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(i);
  const std::string file = tmp.path("w.safetensors");
  save_safetensors(file, {{"h.0.mlp.c_fc.weight", &w}, {"h.0.mlp.c_fc.bias", &b}, {"ids", &ids}});

  const std::string path = tmp.path("q.json");
  CliResult r = run_snug("quantize --method nf4 --input " + file +
                         " --tensor h.0.mlp.c_fc.weight --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = read_json(path);
  const nlohmann::json& nf4 = j["inputs"][0]["results"][0];
  EXPECT_EQ(nf4["numel"], 64 * 48);
  EXPECT_EQ(nf4["bytes"], 64 * 48 / 2 + 4 * (64 * 48 / 64));
  // The same tensor through the library.
  const std::vector<float> x(w.data<float>(), w.data<float>() + w.numel());
  EXPECT_DOUBLE_EQ(nf4["mse"].get<double>(),
                   quant::compute_stats(quant::quantize(x, quant::Format::nf4), x.data()).mse);

  // Without --tensor: every float tensor (the int32 one is skipped), each on its own scale.
  r = run_snug("quantize --method absmax --input " + file + " --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = read_json(path);
  EXPECT_EQ(j["inputs"][0]["tensors"].size(), 2u);
  EXPECT_EQ(j["inputs"][0]["results"][0]["bytes"], 64 * 48 + 4 + 48 + 4);

  // A missing tensor lists what there is.
  r = run_snug("quantize --input " + file + " --tensor h.0.attn.c_attn.weight");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("has no tensor 'h.0.attn.c_attn.weight'"));
  EXPECT_THAT(r.err, HasSubstr("available: h.0.mlp.c_fc.weight, h.0.mlp.c_fc.bias, ids"));
  r = run_snug("quantize --input " + file + " --tensor ids");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tensor 'ids' is I32"));
}

TEST(QuantizeCli, PlotIsAnSvgOfHistogramsAndCodeUsage) {
  TempDir tmp;
  const std::string svg = tmp.path("q.svg");
  CliResult r = run_snug("quantize --synthetic outliers --count 4096 --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(svg);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_THAT(text, HasSubstr("</svg>"));
  EXPECT_THAT(text, HasSubstr("values: histogram"));
  EXPECT_THAT(text, HasSubstr("absmax (int8_absmax)"));
  EXPECT_THAT(text, HasSubstr("blockwise (int8_blockwise, K=256)"));

  r = run_snug("quantize --synthetic normal --count 4096 --plot " + tmp.path("q.png"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("only SVG is written"));
}

TEST(QuantizeCli, BadMethodAndBlockSizeGetOneMessageEach) {
  CliResult r = run_snug("quantize --method absmin --count 1024");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("unknown method 'absmin' (absmax, absmax-row, zeropoint"));
  r = run_snug("quantize --method blockwise --block-size 0 --count 1024");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--block-size 0 is out of range: --block-size takes an integer in "
                               "[1, 16777216]"));
  r = run_snug("quantize --block-size -64 --count 1024");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--block-size -64 is out of range"));
  r = run_snug("quantize --method quantile --block-size 64 --count 1024");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--block-size does not apply to quantile"));
  r = run_snug("quantize --synthetic uniform");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--synthetic 'uniform': expected normal or outliers"));
  r = run_snug("quantize --input /nonexistent/w.safetensors");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/w.safetensors"));
}

}  // namespace quantize_cli_test
}  // namespace
}  // namespace snug::test
