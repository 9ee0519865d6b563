// snug's quantizers against the reference algorithms (tests/golden/gen_quant_golden.py:
// bitsandbytes 0.50 quantize_4bit / dequantize_4bit, its default-backend quantize_blockwise with
// create_dynamic_map, int8_vectorwise_quant, and torch's quint8 per-tensor affine quantizer).
// Codes must be identical; a mismatch is tolerated only at an exact tie (the scaled value equally
// far from the two neighbouring code values), and the count is reported. Dequantized values must
// agree to 1e-6.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/quant_format.h"
#include "io/safetensors.h"
#include "support/compare.h"

namespace snug::quant {
namespace {
namespace quant_golden_test {

const std::string kGolden = std::string(SNUG_TEST_DATA_DIR) + "/quant_golden.safetensors";

class QuantGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { file_ = new SafetensorsFile(kGolden); }
  static void TearDownTestSuite() {
    delete file_;
    file_ = nullptr;
  }
  static std::vector<float> f32(const std::string& n) { return file_->read_f32(n); }
  static std::vector<int32_t> i32(const std::string& n) { return file_->read_i32(n); }
  static std::vector<float> input() { return f32("x"); }

  static SafetensorsFile* file_;
};
SafetensorsFile* QuantGolden::file_ = nullptr;

// Counts code differences; each must be an exact tie, otherwise the test fails.
template <typename Tie>
int64_t count_code_mismatches(const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                              const char* what, Tie&& is_tie) {
  EXPECT_EQ(got.size(), want.size()) << what;
  int64_t ties = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] == want[i]) continue;
    if (is_tie(i)) {
      ++ties;
    } else {
      ADD_FAILURE() << what << ": code " << i << " is " << got[i] << ", reference " << want[i];
      return -1;
    }
  }
  if (ties > 0) std::cout << "[ " << what << " ] " << ties << " code(s) differ at exact ties\n";
  return ties;
}

std::vector<int32_t> bytes_as_i32(const std::vector<uint8_t>& b) {
  return std::vector<int32_t>(b.begin(), b.end());
}
std::vector<int32_t> int8_as_i32(const std::vector<uint8_t>& b) {
  std::vector<int32_t> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = static_cast<int8_t>(b[i]);
  return v;
}

auto no_ties = [](size_t) { return false; };

TEST_F(QuantGolden, CodeBooksEqualBitsandbytes) {
  const auto nf4 = f32("nf4_map"), fp4 = f32("fp4_map");
  const auto dyn = f32("dynamic_map_signed"), udyn = f32("dynamic_map_unsigned");
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(nf4_code()[i], nf4[i]) << "nf4 " << i;
    EXPECT_EQ(fp4_code()[i], fp4[i]) << "fp4 " << i;
  }
  for (size_t i = 0; i < 256; ++i) {
    EXPECT_EQ(dynamic_map(true)[i], dyn[i]) << "signed dynamic " << i;
    EXPECT_EQ(dynamic_map(false)[i], udyn[i]) << "unsigned dynamic " << i;
  }
}

TEST_F(QuantGolden, Nf4AndFp4MatchBitsandbytes) {
  const auto x = input();
  for (const char* name : {"nf4", "fp4"}) {
    const Format f = parse_format(name);
    const Quantized q = quantize(x, f);
    const std::string p = name;
    EXPECT_EQ(q.scales, f32(p + "_absmax")) << name;
    EXPECT_GE(count_code_mismatches(bytes_as_i32(q.codes), i32(p + "_codes"), name, no_ties), 0);
    EXPECT_TRUE(test::all_close(dequantize(q), f32(p + "_deq"), 0.0, 1e-6)) << name;
  }
}

