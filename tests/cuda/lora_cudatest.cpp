// The CUDA kernels of kernels/cuda/lora.cu against snug::ref: the LoRA bypass GEMMs within fp32
// tolerance, the dropout mask and NEFTune's noise bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <tuple>

#include "kernels/kernels.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace lora_cudatest {

using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

TEST(CudaLora, ForwardBackward) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 500;
  for (auto [N, IC, OC, r] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 1},
                              {7, 13, 11, 3},
                              {37, 64, 96, 8},
                              {2048, 768, 768, 16}}) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " IC=" << IC << " OC=" << OC << " r=" << r);
    const float s = 2.0f;
    const auto h = random_floats(N * IC, ++seed), A = random_floats(r * IC, ++seed);
    const auto B = random_floats(OC * r, ++seed), dout = random_floats(N * OC, ++seed);
    const auto out0 = random_floats(N * OC, ++seed);  // out accumulates
    std::vector<float> out = out0, u(N * r);
    ref::lora_forward(out.data(), u.data(), h.data(), A.data(), B.data(), N, IC, OC, r, s);
    GpuBuffer<float> hd(gpu, h), Ad(gpu, A), Bd(gpu, B), ddout(gpu, dout);
    GpuBuffer<float> gout(gpu, out0), gu(gpu, N * r);
    ops.lora_forward(gout, gu, hd, Ad, Bd, N, IC, OC, r, s);
    EXPECT_LT(rel_norm_error(gout.host(), out), test::kF32Tol);
    EXPECT_LT(rel_norm_error(gu.host(), u), test::kF32Tol);

    const auto dA0 = random_floats(r * IC, ++seed), dB0 = random_floats(OC * r, ++seed);
    const auto dh0 = random_floats(N * IC, ++seed);
    GpuBuffer<float> uu(gpu, u);  // the reference's u, so both backwards see the same input
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(testing::Message() << "accumulate_dh=" << accumulate);
      std::vector<float> dA = dA0, dB = dB0, du(N * r), dh = dh0;
      ref::lora_backward(dh.data(), dA.data(), dB.data(), du.data(), dout.data(), h.data(),
                         u.data(), A.data(), B.data(), N, IC, OC, r, s, accumulate);
      GpuBuffer<float> gdA(gpu, dA0), gdB(gpu, dB0), gdu(gpu, N * r);
      auto gdh = accumulate ? std::make_unique<GpuBuffer<float>>(gpu, dh0)
                            : std::make_unique<GpuBuffer<float>>(gpu, N * IC);
      ops.lora_backward(*gdh, gdA, gdB, gdu, ddout, hd, uu, Ad, Bd, N, IC, OC, r, s, accumulate);
      EXPECT_LT(rel_norm_error(gdh->host(), dh), test::kF32Tol);
      EXPECT_LT(rel_norm_error(gdA.host(), dA), test::kF32Tol);
      EXPECT_LT(rel_norm_error(gdB.host(), dB), test::kF32Tol);
      EXPECT_LT(rel_norm_error(gdu.host(), du), test::kF32Tol);
    }
    // Frozen A and B: null dA, dB; dh and du as before.
    std::vector<float> du(N * r), dh(N * IC);
    ref::lora_backward(dh.data(), nullptr, nullptr, du.data(), dout.data(), h.data(), u.data(),
                       A.data(), B.data(), N, IC, OC, r, s, false);
    GpuBuffer<float> gdu(gpu, N * r), gdh(gpu, N * IC);
    ops.lora_backward(gdh, nullptr, nullptr, gdu, ddout, hd, uu, Ad, Bd, N, IC, OC, r, s, false);
    EXPECT_LT(rel_norm_error(gdh.host(), dh), test::kF32Tol);
    EXPECT_LT(rel_norm_error(gdu.host(), du), test::kF32Tol);
  }
}

TEST(CudaLora, DropoutMaskBitExact) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : {1, 7, 100003}) {
    const auto src = random_floats(n, 600 + n), dst0 = random_floats(n, 700 + n);
    GpuBuffer<float> dsrc(gpu, src);
    for (double p : {0.0, 0.1, 0.5})
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " p=" << p << " acc=" << accumulate);
        const uint64_t key = 0x5eed0000ull + static_cast<uint64_t>(n);
        std::vector<float> want = dst0;
        ref::lora_dropout(key, p, src.data(), want.data(), n, accumulate);
        GpuBuffer<float> got(gpu, dst0);
        gpu.ops().lora_dropout(key, p, dsrc, got, n, accumulate);
        EXPECT_EQ(bits(got.host()), bits(want));
      }
  }
}

TEST(CudaLora, NeftuneNoiseIsTheCpuDraws) {
  SNUG_REQUIRE_GPU(gpu);
  for (int64_t n : {1, 7, 100003, 2048 * 768}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const auto x = random_floats(n, 800 + n);
    const uint64_t seed = 1234567 + static_cast<uint64_t>(n);
    const double m = 5.0 / 1000.0;
    std::vector<float> want = x, fast = x;
    ref::add_uniform_noise(want.data(), n, seed, m);
    kernels::add_uniform_noise(fast.data(), n, seed, m);
    GpuBuffer<float> got(gpu, x);
    gpu.ops().add_uniform_noise(got, n, seed, m);
    EXPECT_EQ(bits(got.host()), bits(want));
    EXPECT_EQ(bits(got.host()), bits(fast));
  }
}

}  // namespace lora_cudatest
}  // namespace
}  // namespace snug
