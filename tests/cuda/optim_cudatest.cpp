// The CUDA optimizer updates (kernels/cuda/optim.cu) against snug::ref on random inputs: fp32
// values within test::kF32Tol, 8-bit state codes and their absmax, and the --bf16-full steps'
// stochastically rounded bf16 values bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "kernels/optim_ops.h"
#include "kernels/stochastic_round.h"
#include "optim/quant8.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace optim_cudatest {

using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

const std::vector<int64_t> kSizes = {1, 7, 1000, 300001};

// Gradients with a few non-finite entries (the bitsandbytes updates skip them).
std::vector<float> gradient_with_nonfinite(int64_t n, uint64_t seed) {
  std::vector<float> g = random_floats(n, seed);
  if (n > 3) {
    g[1] = std::numeric_limits<float>::quiet_NaN();
    g[static_cast<size_t>(n / 2)] = std::numeric_limits<float>::infinity();
    g[static_cast<size_t>(n - 1)] = -std::numeric_limits<float>::infinity();
  }
  return g;
}

void expect_close(const GpuBuffer<float>& got, const std::vector<float>& want, const char* what,
                  int64_t n) {
  EXPECT_LT(rel_norm_error(got.host(), want), test::kF32Tol) << what << " n=" << n;
}

TEST(CudaOptim, Sgd) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (bool momentum : {false, true})
      for (bool first : {false, true}) {
        const auto g = random_floats(n, 1), p0 = random_floats(n, 2), b0 = random_floats(n, 3);
        std::vector<float> p = p0, buf = b0;
        ref::sgd_update(p.data(), g.data(), momentum ? buf.data() : nullptr, n, 0.01f, 0.9f, 0.05f,
                        first);
        GpuBuffer<float> dp(gpu, p0), dg(gpu, g), dbuf(gpu, b0);
        gpu.ops().sgd_update(dp, dg, momentum ? dbuf.get() : nullptr, n, 0.01f, 0.9f, 0.05f, first);
        expect_close(dp, p, "p", n);
        expect_close(dbuf, buf, "buf", n);
      }
}

TEST(CudaOptim, Lion) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (bool bnb : {false, true}) {
      const auto g = bnb ? gradient_with_nonfinite(n, 4) : random_floats(n, 4);
      const auto p0 = random_floats(n, 5), m0 = random_floats(n, 6);
      std::vector<float> p = p0, m = m0;
      GpuBuffer<float> dp(gpu, p0), dg(gpu, g), dm(gpu, m0);
      if (bnb) {
        ref::lion_bnb_update(p.data(), g.data(), m.data(), n, 1e-3f, 0.9f, 0.99f, 0.1f);
        gpu.ops().lion_bnb_update(dp, dg, dm, n, 1e-3f, 0.9f, 0.99f, 0.1f);
      } else {
        ref::lion_update(p.data(), g.data(), m.data(), n, 1e-3f, 0.9f, 0.99f, 0.1f);
        gpu.ops().lion_update(dp, dg, dm, n, 1e-3f, 0.9f, 0.99f, 0.1f);
      }
      expect_close(dp, p, "p", n);
      expect_close(dm, m, "m", n);
    }
}

TEST(CudaOptim, AdamwBnb) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (int64_t t : {1, 7}) {
      const auto g = gradient_with_nonfinite(n, 7), p0 = random_floats(n, 8);
      const auto m0 = random_floats(n, 9), v0 = random_floats(n, 10, 0.0f, 1.0f);
      std::vector<float> p = p0, m = m0, v = v0;
      ref::adamw_bnb_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                            0.01f, t);
      GpuBuffer<float> dp(gpu, p0), dg(gpu, g), dm(gpu, m0), dv(gpu, v0);
      gpu.ops().adamw_bnb_update(dp, dg, dm, dv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
      expect_close(dp, p, "p", n);
      expect_close(dm, m, "m", n);
      expect_close(dv, v, "v", n);
    }
}

// An 8-bit state quantized from random values, as the optimizer holds it.
struct State8 {
  std::vector<uint8_t> q;
  std::vector<float> absmax;
};

