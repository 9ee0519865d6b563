// Quantized weights in tracked memory (quant/weight_quant.h): the values bit-identical to
// quant::quantize / quant::dequantize, the fast dequantizer bit-identical to the reference, the
// bytes per category equal to quant::storage_breakdown on cpu and meta, gpt2-124m's bits per
// parameter, and clear errors.
#include "quant/weight_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/quant_format.h"
#include "core/tensor.h"
#include "kernels/backends.h"
#include "quant/quant_data.h"
#include "support/errors.h"

namespace snug {
namespace {
namespace weight_quant_test {

using quant::Format;

using test::error_of;

WeightQuantConfig config(Format f, bool dq = false, int64_t block = 0) {
  WeightQuantConfig c;
  c.format = f;
  c.double_quant = dq;
  c.block = block;
  return c;
}

// Every supported format, with and without double quantization, plus odd blocks (blocks that
// share a byte of 4-bit codes).
std::vector<WeightQuantConfig> all_configs() {
  return {config(Format::nf4),
          config(Format::nf4, true),
          config(Format::fp4),
          config(Format::fp4, true),
          config(Format::int8_blockwise),
          config(Format::nf4, false, 63),
          config(Format::fp4, true, 33),
          config(Format::int8_blockwise, false, 100)};
}

quant::Options options_of(const WeightQuantConfig& c) {
  quant::Options o;
  if (c.block) o.block = c.block;
  o.double_quant = c.double_quant;
  return o;
}

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

struct Case {
  Shape shape;
  std::vector<float> data;
  std::string what;
};

std::vector<Case> cases() {
  std::vector<Case> r;
  for (const Shape& s : {Shape{64 * 3 + 7}, Shape{768, 2304}}) {
    const int64_t n = shape_numel(s);
    r.push_back({s, quant::testdata::normal(n, 11), "normal " + shape_str(s)});
    r.push_back({s, quant::testdata::with_outliers(n, 12), "outliers " + shape_str(s)});
  }
  return r;
}

TEST(WeightQuant, ValuesBitIdenticalToQuantize) {
  Device cpu(cpu_backend());
  for (const Case& c : cases()) {
    for (const WeightQuantConfig& cfg : all_configs()) {
      SCOPED_TRACE(c.what + ", " + cfg.describe());
      const quant::Quantized want =
          quant::quantize(c.data.data(), c.shape, cfg.format, options_of(cfg));
      const QuantizedWeight q = quantize_weight(c.data.data(), c.shape, cfg, cpu);
      EXPECT_EQ(q.shape, c.shape);
      EXPECT_EQ(q.numel, want.numel);
      EXPECT_EQ(q.cfg.block, want.block);
      EXPECT_EQ(q.num_blocks(), want.num_blocks());
      const quant::Quantized got = to_quantized(q);
      EXPECT_EQ(got.codes, want.codes);
      EXPECT_EQ(bits_of(got.scales), bits_of(want.scales));
      EXPECT_EQ(got.double_quant, want.double_quant);
      EXPECT_EQ(got.dq_codes, want.dq_codes);
      EXPECT_EQ(bits_of(got.dq_absmax), bits_of(want.dq_absmax));
      EXPECT_EQ(f32_bits(got.dq_offset), f32_bits(want.dq_offset));
      EXPECT_EQ(q.absmax.defined(), !cfg.double_quant);
      EXPECT_EQ(q.dq_codes.defined(), cfg.double_quant);

      // The fast dequantizer, the reference, and quant::dequantize of quant::quantize's result.
      const std::vector<float> expect = quant::dequantize(want);
      std::vector<float> fast(expect.size(), std::numeric_limits<float>::quiet_NaN());
      std::vector<float> ref(expect.size(), std::numeric_limits<float>::quiet_NaN());
      dequantize_weight(q, fast.data());
      dequantize_weight_reference(q, ref.data());
      EXPECT_EQ(bits_of(fast), bits_of(expect));
      EXPECT_EQ(bits_of(ref), bits_of(expect));
    }
  }
}

TEST(WeightQuant, FromTensorEqualsFromHostArray) {
  Device cpu(cpu_backend());
  const std::vector<float> x = quant::testdata::with_outliers(96 * 40, 13);
  Tensor w = Tensor::empty({96, 40}, DType::f32, Category::weights, cpu);
  std::memcpy(w.data<float>(), x.data(), x.size() * sizeof(float));
  for (const WeightQuantConfig& cfg : all_configs()) {
    SCOPED_TRACE(cfg.describe());
    const quant::Quantized a = to_quantized(quantize_weight(w, cfg));
    const quant::Quantized b = to_quantized(quantize_weight(x.data(), {96, 40}, cfg, cpu));
    EXPECT_EQ(a.codes, b.codes);
    EXPECT_EQ(bits_of(a.scales), bits_of(b.scales));
    EXPECT_EQ(a.dq_codes, b.dq_codes);
    EXPECT_EQ(bits_of(a.dq_absmax), bits_of(b.dq_absmax));
    EXPECT_EQ(f32_bits(a.dq_offset), f32_bits(b.dq_offset));
  }
}

// The pool's view of one quantize_weight: live bytes per category while the result is held, the
// temporary maximum during the call, and nothing left after it is dropped.
struct Tracked {
  int64_t weights = 0, quant_state = 0, temporary_max = 0, live_after = 0;
};

Tracked track(Device& dev, const Shape& shape, const WeightQuantConfig& cfg, const float* x) {
  dev.pool().reset_peak();
  Tracked t;
  {
    const QuantizedWeight q = quantize_weight(x, shape, cfg, dev);
    const MemoryStats s = dev.pool().stats();
    t.weights = s.live[static_cast<int>(Category::weights)];
    t.quant_state = s.live[static_cast<int>(Category::quant_state)];
    t.temporary_max = s.max_by_category[static_cast<int>(Category::temporary)];
    EXPECT_EQ(s.live[static_cast<int>(Category::temporary)], 0);
    EXPECT_EQ(q.tracked_bytes(), t.weights + t.quant_state);
  }
  t.live_after = dev.pool().live_total();
  return t;
}

TEST(WeightQuant, TrackedBytesEqualStorageBreakdownOnMetaAndCpu) {
  for (const Shape& shape : {Shape{64 * 3 + 7}, Shape{768, 2304}, Shape{3, 5}, Shape{256 * 64}}) {
    const int64_t n = shape_numel(shape);
    const std::vector<float> x = quant::testdata::normal(n, 14);
    for (const WeightQuantConfig& cfg : all_configs()) {
      SCOPED_TRACE(shape_str(shape) + ", " + cfg.describe());
      const quant::StorageBytes want = weight_quant_bytes(n, cfg);
      const quant::StorageBytes sb = quant::storage_breakdown(cfg.format, n, options_of(cfg));
      EXPECT_EQ(want.codes, sb.codes);
      EXPECT_EQ(want.state, sb.state);
      const int64_t workspace = quant::quantize_workspace_bytes(cfg.format, n, options_of(cfg));
      Device meta(meta_backend()), cpu(cpu_backend());
      const Tracked m = track(meta, shape, cfg, nullptr);
      const Tracked c = track(cpu, shape, cfg, x.data());
      for (const Tracked& t : {m, c}) {
        EXPECT_EQ(t.weights, want.codes);
        EXPECT_EQ(t.quant_state, want.state);
        EXPECT_EQ(t.temporary_max, workspace);
        EXPECT_EQ(t.live_after, 0);
      }
      EXPECT_EQ(meta.pool().stats().peak_total, cpu.pool().stats().peak_total);
    }
  }
}

TEST(WeightQuant, MetaAllocatesShapesOnly) {
  Device meta(meta_backend());
  const QuantizedWeight q = quantize_weight(nullptr, {768, 2304}, config(Format::nf4, true), meta);
  EXPECT_TRUE(q.codes.is_meta());
  EXPECT_EQ(q.codes.raw(), nullptr);
  EXPECT_EQ(q.codes.shape(), (Shape{768 * 2304 / 2}));
  EXPECT_EQ(q.dq_codes.shape(), (Shape{768 * 2304 / 64}));
  EXPECT_EQ(q.dq_absmax.shape(), (Shape{108}));  // ceil(27648 / 256)
  EXPECT_EQ(q.dq_offset.shape(), (Shape{1}));
  EXPECT_FALSE(q.absmax.defined());
  dequantize_weight(q, nullptr);  // no-op on meta
  // A meta tensor as the source: same shapes, nothing read.
  const Tensor w = Tensor::empty({300, 7}, DType::f32, Category::weights, meta);
  const QuantizedWeight r = quantize_weight(w, config(Format::int8_blockwise));
  EXPECT_EQ(r.codes.numel(), 2100);
  EXPECT_EQ(r.absmax.numel(), 9);  // ceil(2100 / 256)
  EXPECT_EQ(r.tracked_bytes(), 2100 + 4 * 9);
}

// Bits per parameter of gpt2-124m's Linear weights (per layer c_attn 768x2304, attn c_proj
// 768x768, c_fc 768x3072, mlp c_proj 3072x768; 12 layers), measured on a meta pool.
double gpt2_124m_linear_bits(const WeightQuantConfig& cfg) {
  Device meta(meta_backend());
  std::vector<QuantizedWeight> held;
  int64_t params = 0;
  for (int layer = 0; layer < 12; ++layer)
    for (const Shape& s : {Shape{768, 2304}, Shape{768, 768}, Shape{768, 3072}, Shape{3072, 768}}) {
      held.push_back(quantize_weight(nullptr, s, cfg, meta));
      params += shape_numel(s);
    }
  EXPECT_EQ(params, 84934656);
  const MemoryStats st = meta.pool().stats();
  const int64_t bytes = st.live[static_cast<int>(Category::weights)] +
                        st.live[static_cast<int>(Category::quant_state)];
  EXPECT_EQ(bytes, st.live_total);
  return 8.0 * static_cast<double>(bytes) / static_cast<double>(params);
}

TEST(WeightQuant, Gpt2LinearBitsPerParam) {
  const double nf4 = gpt2_124m_linear_bits(config(Format::nf4));
  const double nf4_dq = gpt2_124m_linear_bits(config(Format::nf4, true));
  const double fp4_dq = gpt2_124m_linear_bits(config(Format::fp4, true));
  const double int8 = gpt2_124m_linear_bits(config(Format::int8_blockwise));
  std::printf(
      "gpt2-124m Linear weights, bits/param: nf4 %.6f, nf4+DQ %.6f, fp4+DQ %.6f, "
      "int8_blockwise %.6f\n",
      nf4, nf4_dq, fp4_dq, int8);
  EXPECT_EQ(nf4, 4.5);  // 4 + 32/64
  EXPECT_LE(nf4_dq, 4.13);
  EXPECT_GT(nf4_dq, 4.125);  // 4 + 8/64, plus the group absmax and offsets
  EXPECT_EQ(fp4_dq, nf4_dq);
  EXPECT_EQ(int8, 8.125);  // 8 + 32/256
}

TEST(WeightQuant, DescribeAndParse) {
  EXPECT_EQ(config(Format::nf4, true).describe(), "nf4, blocks of 64, double quant");
  EXPECT_EQ(config(Format::fp4).describe(), "fp4, blocks of 64");
  EXPECT_EQ(config(Format::int8_blockwise).describe(), "int8_blockwise, blocks of 256");
  EXPECT_EQ(config(Format::nf4, false, 128).describe(), "nf4, blocks of 128");
  EXPECT_EQ(config(Format::fp4).resolved().block, 64);
  EXPECT_EQ(parse_4bit_quant_type("nf4"), Format::nf4);
  EXPECT_EQ(parse_4bit_quant_type("fp4"), Format::fp4);
  EXPECT_EQ(error_of([] { parse_4bit_quant_type("int4"); }),
            "--bnb-4bit-quant-type must be nf4 or fp4, got 'int4'");
  EXPECT_NE(error_of([] { parse_4bit_quant_type("NF4"); }), "");
}

TEST(WeightQuant, ClearErrors) {
  Device cpu(cpu_backend());
  const std::vector<float> x = quant::testdata::normal(128, 15);
  const auto quant_err = [&](const WeightQuantConfig& cfg) {
    return error_of([&] { quantize_weight(x.data(), {128}, cfg, cpu, "h.0.mlp.c_fc.weight"); });
  };
  EXPECT_EQ(quant_err(config(Format::int4)),
            "quantize_weight h.0.mlp.c_fc.weight: weight quantization supports nf4, fp4 and "
            "int8_blockwise, not int4");
  EXPECT_NE(quant_err(config(Format::dynamic8)).find("not dynamic8"), std::string::npos);
  EXPECT_NE(quant_err(config(Format::quantile)).find("not quantile"), std::string::npos);
  EXPECT_EQ(quant_err(config(Format::int8_blockwise, true)),
            "quantize_weight h.0.mlp.c_fc.weight: double quantization applies to the 4-bit "
            "formats (nf4, fp4), not int8_blockwise");
  EXPECT_NE(quant_err(config(Format::nf4, false, -4)).find("block must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([] { weight_quant_bytes(10, config(Format::int8_blockwise, true)); }), "");
  EXPECT_NE(error_of([] { config(Format::int4).describe(); }), "");

  // Not f32.
  const Tensor bf = Tensor::zeros({4, 8}, DType::bf16, Category::weights, cpu);
  EXPECT_EQ(error_of([&] { quantize_weight(bf, config(Format::nf4), "wte"); }),
            "quantize_weight wte: expected an f32 tensor, got bf16 of shape (4,8)");
  const Tensor i8 = Tensor::zeros({4}, DType::i8, Category::weights, cpu);
  EXPECT_NE(error_of([&] {
              quantize_weight(i8, config(Format::int8_blockwise));
            }).find("expected an f32 tensor, got i8"),
            std::string::npos);
  EXPECT_NE(error_of([] { quantize_weight(Tensor(), config(Format::nf4)); }).find("undefined"),
            std::string::npos);

  // NaN names the weight and the element; nothing stays allocated.
  std::vector<float> bad = x;
  bad[70] = std::numeric_limits<float>::quiet_NaN();
  const int64_t live_before = cpu.pool().live_total();
  const std::string e = error_of([&] {
    quantize_weight(bad.data(), {2, 64}, config(Format::nf4, true), cpu, "w1");
  });
  EXPECT_NE(e.find("quantize_weight w1: "), std::string::npos) << e;
  EXPECT_NE(e.find("element 70"), std::string::npos) << e;
  EXPECT_EQ(cpu.pool().live_total(), live_before);

  // Empty weight, and no data on a real device.
  EXPECT_EQ(quant_err(config(Format::nf4)), "");  // a valid config passes
  EXPECT_EQ(error_of([&] {
              quantize_weight(x.data(), {0, 5}, config(Format::nf4), cpu, "e");
            }),
            "quantize_weight e: empty weight (0,5) (nothing to quantize)");
  EXPECT_EQ(error_of([&] { quantize_weight(nullptr, {8}, config(Format::nf4), cpu, "p"); }),
            "quantize_weight p: no data for a weight of shape (8) on cpu");
}

}  // namespace weight_quant_test
}  // namespace
}  // namespace snug
