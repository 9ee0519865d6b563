// The quantized-weight ops (kernels/quant_ops.inc): the fast quantizer and dequantizer against the
// references (quant::quantize's own path, element-by-element decoding), bit for bit, for every
// format, with and without double quantization, on an odd length and a block length that makes
// 4-bit blocks start inside a byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/op_table.h"
#include "support/random.h"

namespace snug {
namespace {
namespace quant_ops_test {

// The buffers of one quantized weight.
struct Buffers {
  std::vector<uint8_t> codes, dq_codes;
  std::vector<float> absmax, dq_absmax;
  float dq_offset = 0.0f;
};

Buffers quantize_with(const OpTable& ops, const std::vector<float>& w, quant::Format f,
                      int64_t block, bool dq) {
  const int64_t n = static_cast<int64_t>(w.size()), nb = (n + block - 1) / block;
  quant::Options o;
  o.block = block;
  Buffers b;
  b.codes.assign(static_cast<size_t>(quant::storage_breakdown(f, n, o).codes), 0xAB);
  b.absmax.assign(static_cast<size_t>(nb), 0.0f);
  if (dq) {
    b.dq_codes.assign(static_cast<size_t>(nb), 0);
    b.dq_absmax.assign(
        static_cast<size_t>((nb + quant::kDoubleQuantBlock - 1) / quant::kDoubleQuantBlock), 0.0f);
  }
  ops.quantize_weight_codes(b.codes.data(), b.absmax.data(), dq ? b.dq_codes.data() : nullptr,
                            dq ? b.dq_absmax.data() : nullptr, dq ? &b.dq_offset : nullptr,
                            w.data(), n, f, block, dq);
  return b;
}

std::vector<float> dequantize_with(const OpTable& ops, const Buffers& b, int64_t n, quant::Format f,
                                   int64_t block, bool dq) {
  std::vector<float> out(static_cast<size_t>(n), -1.0f);
  ops.dequantize_weight_codes(out.data(), b.codes.data(), dq ? nullptr : b.absmax.data(),
                              dq ? b.dq_codes.data() : nullptr, dq ? b.dq_absmax.data() : nullptr,
                              dq ? &b.dq_offset : nullptr, n, f, block, dq);
  return out;
}

TEST(QuantOps, FastEqualsRefForEveryFormat) {
  const int64_t n = 70001;  // odd, over the fast dequantizer's parallel threshold
  const std::vector<float> w = test::random_floats(n, 5, -2.0f, 2.0f);
  struct Case {
    quant::Format f;
    int64_t block;
    bool dq;
  };
  for (const Case c : {Case{quant::Format::nf4, 64, false}, Case{quant::Format::nf4, 63, true},
                       Case{quant::Format::fp4, 63, false}, Case{quant::Format::fp4, 64, true},
                       Case{quant::Format::int8_blockwise, 256, false}}) {
    SCOPED_TRACE(std::string(quant::format_name(c.f)) + " block " + std::to_string(c.block) +
                 (c.dq ? " double quant" : ""));
    const Buffers fast = quantize_with(fast_op_table(), w, c.f, c.block, c.dq);
    const Buffers ref = quantize_with(ref_op_table(), w, c.f, c.block, c.dq);
    EXPECT_EQ(fast.codes, ref.codes);
    if (c.dq) {
      EXPECT_EQ(fast.dq_codes, ref.dq_codes);
      EXPECT_EQ(fast.dq_absmax, ref.dq_absmax);
      EXPECT_EQ(fast.dq_offset, ref.dq_offset);
    } else {
      EXPECT_EQ(fast.absmax, ref.absmax);
    }
    const std::vector<float> a = dequantize_with(fast_op_table(), fast, n, c.f, c.block, c.dq);
    const std::vector<float> b = dequantize_with(ref_op_table(), fast, n, c.f, c.block, c.dq);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    // And the round trip is close to the input: within half the widest code gap (fp4's 1/3)
    // times the block absmax (< 2).
    double worst = 0.0;
    for (int64_t i = 0; i < n; ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(a[i] - w[i])));
    EXPECT_LT(worst, 0.5);
  }
}

TEST(QuantOps, QuantizeStagesTheDoubleQuantAbsmaxWhenGivenNone) {
  const std::vector<float> w = test::random_floats(1000, 9);
  const Buffers want = quantize_with(fast_op_table(), w, quant::Format::nf4, 64, true);
  Buffers got = want;
  std::fill(got.codes.begin(), got.codes.end(), 0xCD);
  got.dq_offset = 0.0f;
  fast_op_table().quantize_weight_codes(got.codes.data(), nullptr, got.dq_codes.data(),
                                        got.dq_absmax.data(), &got.dq_offset, w.data(), 1000,
                                        quant::Format::nf4, 64, true);
  EXPECT_EQ(got.codes, want.codes);
  EXPECT_EQ(got.dq_offset, want.dq_offset);
}

}  // namespace quant_ops_test
}  // namespace
}  // namespace snug