State8 state8(int64_t n, uint64_t seed, bool is_signed) {
  const auto x = random_floats(n, seed, is_signed ? -0.3f : 0.0f, 0.3f);
  State8 s{std::vector<uint8_t>(static_cast<size_t>(n)),
           std::vector<float>(static_cast<size_t>(quant8::num_blocks(n, quant8::kOptimizerBlock)))};
  quant8::quantize_blockwise(x.data(), n,
                             is_signed ? quant8::signed_code() : quant8::unsigned_code(),
                             quant8::kOptimizerBlock, s.q.data(), s.absmax.data());
  return s;
}

TEST(CudaOptim, LionBnb8bitSameCodes) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : {1, 255, 256, 257, 1000, 300001}) {
    const auto g = gradient_with_nonfinite(n, 11), p0 = random_floats(n, 12);
    State8 m = state8(n, 13, true);
    std::vector<float> p = p0;
    GpuBuffer<float> dp(gpu, p0), dg(gpu, g), dabs(gpu, m.absmax);
    GpuBuffer<uint8_t> dq(gpu, m.q);
    const quant8::Code& code = quant8::signed_code();
    ref::lion_bnb_update_8bit(p.data(), g.data(), m.q.data(), m.absmax.data(), n, 1e-3f, 0.9f,
                              0.99f, 0.1f, &code);
    gpu.ops().lion_bnb_update_8bit(dp, dg, dq, dabs, n, 1e-3f, 0.9f, 0.99f, 0.1f, &code);
    expect_close(dp, p, "p", n);
    EXPECT_EQ(dq.host(), m.q) << "n=" << n;
    EXPECT_EQ(dabs.host(), m.absmax) << "n=" << n;
  }
}

TEST(CudaOptim, AdamwBnb8bitSameCodes) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : {1, 255, 256, 257, 1000, 300001})
    for (int64_t t : {1, 9}) {
      const auto g = gradient_with_nonfinite(n, 14), p0 = random_floats(n, 15);
      State8 m = state8(n, 16, true), v = state8(n, 17, false);
      std::vector<float> p = p0;
      GpuBuffer<float> dp(gpu, p0), dg(gpu, g), dam(gpu, m.absmax), dav(gpu, v.absmax);
      GpuBuffer<uint8_t> dqm(gpu, m.q), dqv(gpu, v.q);
      const quant8::Code &cm = quant8::signed_code(), &cv = quant8::unsigned_code();
      ref::adamw_bnb_update_8bit(p.data(), g.data(), m.q.data(), v.q.data(), m.absmax.data(),
                                 v.absmax.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t, &cm,
                                 &cv);
      gpu.ops().adamw_bnb_update_8bit(dp, dg, dqm, dqv, dam, dav, n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                                      0.01f, t, &cm, &cv);
      expect_close(dp, p, "p", n);
      EXPECT_EQ(dqm.host(), m.q) << "n=" << n << " t=" << t;
      EXPECT_EQ(dqv.host(), v.q) << "n=" << n << " t=" << t;
      EXPECT_EQ(dam.host(), m.absmax) << "n=" << n << " t=" << t;
      EXPECT_EQ(dav.host(), v.absmax) << "n=" << n << " t=" << t;
    }
}

struct FactoredShape {
  int64_t batch, rows, cols;
  bool vector;
};

const std::vector<FactoredShape> kFactoredShapes = {
    {1, 1, 1, true},    {1, 1, 1000, true}, {1, 1, 300001, true},
    {1, 1, 1, false},   {1, 7, 5, false},   {3, 13, 17, false},
    {2, 300, 1, false}, {1, 1, 257, false}, {1, 768, 3072, false},  // GPT-2's MLP weight
};

