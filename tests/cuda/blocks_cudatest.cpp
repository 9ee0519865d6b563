// The CUDA kernels of kernels/cuda/blocks.cu against snug::ref, on random inputs: embedding,
// layernorm, the activations, row bias, dropout and AdamW. Write-only outputs start poisoned
// (NaN), accumulated ones random.
#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace blocks_cudatest {

using test::GpuBuffer;
using test::random_floats;
using test::random_ints;
using test::rel_norm_error;

TEST(CudaBlocks, EmbeddingMatchesReferenceBitForBit) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  struct Case {
    int64_t B, T, C, V;
  };
  for (auto [B, T, C, V] : {Case{3, 5, 7, 11}, Case{2, 9, 130, 3}, Case{4, 512, 768, 50257}}) {
    SCOPED_TRACE(testing::Message() << "B=" << B << " T=" << T << " C=" << C << " V=" << V);
    const auto idx = random_ints(B * T, 1, 0, static_cast<int32_t>(V - 1));
    const auto wte = random_floats(V * C, 2), wpe = random_floats(T * C, 3);
    const auto dout = random_floats(B * T * C, 4);
    GpuBuffer<int32_t> didx(gpu, idx);
    GpuBuffer<float> dwte_in(gpu, wte), dwpe_in(gpu, wpe), ddout(gpu, dout);
    for (bool with_wpe : {true, false}) {
      std::vector<float> want(B * T * C);
      ref::embedding_forward(want.data(), idx.data(), wte.data(), with_wpe ? wpe.data() : nullptr,
                             B, T, C);
      GpuBuffer<float> out(gpu, B * T * C);
      ops.embedding_forward(out, didx, dwte_in, with_wpe ? dwpe_in.get() : nullptr, B, T, C);
      EXPECT_EQ(out.host(), want) << "with_wpe=" << with_wpe;
    }
    // Backward accumulates into random gradients; the same order as the reference per element,
    // so the same bits (and two runs give the same bits).
    auto gwte = random_floats(V * C, 5), gwpe = random_floats(T * C, 6);
    GpuBuffer<float> dgwte(gpu, gwte), dgwpe(gpu, gwpe), dgwte_only(gpu, gwte);
    ref::embedding_backward(gwte.data(), gwpe.data(), dout.data(), idx.data(), B, T, C);
    ops.embedding_backward(dgwte, dgwpe, ddout, didx, B, T, C);
    ops.embedding_backward(dgwte_only, nullptr, ddout, didx, B, T, C);
    EXPECT_EQ(dgwte.host(), gwte);
    EXPECT_EQ(dgwpe.host(), gwpe);
    EXPECT_EQ(dgwte_only.host(), gwte);
  }
}

TEST(CudaBlocks, LayerNormForwardBackward) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 20;
  for (auto [N, C] :
       {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {33, 300}, {3, 3000}, {2048, 768}}) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    auto inp = random_floats(N * C, ++seed, -2.0f, 3.0f);
    const auto w = random_floats(C, ++seed), b = random_floats(C, ++seed);
    std::vector<float> out(N * C), mean(N), rstd(N);
    ref::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                           C, 1e-5f);
    GpuBuffer<float> dinp(gpu, inp), dw(gpu, w), db(gpu, b), dout_(gpu, N * C), dmean(gpu, N),
        drstd(gpu, N);
    ops.layernorm_forward(dout_, dmean, drstd, dinp, dw, db, N, C, 1e-5f);
    EXPECT_LT(rel_norm_error(dout_.host(), out), test::kF32Tol);
    EXPECT_LT(rel_norm_error(dmean.host(), mean), test::kF32Tol);
    EXPECT_LT(rel_norm_error(drstd.host(), rstd), test::kF32Tol);

    // Backward from the reference's mean and rstd; every gradient accumulates.
    const auto dy = random_floats(N * C, ++seed);
    auto gin = random_floats(N * C, ++seed), gw = random_floats(C, ++seed),
         gb = random_floats(C, ++seed);
    GpuBuffer<float> ddy(gpu, dy), dgin(gpu, gin), dgw(gpu, gw), dgb(gpu, gb), m_(gpu, mean),
        r_(gpu, rstd);
    ref::layernorm_backward(gin.data(), gw.data(), gb.data(), dy.data(), inp.data(), w.data(),
                            mean.data(), rstd.data(), N, C);
    ops.layernorm_backward(dgin, dgw, dgb, ddy, dinp, dw, m_, r_, N, C);
    EXPECT_LT(rel_norm_error(dgin.host(), gin), test::kF32Tol);
    EXPECT_LT(rel_norm_error(dgw.host(), gw), test::kF32Tol);
    EXPECT_LT(rel_norm_error(dgb.host(), gb), test::kF32Tol);
    // Null gradients are skipped.
    const std::vector<float> gin2 = dgin.host();
    ops.layernorm_backward(nullptr, dgw, nullptr, ddy, dinp, dw, m_, r_, N, C);
    ops.layernorm_backward(dgin, nullptr, nullptr, ddy, dinp, dw, m_, r_, N, C);
    ref::layernorm_backward(gin.data(), gw.data(), nullptr, dy.data(), inp.data(), w.data(),
                            mean.data(), rstd.data(), N, C);
    EXPECT_LT(rel_norm_error(dgin.host(), gin), test::kF32Tol);
    EXPECT_LT(rel_norm_error(dgw.host(), gw), test::kF32Tol);
    EXPECT_LT(rel_norm_error(dgb.host(), gb), test::kF32Tol);
  }
}

