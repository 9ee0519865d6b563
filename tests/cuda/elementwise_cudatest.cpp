// The CUDA kernels of kernels/cuda/elementwise.cu and gemm.cu against snug::ref, on random inputs.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace elementwise_cudatest {

using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

TEST(CudaElementwise, AddScaleSumSquares) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  for (int64_t n : {1, 7, 1000, 300001}) {
    const auto a = random_floats(n, 1), b = random_floats(n, 2);
    std::vector<float> want(n);
    ref::add(want.data(), a.data(), b.data(), n);
    GpuBuffer<float> da(gpu, a), db(gpu, b), out(gpu, n);
    ops.add(out, da, db, n);
    EXPECT_LT(rel_norm_error(out.host(), want), test::kF32Tol) << "add n=" << n;
    ops.add(da, da, db, n);  // out aliases a
    EXPECT_EQ(da.host(), want);

    std::vector<float> s = a;
    ref::scale(s.data(), -0.37f, n);
    GpuBuffer<float> ds(gpu, a);
    ops.scale(ds, -0.37f, n);
    EXPECT_EQ(ds.host(), s);

    const double want_ss = ref::sum_squares(a.data(), n);
    EXPECT_NEAR(ops.sum_squares(GpuBuffer<float>(gpu, a), n), want_ss, 1e-12 * want_ss + 1e-300);
  }
}

TEST(CudaGemm, AllTransposesAndStrides) {
  SNUG_REQUIRE_GPU(gpu);
  uint64_t seed = 10;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [M, N, K, alpha, beta] :
           {std::tuple<int64_t, int64_t, int64_t, float, float>{13, 11, 9, 1.0f, 0.0f},
            {67, 45, 131, -1.25f, 1.0f},
            {1, 37, 5, 0.7f, 0.3f},
            {256, 768, 512, 1.0f, 0.0f}}) {
        SCOPED_TRACE(testing::Message()
                     << "ta=" << ta << " tb=" << tb << " M=" << M << " N=" << N << " K=" << K);
        const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
        const auto A = random_floats((ta ? K : M) * lda, ++seed);
        const auto B = random_floats((tb ? N : K) * ldb, ++seed);
        auto C = random_floats(M * ldc, ++seed);
        if (beta == 0.0f) C.assign(C.size(), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> want = C;
        ref::gemm_f32(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, want.data(), ldc);
        GpuBuffer<float> dA(gpu, A), dB(gpu, B), dC(gpu, C);
        gpu.ops().gemm_f32(ta, tb, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc);
        const auto got = dC.host();
        // Padding columns keep their values (NaN too), so compare the rows' first N.
        std::vector<float> g, w;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            g.push_back(got[i * ldc + j]);
            w.push_back(want[i * ldc + j]);
          }
        EXPECT_LT(rel_norm_error(g, w), test::kF32Tol);
      }
}

TEST(CudaOps, MissingOpsAreNamed) {
  SNUG_REQUIRE_GPU(gpu);
  const std::vector<std::string> missing = cuda_missing_ops();
  for (const std::string& m : missing) std::printf("no CUDA kernel yet: %s\n", m.c_str());
  SUCCEED() << missing.size() << " ops without a CUDA kernel";
}

// sum_squares_each (one wait for every sum) gives the single ops' sums bit for bit: the same
// grid and order per vector. fp32 and bf16 mixed, an empty vector among them.
TEST(CudaElementwise, SumSquaresEachIsEachSingleSumBitForBit) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  const std::vector<int64_t> sizes = {1, 0, 1000, 300001, 7, 70001};
  const bool bf16[] = {false, false, false, false, true, true};
  std::vector<std::unique_ptr<GpuBuffer<float>>> f32;
  std::vector<std::unique_ptr<GpuBuffer<uint16_t>>> h16;
  std::vector<const void*> xs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto f = random_floats(sizes[i], 60 + i, -3.0f, 3.0f);
    std::vector<uint16_t> h;
    for (const float v : f) h.push_back(f32_to_bf16(v));
    f32.push_back(std::make_unique<GpuBuffer<float>>(gpu, f));
    h16.push_back(std::make_unique<GpuBuffer<uint16_t>>(gpu, h));
    xs.push_back(bf16[i] ? static_cast<const void*>(h16.back()->get())
                         : static_cast<const void*>(f32.back()->get()));
  }
  std::vector<double> got(sizes.size(), -1.0);
  ops.sum_squares_each(got.data(), xs.data(), sizes.data(), bf16,
                       static_cast<int64_t>(sizes.size()));
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double want =
        bf16[i] ? ops.sum_squares_bf16(*h16[i], sizes[i]) : ops.sum_squares(*f32[i], sizes[i]);
    EXPECT_EQ(got[i], want) << "vector " << i;
  }
  EXPECT_EQ(got[1], 0.0);
}

}  // namespace elementwise_cudatest
}  // namespace
}  // namespace snug