TEST(CudaOptim, Adafactor) {
  SNUG_REQUIRE_GPU(gpu);
  for (const FactoredShape& s : kFactoredShapes)
    for (bool decay : {false, true}) {
      SCOPED_TRACE(testing::Message() << "batch=" << s.batch << " rows=" << s.rows
                                      << " cols=" << s.cols << " vector=" << s.vector);
      const int64_t n = s.batch * s.rows * s.cols;
      const auto g = random_floats(n, 18), w0 = random_floats(n, 19);
      const auto R0 = random_floats(s.batch * s.rows, 20, 0.1f, 1.0f);
      const auto C0 = random_floats(s.batch * s.cols, 21, 0.1f, 1.0f);
      const auto V0 = random_floats(n, 22, 0.0f, 1.0f);
      std::vector<float> w = w0, R = R0, C = C0, V = V0;
      ref::adafactor_update(w.data(), g.data(), s.vector ? nullptr : R.data(),
                            s.vector ? nullptr : C.data(), s.vector ? V.data() : nullptr, s.batch,
                            s.rows, s.cols, 0.8f, 0.2f, 0.01f, -1e-3f, decay);
      GpuBuffer<float> dw(gpu, w0), dg(gpu, g), dR(gpu, R0), dC(gpu, C0), dV(gpu, V0);
      gpu.ops().adafactor_update(dw, dg, s.vector ? nullptr : dR.get(),
                                 s.vector ? nullptr : dC.get(), s.vector ? dV.get() : nullptr,
                                 s.batch, s.rows, s.cols, 0.8f, 0.2f, 0.01f, -1e-3f, decay);
      expect_close(dw, w, "w", n);
      expect_close(dR, R, "R", n);
      expect_close(dC, C, "C", n);
      expect_close(dV, V, "V", n);
      EXPECT_EQ(dg.host(), g);  // g is only read
    }
}

TEST(CudaOptim, Adalomo) {
  SNUG_REQUIRE_GPU(gpu);
  for (const FactoredShape& s : kFactoredShapes) {
    if (s.batch != 1) continue;
    for (bool decay : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "rows=" << s.rows << " cols=" << s.cols << " vector=" << s.vector);
      const int64_t n = s.rows * s.cols;
      const auto g0 = random_floats(n, 23, -3.0f, 3.0f), w0 = random_floats(n, 24);
      const auto R0 = random_floats(s.rows, 25, 0.1f, 1.0f);
      const auto C0 = random_floats(s.cols, 26, 0.1f, 1.0f);
      const auto V0 = random_floats(n, 27, 0.0f, 1.0f);
      std::vector<float> w = w0, g = g0, R = R0, C = C0, V = V0;
      ref::adalomo_update(w.data(), g.data(), s.vector ? nullptr : R.data(),
                          s.vector ? nullptr : C.data(), s.vector ? V.data() : nullptr, s.rows,
                          s.cols, 0.8f, 0.2f, 0.01f, 0.999f, decay);
      GpuBuffer<float> dw(gpu, w0), dg(gpu, g0), dR(gpu, R0), dC(gpu, C0), dV(gpu, V0);
      gpu.ops().adalomo_update(dw, dg, s.vector ? nullptr : dR.get(), s.vector ? nullptr : dC.get(),
                               s.vector ? dV.get() : nullptr, s.rows, s.cols, 0.8f, 0.2f, 0.01f,
                               0.999f, decay);
      expect_close(dw, w, "w", n);
      expect_close(dg, g, "U over g", n);
      expect_close(dR, R, "R", n);
      expect_close(dC, C, "C", n);
      expect_close(dV, V, "V", n);
    }
  }
}

TEST(CudaOptim, Lomo) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (auto [wd, coef] : {std::pair{0.0f, 1.0f}, {0.1f, 0.5f}}) {
      const auto g = random_floats(n, 28), p0 = random_floats(n, 29);
      std::vector<float> p = p0;
      ref::lomo_update(p.data(), g.data(), n, 0.01f, wd, coef);
      GpuBuffer<float> dp(gpu, p0), dg(gpu, g);
      gpu.ops().lomo_update(dp, dg, n, 0.01f, wd, coef);
      expect_close(dp, p, "p", n);
    }
}

