// The CUDA kernels of kernels/cuda/llama.cu (RMSNorm, SwiGLU) against snug::ref, on random inputs.
#include <gtest/gtest.h>

#include <tuple>

#include "kernels/kernels.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace llama_cudatest {

using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

TEST(CudaLlama, RmsnormForwardBackward) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 100;
  for (auto [N, C] : {std::tuple<int64_t, int64_t>{1, 1},
                      {7, 13},
                      {33, 300},
                      {5, 1031},
                      {2048, 768},
                      {64, 4096}}) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    const float eps = 1e-5f;
    const auto x = random_floats(N * C, ++seed, -2.0f, 2.0f);
    const auto w = random_floats(C, ++seed, 0.5f, 1.5f);
    const auto dout = random_floats(N * C, ++seed);
    std::vector<float> out(N * C), rstd(N);
    ref::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
    GpuBuffer<float> dx(gpu, x), dw_(gpu, w), dout_d(gpu, dout), dy(gpu, N * C), dr(gpu, N);
    ops.rmsnorm_forward(dy, dr, dx, dw_, N, C, eps);
    EXPECT_LT(rel_norm_error(dy.host(), out), test::kF32Tol);
    EXPECT_LT(rel_norm_error(dr.host(), rstd), test::kF32Tol);

    // Both gradients accumulate: start from random values.
    auto dinp = random_floats(N * C, ++seed), dw = random_floats(C, ++seed);
    const auto dinp0 = dinp, dw0 = dw;
    ref::rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N,
                          C);
    GpuBuffer<float> gdinp(gpu, dinp0), gdw(gpu, dw0), grstd(gpu, rstd);
    ops.rmsnorm_backward(gdinp, gdw, dout_d, dx, dw_, grstd, N, C);
    EXPECT_LT(rel_norm_error(gdinp.host(), dinp), test::kF32Tol);
    EXPECT_LT(rel_norm_error(gdw.host(), dw), test::kF32Tol);

    // Null outputs are skipped; a second run gives the same bits.
    GpuBuffer<float> only_dw(gpu, dw0), only_dinp(gpu, dinp0);
    ops.rmsnorm_backward(nullptr, only_dw, dout_d, dx, dw_, grstd, N, C);
    ops.rmsnorm_backward(only_dinp, nullptr, dout_d, dx, dw_, grstd, N, C);
    EXPECT_EQ(only_dw.host(), gdw.host());
    EXPECT_EQ(only_dinp.host(), gdinp.host());
  }
}

TEST(CudaLlama, SwigluForwardBackward) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 200;
  for (int64_t n : {1, 7, 1000, 300001, 2048 * 3072}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const auto gate = random_floats(n, ++seed, -8.0f, 8.0f), up = random_floats(n, ++seed);
    const auto dout = random_floats(n, ++seed);
    std::vector<float> out(n), dgate(n), dup(n);
    ref::swiglu_forward(out.data(), gate.data(), up.data(), n);
    ref::swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), n);
    GpuBuffer<float> g(gpu, gate), u(gpu, up), d(gpu, dout), o(gpu, n), dg(gpu, n), du(gpu, n);
    ops.swiglu_forward(o, g, u, n);
    EXPECT_LT(rel_norm_error(o.host(), out), test::kF32Tol);
    ops.swiglu_backward(dg, du, d, g, u, n);
    EXPECT_LT(rel_norm_error(dg.host(), dgate), test::kF32Tol);
    EXPECT_LT(rel_norm_error(du.host(), dup), test::kF32Tol);

    // dgate aliasing dout, dup null; then dup aliasing dout, dgate null.
    GpuBuffer<float> a1(gpu, dout), a2(gpu, dout);
    ops.swiglu_backward(a1, nullptr, a1, g, u, n);
    EXPECT_EQ(a1.host(), dg.host());
    ops.swiglu_backward(nullptr, a2, a2, g, u, n);
    EXPECT_EQ(a2.host(), du.host());
  }
}

}  // namespace llama_cudatest
}  // namespace
}  // namespace snug
