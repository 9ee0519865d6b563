// Properties of every quantization format: round-trip error bounds, exact code values, packing
// order, storage formulas against the bytes actually held, error statistics (the QLoRA claim
// that NF4 beats FP4 and int4 on normal data) and clear errors on bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant_format.h"
#include "nn/init.h"
#include "quant/quant_data.h"
#include "support/errors.h"

namespace snug::quant {
namespace {
namespace quant_formats_test {

using testdata::kAll;
using testdata::normal;
using testdata::with_outliers;

using test::error_of;

TEST(QuantFormats, Nf4CodeValuesExactlyAsSpecified) {
  const float want[16] = {-1.0f,
                          -0.6961928009986877f,
                          -0.5250730514526367f,
                          -0.39491748809814453f,
                          -0.28444138169288635f,
                          -0.18477343022823334f,
                          -0.09105003625154495f,
                          0.0f,
                          0.07958029955625534f,
                          0.16093020141124725f,
                          0.24611230194568634f,
                          0.33791524171829224f,
                          0.44070982933044434f,
                          0.5626170039176941f,
                          0.7229568362236023f,
                          1.0f};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(nf4_code()[static_cast<size_t>(i)], want[i]) << i;
  const float fp4[8] = {0.0f, 0.005208333f, 0.6666667f, 1.0f, 0.3333333f, 0.5f, 0.1666667f, 0.25f};
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(fp4_code()[static_cast<size_t>(i)], fp4[i], 1e-7) << i;
    EXPECT_NEAR(fp4_code()[static_cast<size_t>(i + 8)], -fp4[i], 1e-7) << i + 8;
  }
}

TEST(QuantFormats, DynamicMapsAsBitsandbytes) {
  const auto& s = dynamic_map(true);
  const auto& u = dynamic_map(false);
  EXPECT_FLOAT_EQ(s[0], -0.99296875f);  // asymmetric: +1.0 appended, no -1
  EXPECT_EQ(s[255], 1.0f);
  EXPECT_EQ(u[0], 0.0f);
  EXPECT_EQ(u[255], 1.0f);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_TRUE(std::is_sorted(u.begin(), u.end()));
  float smallest = 1.0f, usmallest = 1.0f;
  for (float v : s)
    if (v > 0) smallest = std::min(smallest, v);
  for (float v : u)
    if (v > 0) usmallest = std::min(usmallest, v);
  EXPECT_NEAR(smallest, 5.5e-7, 1e-12);
  EXPECT_NEAR(usmallest, 3.25e-7, 1e-12);
}

TEST(QuantFormats, PackingPutsFirstElementInHighNibble) {
  // absmax 1: element 0 -> code 15 (1.0), element 1 -> code 0 (-1.0), element 2 -> code 7 (0).
  const std::vector<float> x = {1.0f, -1.0f, 0.0f};
  const Quantized q = quantize(x, Format::nf4);
  ASSERT_EQ(q.codes.size(), 2u);
  EXPECT_EQ(q.codes[0], 0xF0);
  EXPECT_EQ(q.codes[1], 0x77);  // element 2 high; the odd pad is scaled 0.0 -> code 7
  EXPECT_EQ(q.code_at(0), 15u);
  EXPECT_EQ(q.code_at(1), 0u);
  EXPECT_EQ(q.code_at(2), 7u);
  // fp4: 1.0 is code 3, -1.0 code 11
  const Quantized f = quantize(x, Format::fp4);
  EXPECT_EQ(f.codes[0], 0x3B);
}

TEST(QuantFormats, RoundTripErrorBounds) {
  for (const auto& data : {normal(10000 + 37, 1), with_outliers(10000 + 37, 2)}) {
    // int8 absmax: |err| <= step/2 with step = absmax/127 (plus float rounding)
    const Quantized a = quantize(data, Format::int8_absmax);
    const auto ya = dequantize(a);
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_LE(std::abs(data[i] - ya[i]), a.scales[0] / 127.0f * 0.5f * (1 + 1e-5f)) << i;
    // per row and blockwise: per group
    const Quantized r = quantize(data.data(), {91, 110}, Format::int8_absmax_row);
    ASSERT_EQ(r.scales.size(), 91u);
    const auto yr = dequantize(r);
    for (size_t i = 0; i < yr.size(); ++i)
      ASSERT_LE(std::abs(data[i] - yr[i]), r.scales[i / 110] / 127.0f * 0.5f * (1 + 1e-5f));
    for (int64_t bs : {64, 256, 4096}) {
      Options o;
      o.block = bs;
      const Quantized b = quantize(data, Format::int8_blockwise, o);
      const auto yb = dequantize(b);
      for (size_t i = 0; i < data.size(); ++i)
        ASSERT_LE(std::abs(data[i] - yb[i]),
                  b.scales[i / static_cast<size_t>(bs)] / 127.0f * 0.5f * (1 + 1e-5f));
    }
    // zero-point: |err| <= scale/2
    const Quantized z = quantize(data, Format::int8_zeropoint);
    const auto yz = dequantize(z);
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_LE(std::abs(data[i] - yz[i]), z.scales[0] * 0.5f * (1 + 1e-4f)) << i;
    // 4-bit codebooks: |err| <= absmax * (largest half gap of the code)
    for (Format f : {Format::nf4, Format::fp4}) {
      const auto& code = f == Format::nf4 ? nf4_code() : fp4_code();
      std::vector<float> sorted(code.begin(), code.end());
      std::sort(sorted.begin(), sorted.end());
      float half_gap = 0;
      for (size_t i = 0; i + 1 < sorted.size(); ++i)
        half_gap = std::max(half_gap, (sorted[i + 1] - sorted[i]) / 2);
      const Quantized q = quantize(data, f);
      const auto y = dequantize(q);
      for (size_t i = 0; i < data.size(); ++i)
        ASSERT_LE(std::abs(data[i] - y[i]), q.scales[i / 64] * half_gap * (1 + 1e-5f))
            << format_name(f) << " " << i;
    }
    // dynamic8 and quantile: bounded by the largest code gap
    for (Format f : {Format::dynamic8, Format::quantile, Format::int4}) {
      const Quantized q = quantize(data, f);
      const QuantStats s = compute_stats(q, data.data());
      EXPECT_TRUE(std::isfinite(s.mse)) << format_name(f);
      EXPECT_GT(s.snr_db, f == Format::int4       ? 10.0
                          : f == Format::quantile ? 5.0
                                                  : 30.0)
          << format_name(f);
    }
    // quantile: the extremes are codes, so the largest error is half the largest code gap
    const Quantized qq = quantize(data, Format::quantile);
    float gap = 0;
    for (size_t i = 0; i + 1 < qq.code_book.size(); ++i)
      gap = std::max(gap, qq.code_book[i + 1] - qq.code_book[i]);
    EXPECT_LE(compute_stats(qq, data.data()).max_abs_error, gap / 2 * (1 + 1e-5));
  }
}

TEST(QuantFormats, BlockwiseBeatsPerTensorOnOutliers) {
  const auto x = with_outliers(1 << 16, 3);
  const auto t = compute_stats(quantize(x, Format::int8_absmax), x.data());
  Options o;
  o.block = 64;
  const auto b = compute_stats(quantize(x, Format::int8_blockwise, o), x.data());
  EXPECT_LT(b.mse, t.mse / 4);
  EXPECT_GT(b.codes_used_fraction, t.codes_used_fraction);
}

TEST(QuantFormats, StatsOrderingOnNormalData) {
  const auto x = normal(1 << 18, 4);
  auto st = [&](Format f) { return compute_stats(quantize(x, f), x.data()); };
  const QuantStats nf4 = st(Format::nf4), fp4 = st(Format::fp4), int4 = st(Format::int4);
  const QuantStats i8 = st(Format::int8_blockwise), d8 = st(Format::dynamic8);
  EXPECT_GT(i8.snr_db, nf4.snr_db + 15);
  EXPECT_GT(d8.snr_db, nf4.snr_db + 10);
  // QLoRA: NF4 is the better 4-bit data type for normally distributed weights.
  EXPECT_LT(nf4.mse, fp4.mse);
  EXPECT_LT(nf4.mse, int4.mse);
  EXPECT_DOUBLE_EQ(nf4.bits_per_param, 4.5);
  EXPECT_DOUBLE_EQ(nf4.codes_used_fraction, 1.0);
  // Quantile codes are equally used by construction.
  Options q4;
  q4.bits = 4;
  const QuantStats qs = compute_stats(quantize(x, Format::quantile, q4), x.data());
  EXPECT_DOUBLE_EQ(qs.codes_used_fraction, 1.0);
  EXPECT_GT(qs.snr_db, 10.0);
}

TEST(QuantFormats, StorageFormulaMatchesActualBytes) {
  const auto x = normal(64 * 256 * 3 + 77, 5);
  const int64_t n = static_cast<int64_t>(x.size());
  for (Format f : kAll) {
    for (bool dq : {false, true}) {
      if (dq && f != Format::nf4 && f != Format::fp4 && f != Format::int4) continue;
      Options o;
      o.double_quant = dq;
      const Quantized q = quantize(x, f, o);
      Options so = o;
      if (f == Format::int8_absmax_row) so.block = n;  // a 1-D tensor is one row
      EXPECT_EQ(storage_bytes(f, n, so), q.bytes()) << format_name(f) << " dq " << dq;
      EXPECT_EQ(compute_stats(q, x.data()).bytes, q.bytes());
      const StorageBytes sb = storage_breakdown(f, n, so);
      EXPECT_EQ(sb.codes, static_cast<int64_t>(q.codes.size())) << format_name(f);
    }
  }
  // The documented NF4 formulas, for a tensor of whole DQ blocks.
  const int64_t m = int64_t{4096} * 4096;
  EXPECT_EQ(storage_bytes(Format::nf4, m, 64), m / 2 + 4 * (m / 64));
  EXPECT_EQ(storage_bytes(Format::nf4, m, 64, true), m / 2 + m / 64 + 4 * (m / (64 * 256)) + 4);
  const double bpp = 8.0 * static_cast<double>(storage_bytes(Format::nf4, m, 64, true)) / m;
  EXPECT_NEAR(bpp, 4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / static_cast<double>(m), 1e-12);
  EXPECT_LE(bpp, 4.13);
  EXPECT_EQ(storage_bytes(Format::int8_blockwise, 1000, 256), 1000 + 4 * 4);
}

TEST(QuantFormats, DoubleQuantKeepsAbsmaxClose) {
  const auto x = normal(64 * 1000, 6);
  const Quantized plain = quantize(x, Format::nf4);
  Options o;
  o.double_quant = true;
  const Quantized dq = quantize(x, Format::nf4, o);
  const auto a = dq.block_absmax();
  ASSERT_EQ(a.size(), plain.scales.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], plain.scales[i], 0.02f * plain.scales[i]);
  const double m_plain = compute_stats(plain, x.data()).mse;
  const double m_dq = compute_stats(dq, x.data()).mse;
  EXPECT_LT(m_dq, m_plain * 1.02);
}

TEST(QuantFormats, QuantileExactAndApproximate) {
  const auto x = with_outliers(100000, 7);
  Options exact;
  exact.bits = 8;
  Options approx = exact;
  approx.quantile_sample = 4096;
  const Quantized qe = quantize(x, Format::quantile, exact);
  const Quantized qa = quantize(x, Format::quantile, approx);
  EXPECT_EQ(qe.code_book.size(), 256u);
  EXPECT_TRUE(std::is_sorted(qe.code_book.begin(), qe.code_book.end()));
  const QuantStats se = compute_stats(qe, x.data()), sa = compute_stats(qa, x.data());
  EXPECT_GT(se.codes_used_fraction, 0.99);
  EXPECT_LT(sa.mse, se.mse * 3);
  // 3-bit codes pack across byte boundaries and come back
  Options b3;
  b3.bits = 3;
  const Quantized q3 = quantize(x, Format::quantile, b3);
  EXPECT_EQ(static_cast<int64_t>(q3.codes.size()), (100000 * 3 + 7) / 8);
  const auto y3 = dequantize(q3);
  for (size_t i = 0; i < 100; ++i) {
    float best = q3.code_book[0];
    for (float c : q3.code_book)
      if (std::abs(c - x[i]) < std::abs(best - x[i])) best = c;
    EXPECT_NEAR(y3[i], best, std::abs(best) * 1e-6 + 1e-6) << i;
  }
}

TEST(QuantFormats, ZerosAndConstantsAreExact) {
  const std::vector<float> zeros(200, 0.0f);
  for (Format f : kAll) {
    const Quantized q = quantize(zeros, f);
    const auto y = dequantize(q);
    for (float v : y) ASSERT_EQ(v, 0.0f) << format_name(f);
  }
}

TEST(QuantFormats, BadInputsGiveClearErrors) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f};
  Options zero_block;
  zero_block.block = 0;
  EXPECT_NE(
      error_of([&] { quantize(x, Format::nf4, zero_block); }).find("block size must be positive"),
      std::string::npos);
  EXPECT_NE(error_of([&] { quantize(x, Format::int8_blockwise, zero_block); }).find("block size"),
            std::string::npos);
  EXPECT_NE(error_of([&] { storage_bytes(Format::dynamic8, 10, 0); }).find("block size"),
            std::string::npos);
  EXPECT_NE(error_of([&] { quantize(std::vector<float>{}, Format::int8_absmax); }).find("empty"),
            std::string::npos);
  std::vector<float> bad = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  const std::string nan_msg = error_of([&] { quantize(bad, Format::nf4); });
  EXPECT_NE(nan_msg.find("element 1"), std::string::npos) << nan_msg;
  EXPECT_NE(nan_msg.find("NaN"), std::string::npos) << nan_msg;
  bad[1] = std::numeric_limits<float>::infinity();
  EXPECT_NE(error_of([&] { quantize(bad, Format::int8_absmax); }), "");
  Options u;
  u.signed_map = false;
  EXPECT_NE(error_of([&] {
              quantize(std::vector<float>{1.0f, -1.0f}, Format::dynamic8, u);
            }).find("negative"),
            std::string::npos);
  Options b;
  b.bits = 9;
  EXPECT_NE(error_of([&] { quantize(x, Format::quantile, b); }).find("bits"), std::string::npos);
  Options dq;
  dq.double_quant = true;
  EXPECT_NE(error_of([&] { quantize(x, Format::int8_absmax, dq); }), "");
  EXPECT_NE(error_of([] { parse_format("int3"); }).find("unknown quantization method"),
            std::string::npos);
}

}  // namespace quant_formats_test
}  // namespace
}  // namespace snug::quant