TEST(CudaOptim, Galore) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (bool decay : {false, true}) {
      const auto g = random_floats(n, 30), p0 = random_floats(n, 31);
      const auto m0 = random_floats(n, 32), v0 = random_floats(n, 33, 0.0f, 1.0f);
      {
        std::vector<float> p = p0, m = m0, v = v0;
        ref::galore_adam_update(p.data(), g.data(), m.data(), v.data(), n, 0.9f, 0.999f, 1e-6f,
                                -1e-3f, -1e-5f, decay);
        GpuBuffer<float> dp(gpu, p0), dg(gpu, g), dm(gpu, m0), dv(gpu, v0);
        gpu.ops().galore_adam_update(dp, dg, dm, dv, n, 0.9f, 0.999f, 1e-6f, -1e-3f, -1e-5f, decay);
        expect_close(dp, p, "adam p", n);
        expect_close(dm, m, "adam m", n);
        expect_close(dv, v, "adam v", n);
      }
      {
        std::vector<float> low = g, m = m0, v = v0;
        ref::galore_adam_normalize(low.data(), m.data(), v.data(), n, 0.9f, 0.999f, 1e-6f);
        GpuBuffer<float> dlow(gpu, g), dm(gpu, m0), dv(gpu, v0);
        gpu.ops().galore_adam_normalize(dlow, dm, dv, n, 0.9f, 0.999f, 1e-6f);
        expect_close(dlow, low, "normalize low", n);
        expect_close(dm, m, "normalize m", n);
        expect_close(dv, v, "normalize v", n);
      }
      {
        std::vector<float> p = p0;
        ref::galore_apply(p.data(), g.data(), n, -1e-3f, 0.25f, -1e-5f, decay);
        GpuBuffer<float> dp(gpu, p0), dback(gpu, g);
        gpu.ops().galore_apply(dp, dback, n, -1e-3f, 0.25f, -1e-5f, decay);
        expect_close(dp, p, "apply p", n);
      }
    }
}

std::vector<uint16_t> random_bf16(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  const auto f = random_floats(n, seed, lo, hi);
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = f32_to_bf16(f[i]);
  return h;
}

TEST(CudaOptim, AdamwBf16SameBits) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (int64_t t : {1, 100}) {
      const uint64_t key = kernels::rounding_key(1234, t, 3);
      const auto g = random_bf16(n, 34), p0 = random_bf16(n, 35), m0 = random_bf16(n, 36);
      const auto v0 = random_bf16(n, 37, 0.0f, 0.01f);
      std::vector<uint16_t> p = p0, m = m0, v = v0;
      ref::adamw_update_bf16(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                             0.01f, t, key, 1000 * t);
      GpuBuffer<uint16_t> dp(gpu, p0), dg(gpu, g), dm(gpu, m0), dv(gpu, v0);
      gpu.ops().adamw_update_bf16(dp, dg, dm, dv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t, key,
                                  1000 * t);
      EXPECT_EQ(dp.host(), p) << "n=" << n << " t=" << t;
      EXPECT_EQ(dm.host(), m) << "n=" << n << " t=" << t;
      EXPECT_EQ(dv.host(), v) << "n=" << n << " t=" << t;
    }
}

// --precision-layout deepspeed: fp32 master, m and v and the 16-bit weights (bf16, and fp16
// storage, which the kernel takes) bit for bit, as the --bf16-full steps.
TEST(CudaOptim, AdamwMasterSameBits) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (bool fp16 : {false, true})
      for (int64_t t : {1, 100}) {
        const auto g = random_bf16(n, 41), p0 = random_bf16(n, 42);
        const auto w0 = random_floats(n, 43), m0 = random_floats(n, 44, -0.1f, 0.1f);
        const auto v0 = random_floats(n, 45, 0.0f, 0.01f);
        std::vector<uint16_t> p = p0;
        std::vector<float> w = w0, m = m0, v = v0;
        ref::adamw_update_master(p.data(), g.data(), w.data(), m.data(), v.data(), n, 1e-3f, 0.9f,
                                 0.999f, 1e-8f, 0.01f, t, fp16);
        GpuBuffer<uint16_t> dp(gpu, p0), dg(gpu, g);
        GpuBuffer<float> dw(gpu, w0), dm(gpu, m0), dv(gpu, v0);
        gpu.ops().adamw_update_master(dp, dg, dw, dm, dv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t,
                                      fp16);
        EXPECT_EQ(dp.host(), p) << "n=" << n << " t=" << t << " fp16=" << fp16;
        EXPECT_EQ(dw.host(), w) << "n=" << n << " t=" << t << " fp16=" << fp16;
        EXPECT_EQ(dm.host(), m) << "n=" << n << " t=" << t << " fp16=" << fp16;
        EXPECT_EQ(dv.host(), v) << "n=" << n << " t=" << t << " fp16=" << fp16;
      }
}

