// The CUDA rotary embedding (kernels/cuda/rope.cu) against snug::ref: full and partial rotary
// dims, an odd head size, strided rows, position ids of packed documents, a given (scaled)
// inv_freq, and long positions where the float angle's rounding matters.
#include <gtest/gtest.h>

#include "attention_cases.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace rope_cudatest {

using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

TEST(CudaRope, ForwardBackward) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  struct Case {
    int64_t B, T, NH, hs, R;
    bool packed, given_freqs;
  };
  uint64_t seed = 300;
  for (const Case& c : {Case{2, 13, 3, 64, 64, false, false}, Case{2, 29, 4, 37, 20, true, false},
                        Case{1, 4099, 2, 128, 128, false, true}, Case{3, 50, 5, 64, 16, true, true},
                        Case{1, 3, 1, 2048, 2048, false, false}}) {
    SCOPED_TRACE(testing::Message()
                 << "B=" << c.B << " T=" << c.T << " NH=" << c.NH << " hs=" << c.hs << " R=" << c.R
                 << " packed=" << c.packed << " freqs=" << c.given_freqs);
    const int64_t ld = c.NH * c.hs + 7;
    const auto x = random_floats(c.B * c.T * ld, ++seed);
    const std::vector<int32_t> pos = test::packed_positions(c.B, c.T, ++seed);
    const auto freqs = random_floats(c.R / 2, ++seed, 0.0f, 0.5f);
    GpuBuffer<int32_t> gpos(gpu, pos);
    const int32_t* hp = c.packed ? pos.data() : nullptr;
    const int32_t* dp = c.packed ? gpos.get() : nullptr;
    // inv_freq is host memory on every device (ops.inc): a config constant.
    const float* hf = c.given_freqs ? freqs.data() : nullptr;
    const float theta = 10000.0f;

    std::vector<float> want = x;
    ref::rope_forward(want.data(), c.B, c.T, c.NH, c.hs, ld, c.R, theta, hp, hf);
    GpuBuffer<float> gx(gpu, x);
    ops.rope_forward(gx, c.B, c.T, c.NH, c.hs, ld, c.R, theta, dp, hf);
    EXPECT_LT(rel_norm_error(gx.host(), want), test::kF32Tol);

    ref::rope_backward(want.data(), c.B, c.T, c.NH, c.hs, ld, c.R, theta, hp, hf);
    ops.rope_backward(gx, c.B, c.T, c.NH, c.hs, ld, c.R, theta, dp, hf);
    EXPECT_LT(rel_norm_error(gx.host(), want), test::kF32Tol);
  }
}

TEST(CudaRope, OddRotaryDimsThrow) {
  SNUG_REQUIRE_GPU(gpu);
  GpuBuffer<float> x(gpu, 64);
  EXPECT_THROW(gpu.ops().rope_forward(x, 1, 1, 1, 64, 64, 7, 10000.0f, nullptr, nullptr), Error);
}

}  // namespace rope_cudatest
}  // namespace
}  // namespace snug