TEST_F(QuantGolden, Nf4DoubleQuantMatchesReference) {
  const auto x = input();
  Options o;
  o.double_quant = true;
  const Quantized q = quantize(x, Format::nf4, o);
  ASSERT_TRUE(q.double_quant);
  const float want_offset = f32("nf4dq_offset")[0];
  // Mean of 66 fp32 values: snug sums in double, torch in float; allow one ulp.
  EXPECT_NEAR(q.dq_offset, want_offset, std::abs(want_offset) * 2e-7);
  EXPECT_EQ(q.dq_absmax, f32("nf4dq_absmax2"));
  EXPECT_GE(count_code_mismatches(bytes_as_i32(q.dq_codes), i32("nf4dq_qabsmax"), "nf4 dq absmax",
                                  no_ties),
            0);
  EXPECT_TRUE(test::all_close(q.block_absmax(), f32("nf4dq_absmax_deq"), 0.0, 1e-6));
  EXPECT_TRUE(test::all_close(dequantize(q), f32("nf4dq_deq"), 0.0, 1e-6));
  EXPECT_EQ(bytes_as_i32(q.codes), i32("nf4_codes"));  // DQ does not change the 4-bit codes
}

TEST_F(QuantGolden, Dynamic8BlockwiseMatchesReference) {
  const auto x = input();
  for (int64_t bs : {64, 256, 4096}) {
    Options o;
    o.block = bs;
    const Quantized q = quantize(x, Format::dynamic8, o);
    const std::string p = "dyn8_b" + std::to_string(bs);
    EXPECT_EQ(q.scales, f32(p + "_absmax")) << p;
    EXPECT_GE(count_code_mismatches(bytes_as_i32(q.codes), i32(p + "_codes"), p.c_str(), no_ties),
              0);
    EXPECT_TRUE(test::all_close(dequantize(q), f32(p + "_deq"), 0.0, 1e-6)) << p;
  }
  std::vector<float> ax(x.size());
  for (size_t i = 0; i < x.size(); ++i) ax[i] = std::abs(x[i]);
  Options o;
  o.signed_map = false;
  const Quantized q = quantize(ax, Format::dynamic8, o);
  EXPECT_EQ(q.scales, f32("udyn8_b256_absmax"));
  EXPECT_GE(count_code_mismatches(bytes_as_i32(q.codes), i32("udyn8_b256_codes"), "udyn8", no_ties),
            0);
  EXPECT_TRUE(test::all_close(dequantize(q), f32("udyn8_b256_deq"), 0.0, 1e-6));
}

TEST_F(QuantGolden, Int8AbsmaxMatchesBitsandbytesVectorwise) {
  const auto x = input();
  const Quantized qr = quantize(x.data(), {39, 107}, Format::int8_absmax_row);
  EXPECT_EQ(qr.scales, f32("int8_row_absmax"));
  EXPECT_GE(count_code_mismatches(int8_as_i32(qr.codes), i32("int8_row_codes"), "int8 row",
                                  [&](size_t i) {
                                    const float v = x[i] * (127.0f / qr.scales[i / 107]);
                                    return std::abs(v - std::trunc(v)) == 0.5f;
                                  }),
            0);
  EXPECT_TRUE(test::all_close(dequantize(qr), f32("int8_row_deq"), 0.0, 1e-6));

  const Quantized qt = quantize(x, Format::int8_absmax);
  EXPECT_EQ(qt.scales, f32("int8_tensor_absmax"));
  EXPECT_GE(count_code_mismatches(int8_as_i32(qt.codes), i32("int8_tensor_codes"), "int8 tensor",
                                  no_ties),
            0);
  EXPECT_TRUE(test::all_close(dequantize(qt), f32("int8_tensor_deq"), 0.0, 1e-6));
}

TEST_F(QuantGolden, ZeroPointMatchesTorchQuint8) {
  const auto x = input();
  const Quantized q = quantize(x, Format::int8_zeropoint);
  EXPECT_EQ(q.scales[0], f32("zp_scale")[0]);
  EXPECT_EQ(q.zero_points[0], i32("zp_zero_point")[0]);
  EXPECT_GE(count_code_mismatches(bytes_as_i32(q.codes), i32("zp_codes"), "zero-point",
                                  [&](size_t i) {
                                    const float v = x[i] / q.scales[0];
                                    return std::abs(std::abs(v - std::trunc(v)) - 0.5f) < 1e-4f;
                                  }),
            0);
  EXPECT_TRUE(test::all_close(dequantize(q), f32("zp_deq"), 0.0, 1e-6));
}

}  // namespace quant_golden_test
}  // namespace
}  // namespace snug::quant
