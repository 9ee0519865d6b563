// The 8-bit dynamic (tree) map has one owner, quant::create_dynamic_map; the 8-bit optimizers'
// codes read the same values. Plus the working-memory figures `snug quantize` reports.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "core/error.h"
#include "core/quant_format.h"
#include "optim/quant8.h"

namespace snug::quant {
namespace {
namespace dynamic_map_test {

TEST(DynamicMap, OptimizerCodesAreTheQuantMaps) {
  for (bool is_signed : {true, false}) {
    const std::array<float, 256>& m = dynamic_map(is_signed);
    const quant8::Code& c = is_signed ? quant8::signed_code() : quant8::unsigned_code();
    EXPECT_EQ(c.values(), m);
    const std::vector<float> v = create_dynamic_map(is_signed);
    EXPECT_EQ(std::vector<float>(m.begin(), m.end()), v);
    EXPECT_EQ(quant8::create_dynamic_map(is_signed), v);
  }
  EXPECT_EQ(dynamic_map(true)[0], -0.99296875f);
}

// Other bit counts as bitsandbytes 0.50.2 builds them: create_dynamic_map(True, 3, 4) gives
// these 16 values (bnb pads its tensor with zeros to 256 entries; snug returns 2^total_bits).
TEST(DynamicMap, FourBitMapEqualsBitsandbytes) {
  const std::vector<float> want = {-0.887499988079071f,
                                   -0.6625000238418579f,
                                   -0.4375f,
                                   -0.21249999105930328f,
                                   -0.07750000059604645f,
                                   -0.0325000025331974f,
                                   -0.005499999970197678f,
                                   0.0f,
                                   0.005499999970197678f,
                                   0.0325000025331974f,
                                   0.07750000059604645f,
                                   0.21249999105930328f,
                                   0.4375f,
                                   0.6625000238418579f,
                                   0.887499988079071f,
                                   1.0f};
  EXPECT_EQ(create_dynamic_map(true, 3, 4), want);
}

// create_dynamic_map(True, 4, 8): the linear "additional items" in the last decade;
// bnb's values at indices 100..109.
TEST(DynamicMap, AdditionalItemsEqualBitsandbytes) {
  const std::vector<float> m = create_dynamic_map(true, 4, 8);
  ASSERT_EQ(m.size(), 256u);
  const float want[10] = {-0.017031250521540642f, -0.014218750409781933f,  -0.011406250298023224f,
                          -0.009718749672174454f, -0.009156249463558197f,  -0.008593750186264515f,
                          -0.008031249977648258f, -0.0074687497690320015f, -0.006906250026077032f,
                          -0.006343749817460775f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(m[static_cast<size_t>(100 + i)], want[i]) << i;
}

TEST(DynamicMap, BadBitCountsThrow) {
  EXPECT_THROW(create_dynamic_map(true, 8, 8), Error);
  EXPECT_THROW(create_dynamic_map(true, 0, 8), Error);
  EXPECT_THROW(create_dynamic_map(true, 3, 9), Error);
}

TEST(QuantWorkspace, QuantileSortsACopyOrASample) {
  EXPECT_EQ(quantize_workspace_bytes(Format::quantile, 1000), 4000);
  Options approx;
  approx.quantile_sample = 4096;
  EXPECT_EQ(quantize_workspace_bytes(Format::quantile, 1000, approx), 4000);  // n <= sample
  // n = 10000, sample 4096: stride ceil(10000/4096) = 3, ceil(10000/3) = 3334 values.
  EXPECT_EQ(quantize_workspace_bytes(Format::quantile, 10000, approx), 4 * 3334);
  Options dq;
  dq.double_quant = true;
  EXPECT_EQ(quantize_workspace_bytes(Format::nf4, 64 * 300, dq), 4 * 300);
  for (Format f : {Format::int8_absmax, Format::int8_zeropoint, Format::int8_blockwise,
                   Format::dynamic8, Format::nf4, Format::fp4, Format::int4})
    EXPECT_EQ(quantize_workspace_bytes(f, 12345), 0) << format_name(f);
}

}  // namespace dynamic_map_test
}  // namespace
}  // namespace snug::quant