using Unary = void (*)(float*, const float*, int64_t);
using Binary = void (*)(float*, const float*, const float*, int64_t);

TEST(CudaBlocks, ActivationsForwardBackward) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  struct Pair {
    const char* name;
    Unary ref_fwd, gpu_fwd;
    Binary ref_bwd, gpu_bwd;
  };
  const Pair pairs[] = {
      {"gelu", &ref::gelu_forward, ops.gelu_forward, &ref::gelu_backward, ops.gelu_backward},
      {"gelu_erf", &ref::gelu_erf_forward, ops.gelu_erf_forward, &ref::gelu_erf_backward,
       ops.gelu_erf_backward},
      {"tanh", &ref::tanh_forward, ops.tanh_forward, &ref::tanh_backward, ops.tanh_backward}};
  for (const Pair& p : pairs)
    for (int64_t n : {1, 7, 1000, 300001}) {
      SCOPED_TRACE(testing::Message() << p.name << " n=" << n);
      const auto x = random_floats(n, 30 + n, -6.0f, 6.0f), dy = random_floats(n, 31 + n);
      std::vector<float> y(n), dx(n);
      p.ref_fwd(y.data(), x.data(), n);
      GpuBuffer<float> dx_in(gpu, x), dout(gpu, n), ddy(gpu, dy), ddx(gpu, n);
      p.gpu_fwd(dout, dx_in, n);
      EXPECT_LT(rel_norm_error(dout.host(), y), test::kF32Tol);
      // tanh's backward reads the forward output, the GELUs' the input.
      const bool from_out = std::string(p.name) == "tanh";
      p.ref_bwd(dx.data(), from_out ? y.data() : x.data(), dy.data(), n);
      GpuBuffer<float> dy_ref_out(gpu, y);
      p.gpu_bwd(ddx, from_out ? dy_ref_out.get() : dx_in.get(), ddy, n);
      EXPECT_LT(rel_norm_error(ddx.host(), dx), test::kF32Tol);
      p.gpu_bwd(ddy, from_out ? dy_ref_out.get() : dx_in.get(), ddy, n);  // dinp aliases dout
      EXPECT_LT(rel_norm_error(ddy.host(), dx), test::kF32Tol);
      p.gpu_fwd(dx_in, dx_in, n);  // out aliases inp
      EXPECT_LT(rel_norm_error(dx_in.host(), y), test::kF32Tol);
    }
}

TEST(CudaBlocks, BiasRows) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {2048, 768}, {3, 5000}}) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    auto x = random_floats(N * C, 40), db = random_floats(C, 41);
    const auto b = random_floats(C, 42), dy = random_floats(N * C, 43);
    GpuBuffer<float> dx(gpu, x), dbias(gpu, b), ddb(gpu, db), ddy(gpu, dy);
    ref::add_bias_rows(x.data(), b.data(), N, C);
    ops.add_bias_rows(dx, dbias, N, C);
    EXPECT_EQ(dx.host(), x);
    ref::bias_grad_rows(db.data(), dy.data(), N, C);
    ops.bias_grad_rows(ddb, ddy, N, C);
    EXPECT_LT(rel_norm_error(ddb.host(), db), test::kF32Tol);
  }
}

TEST(CudaBlocks, DropoutMasksAreTheCpuMasks) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  for (int64_t n : {1, 999, 300001})
    for (double p : {0.0, 0.1, 0.5}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " p=" << p);
      const uint64_t key = 0x1234567890abcdefull + static_cast<uint64_t>(n);
      const auto x = random_floats(n, 50), dy = random_floats(n, 51);
      std::vector<float> y(n), dx(n);
      std::vector<uint8_t> mask(n);
      ref::dropout_forward(y.data(), mask.data(), x.data(), n, p, key);
      ref::dropout_backward(dx.data(), dy.data(), mask.data(), n, p);
      GpuBuffer<float> dxin(gpu, x), dout(gpu, n), ddy(gpu, dy), ddx(gpu, n);
      GpuBuffer<uint8_t> dmask(gpu, n);
      ops.dropout_forward(dout, dmask, dxin, n, p, key);
      EXPECT_EQ(dmask.host(), mask);
      EXPECT_EQ(dout.host(), y);
      ops.dropout_backward(ddx, ddy, dmask, n, p);
      EXPECT_EQ(ddx.host(), dx);
      ops.dropout_forward(dxin, nullptr, dxin, n, p, key);  // no mask, in place
      EXPECT_EQ(dxin.host(), y);
    }
}

TEST(CudaBlocks, AdamWUpdate) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  for (int64_t n : {1, 1000, 300001})
    for (int64_t t : {1, 7}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " t=" << t);
      auto p = random_floats(n, 60), m = random_floats(n, 61, -0.01f, 0.01f),
           v = random_floats(n, 62, 0.0f, 1e-4f);
      const auto g = random_floats(n, 63, -0.1f, 0.1f);
      GpuBuffer<float> dp(gpu, p), dm(gpu, m), dv(gpu, v), dg(gpu, g);
      ref::adamw_update(p.data(), g.data(), m.data(), v.data(), n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                        t);
      ops.adamw_update(dp, dg, dm, dv, n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
      EXPECT_LT(rel_norm_error(dp.host(), p), test::kF32Tol);
      EXPECT_LT(rel_norm_error(dm.host(), m), test::kF32Tol);
      EXPECT_LT(rel_norm_error(dv.host(), v), test::kF32Tol);
    }
}

}  // namespace blocks_cudatest
}  // namespace
}  // namespace snug