TEST(CudaOptim, SgdBf16SameBits) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (bool momentum : {false, true})
      for (bool first : {false, true}) {
        const uint64_t key = kernels::rounding_key(99, 5, 1);
        const auto g = random_bf16(n, 38), p0 = random_bf16(n, 39), b0 = random_bf16(n, 40);
        std::vector<uint16_t> p = p0, buf = b0;
        ref::sgd_update_bf16(p.data(), g.data(), momentum ? buf.data() : nullptr, n, 0.01f, 0.9f,
                             0.05f, first, key, 4097);
        GpuBuffer<uint16_t> dp(gpu, p0), dg(gpu, g), dbuf(gpu, b0);
        gpu.ops().sgd_update_bf16(dp, dg, momentum ? dbuf.get() : nullptr, n, 0.01f, 0.9f, 0.05f,
                                  first, key, 4097);
        EXPECT_EQ(dp.host(), p) << "n=" << n;
        EXPECT_EQ(dbuf.host(), buf) << "n=" << n;
      }
}

TEST(CudaOptim, LomoBf16SameBits) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : kSizes)
    for (auto [wd, coef] : {std::pair{0.0f, 1.0f}, {0.1f, 0.5f}})
      for (bool stochastic : {true, false}) {
        const uint64_t key = kernels::rounding_key(7, 2, 4);
        const auto g = random_bf16(n, 41), p0 = random_bf16(n, 42);
        std::vector<uint16_t> p = p0;
        ref::lomo_update_bf16(p.data(), g.data(), n, 0.01f, wd, coef, stochastic, key);
        GpuBuffer<uint16_t> dp(gpu, p0), dg(gpu, g);
        gpu.ops().lomo_update_bf16(dp, dg, n, 0.01f, wd, coef, stochastic, key);
        EXPECT_EQ(dp.host(), p) << "n=" << n << " stochastic " << stochastic;
        EXPECT_EQ(dg.host(), g) << "g is left as it is";
      }
}

// AdaLomo on bf16 weights: the second moment within float rounding of the reference (its sums
// run in another order), the weights within one bf16 ulp.
TEST(CudaOptim, AdalomoBf16) {
  SNUG_REQUIRE_GPU(gpu);
  for (const FactoredShape& s : kFactoredShapes) {
    if (s.batch != 1) continue;
    for (bool stochastic : {true, false}) {
      SCOPED_TRACE(testing::Message() << "rows=" << s.rows << " cols=" << s.cols
                                      << " vector=" << s.vector << " stochastic=" << stochastic);
      const int64_t n = s.rows * s.cols;
      const uint64_t key = kernels::rounding_key(8, 3, 1);
      const auto g = random_bf16(n, 43), w0 = random_bf16(n, 44);
      const auto R0 = random_floats(s.rows, 45, 0.1f, 1.0f);
      const auto C0 = random_floats(s.cols, 46, 0.1f, 1.0f);
      const auto V0 = random_floats(n, 47, 0.0f, 1.0f);
      std::vector<uint16_t> w = w0;
      std::vector<float> R = R0, C = C0, V = V0;
      ref::adalomo_update_bf16(w.data(), g.data(), s.vector ? nullptr : R.data(),
                               s.vector ? nullptr : C.data(), s.vector ? V.data() : nullptr, s.rows,
                               s.cols, 0.5f, 0.8f, 0.2f, 0.01f, 0.999f, true, stochastic, key);
      GpuBuffer<uint16_t> dw(gpu, w0), dg(gpu, g);
      GpuBuffer<float> dR(gpu, R0), dC(gpu, C0), dV(gpu, V0);
      gpu.ops().adalomo_update_bf16(dw, dg, s.vector ? nullptr : dR.get(),
                                    s.vector ? nullptr : dC.get(), s.vector ? dV.get() : nullptr,
                                    s.rows, s.cols, 0.5f, 0.8f, 0.2f, 0.01f, 0.999f, true,
                                    stochastic, key);
      expect_close(dR, R, "R", n);
      expect_close(dC, C, "C", n);
      expect_close(dV, V, "V", n);
      const std::vector<uint16_t> got = dw.host();
      for (int64_t i = 0; i < n; ++i) {
        const float a = bf16_to_f32(got[i]), b = bf16_to_f32(w[i]);
        const float ulp = b == 0.0f ? 1e-30f : std::ldexp(1.0f, std::ilogb(b) - 7);
        ASSERT_LE(std::abs(a - b), ulp) << i;
      }
    }
  }
}

}  // namespace optim_cudatest
}  // namespace
}  // namespace snug
