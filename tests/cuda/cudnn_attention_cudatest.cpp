// cuDNN's attention for --bf16 runs (kernels/cuda/cudnn_attention.h) against snug::ref on random
// bf16-valued inputs: causal and bidirectional, GQA and MQA, T not a multiple of the tiles,
// strided operands and GPT-2's fused [q|k|v] shape. Within the bf16 tolerance (the probabilities
// are rounded to bf16 before their products, as PyTorch's SDPA does under autocast); the lse
// tighter (fp32 softmax statistics); the backward deterministic. Calls cuDNN's path directly, so
// a silent fallback to the fp32 kernels cannot pass for it; skips (naming why) only where the
// build has no cuDNN attention. Also: the cases cuDNN declines (packed documents, a window,
// dropout, an odd head size) give false and write nothing; fp32 runs never take it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attention_cases.h"
#include "attention_checks.h"
#include "core/dtype.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/flash_attention.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace cudnn_attention_cudatest {

using test::AttentionCase;
using test::columns;
using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

constexpr double kBf16Tol = 1e-2;
constexpr double kLseTol = 1e-3;

// x rounded to bf16 (nearest even): what a --bf16 run's q, k, v and dout hold.
std::vector<float> bf16_values(std::vector<float> x) {
  for (float& f : x) f = bf16_to_f32(f32_to_bf16(f));
  return x;
}

#define SNUG_REQUIRE_CUDNN()                                                                  \
  if (!cuda::cudnn_attention_enabled())                                                       \
  GTEST_SKIP() << "this build has no cuDNN attention (SNUG_CUDNN off or headers not found), " \
                  "or SNUG_CUDA_CUDNN=0"

TEST(CudnnAttention, MatchesTheReferenceWithinBf16) {
  SNUG_REQUIRE_GPU(gpu);
  SNUG_REQUIRE_CUDNN();
  const std::vector<AttentionCase> cases = {{2, 37, 4, 4, 64, true},   {2, 37, 4, 4, 64, false},
                                            {1, 200, 4, 2, 64, true},  {2, 67, 4, 1, 32, true},
                                            {1, 130, 2, 1, 128, true}, {1, 150, 2, 2, 48, false},
                                            {1, 512, 12, 12, 64, true}};
  uint64_t seed = 900;
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(testing::Message() << c);
    AttentionDims d = test::case_dims(c);
    d.bf16_operands = true;
    const int64_t BT = c.B * c.T;
    const auto q = bf16_values(random_floats(BT * d.ldq, ++seed, -2.0f, 2.0f));
    const auto k = bf16_values(random_floats(BT * d.ldk, ++seed, -2.0f, 2.0f));
    const auto v = bf16_values(random_floats(BT * d.ldv, ++seed));
    const auto dout = bf16_values(random_floats(BT * d.ldo, ++seed));
    const test::FlashReference r = test::flash_reference(q, k, v, dout, d);
    const int64_t wq = c.NH * c.hs;
    GpuBuffer<float> gq(gpu, q), gk(gpu, k), gv(gpu, v), gdout(gpu, dout);
    GpuBuffer<float> gout(gpu, BT * d.ldo), glse(gpu, c.B * c.NH * c.T);
    ASSERT_TRUE(cuda::cudnn_attention_forward(gout, glse, gq, gk, gv, d));
    EXPECT_LT(rel_norm_error(columns(gout.host(), BT, wq, d.ldo), columns(r.out, BT, wq, d.ldo)),
              kBf16Tol);
    EXPECT_LT(rel_norm_error(glse.host(), r.lse), kLseTol);

    // The backward from cuDNN's own out (rounded to bf16, as the run keeps it) and lse.
    GpuBuffer<float> rout(gpu, bf16_values(gout.host()));
    GpuBuffer<float> gdq(gpu, BT * d.ldq), gdk(gpu, BT * d.ldk), gdv(gpu, BT * d.ldv);
    ASSERT_TRUE(cuda::cudnn_attention_backward(gdq, gdk, gdv, gdout, gq, gk, gv, rout, glse, d));
    const std::vector<float> hdq = gdq.host(), hdk = gdk.host(), hdv = gdv.host();
    test::expect_grads_near({hdq, hdk, hdv}, {r.dq, r.dk, r.dv}, d, kBf16Tol);
    GpuBuffer<float> gdq2(gpu, BT * d.ldq), gdk2(gpu, BT * d.ldk), gdv2(gpu, BT * d.ldv);
    ASSERT_TRUE(cuda::cudnn_attention_backward(gdq2, gdk2, gdv2, gdout, gq, gk, gv, rout, glse, d));
    test::expect_grads_equal({gdq2.host(), gdk2.host(), gdv2.host()}, {hdq, hdk, hdv}, d);
  }
  EXPECT_GT(cuda::cudnn_attention_scratch_high(), 0);
}

TEST(CudnnAttention, DeclinesWhatItDoesNotCover) {
  SNUG_REQUIRE_GPU(gpu);
  const std::vector<AttentionCase> cases = {
      {2, 67, 4, 2, 64, true, true},           // packed documents
      {2, 67, 4, 2, 64, true, false, 9},       // sliding window
      {2, 45, 2, 2, 64, true, false, 0, 0.1},  // dropout
      {1, 70, 6, 2, 37, true},                 // head size not a multiple of 8
      {1, 40, 2, 1, 136, true}};               // head size above 128
  uint64_t seed = 950;
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(testing::Message() << c);
    AttentionDims d = test::case_dims(c);
    d.bf16_operands = true;
    const int64_t BT = c.B * c.T;
    const std::vector<int32_t> pos = test::packed_positions(c.B, c.T, ++seed);
    GpuBuffer<int32_t> dpos(gpu, pos);
    if (c.packed) d.pos = dpos;
    GpuBuffer<float> gq(gpu, random_floats(BT * d.ldq, ++seed)),
        gk(gpu, random_floats(BT * d.ldk, ++seed)), gv(gpu, random_floats(BT * d.ldv, ++seed));
    const std::vector<float> poison(static_cast<size_t>(BT * d.ldo), 7.0f);
    GpuBuffer<float> gout(gpu, poison), glse(gpu, c.B * c.NH * c.T);
    EXPECT_FALSE(cuda::cudnn_attention_forward(gout, glse, gq, gk, gv, d));
    EXPECT_EQ(gout.host(), poison);
  }
  // An fp32 run's call (bf16_operands false) is never cuDNN's.
  AttentionDims d = test::case_dims({2, 37, 4, 4, 64, true});
  const int64_t BT = d.B * d.T;
  GpuBuffer<float> gq(gpu, random_floats(BT * d.ldq, 1)), gk(gpu, random_floats(BT * d.ldk, 2)),
      gv(gpu, random_floats(BT * d.ldv, 3)), gout(gpu, BT * d.ldo), glse(gpu, d.B * d.NH * d.T);
  EXPECT_FALSE(cuda::cudnn_attention_forward(gout, glse, gq, gk, gv, d));
}

}  // namespace cudnn_attention_cudatest
}  // namespace
}  // namespace snug
