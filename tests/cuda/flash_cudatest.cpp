// The CUDA flash attention (kernels/cuda/flash.cu) against snug::ref on random inputs: causal and
// bidirectional, GQA/MQA, packed documents, sliding window, dropout, odd T and head sizes, and
// the fused-qkv entry points at GPT-2's size.
#include <gtest/gtest.h>

#include "attention_cases.h"
#include "core/error.h"
#include "kernels/flash_attention.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {

using test::AttentionCase;
using test::columns;
using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

TEST(CudaFlash, ForwardBackwardGqa) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 100;
  for (const AttentionCase& c : test::attention_cases()) {
    SCOPED_TRACE(testing::Message() << c);
    AttentionDims d = test::case_dims(c);
    const int64_t BT = c.B * c.T;
    const auto q = random_floats(BT * d.ldq, ++seed, -2.0f, 2.0f);
    const auto k = random_floats(BT * d.ldk, ++seed, -2.0f, 2.0f);
    const auto v = random_floats(BT * d.ldv, ++seed);
    const auto dout = random_floats(BT * d.ldo, ++seed);
    const std::vector<int32_t> pos = test::packed_positions(c.B, c.T, ++seed);
    GpuBuffer<int32_t> dpos(gpu, pos);
    AttentionDims dg = d;
    if (c.packed) {
      d.pos = pos.data();
      dg.pos = dpos;
    }

    std::vector<float> out(static_cast<size_t>(BT * d.ldo), 0.0f);
    std::vector<float> lse(static_cast<size_t>(c.B * c.NH * c.T));
    ref::flash_attention_forward_gqa(out.data(), lse.data(), q.data(), k.data(), v.data(), d);
    GpuBuffer<float> gq(gpu, q), gk(gpu, k), gv(gpu, v), gout(gpu, BT * d.ldo),
        glse(gpu, c.B * c.NH * c.T);
    ops.flash_attention_forward_gqa(gout, glse, gq, gk, gv, dg);
    const int64_t wq = c.NH * c.hs, wkv = c.NKV * c.hs;
    EXPECT_LT(rel_norm_error(columns(gout.host(), BT, wq, d.ldo), columns(out, BT, wq, d.ldo)),
              test::kF32Tol);
    EXPECT_LT(rel_norm_error(glse.host(), lse), test::kF32Tol);

    std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
    ref::flash_attention_backward_gqa(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                      k.data(), v.data(), out.data(), lse.data(), d);
    GpuBuffer<float> gdout(gpu, dout), rout(gpu, out), rlse(gpu, lse), gdq(gpu, BT * d.ldq),
        gdk(gpu, BT * d.ldk), gdv(gpu, BT * d.ldv);
    ops.flash_attention_backward_gqa(gdq, gdk, gdv, gdout, gq, gk, gv, rout, rlse, dg);
    EXPECT_LT(rel_norm_error(columns(gdq.host(), BT, wq, d.ldq), columns(dq, BT, wq, d.ldq)),
              test::kF32Tol);
    EXPECT_LT(rel_norm_error(columns(gdk.host(), BT, wkv, d.ldk), columns(dk, BT, wkv, d.ldk)),
              test::kF32Tol);
    EXPECT_LT(rel_norm_error(columns(gdv.host(), BT, wkv, d.ldv), columns(dv, BT, wkv, d.ldv)),
              test::kF32Tol);

    // Deterministic: a second backward gives the same bits.
    GpuBuffer<float> gdq2(gpu, BT * d.ldq), gdk2(gpu, BT * d.ldk), gdv2(gpu, BT * d.ldv);
    ops.flash_attention_backward_gqa(gdq2, gdk2, gdv2, gdout, gq, gk, gv, rout, rlse, dg);
    EXPECT_EQ(columns(gdk2.host(), BT, wkv, d.ldk), columns(gdk.host(), BT, wkv, d.ldk));
  }
}

// The fused [q|k|v] entry points at GPT-2's shape (B=1, T=1024, C=768, NH=12).
TEST(CudaFlash, FusedQkvGpt2Size) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  const int64_t B = 1, T = 1024, C = 768, NH = 12;
  const auto qkv = random_floats(B * T * 3 * C, 7, -2.0f, 2.0f);
  const auto dout = random_floats(B * T * C, 8);
  std::vector<float> out(B * T * C), lse(B * NH * T), dqkv(B * T * 3 * C);
  ref::flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  ref::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                C, NH);
  GpuBuffer<float> gqkv(gpu, qkv), gdout(gpu, dout), gout(gpu, B * T * C), glse(gpu, B * NH * T),
      gdqkv(gpu, B * T * 3 * C);
  ops.flash_attention_forward(gout, glse, gqkv, B, T, C, NH);
  EXPECT_LT(rel_norm_error(gout.host(), out), test::kF32Tol);
  EXPECT_LT(rel_norm_error(glse.host(), lse), test::kF32Tol);
  ops.flash_attention_backward(gdqkv, gdout, gqkv, gout, glse, B, T, C, NH);
  EXPECT_LT(rel_norm_error(gdqkv.host(), dqkv), test::kF32Tol);
}

TEST(CudaFlash, BadDimsThrowBeforeLaunch) {
  SNUG_REQUIRE_GPU(gpu);
  AttentionDims d = test::case_dims({1, 8, 6, 4, 16});  // 6 query heads, 4 kv heads
  GpuBuffer<float> x(gpu, 8 * 200), lse(gpu, 6 * 8);
  EXPECT_THROW(gpu.ops().flash_attention_forward_gqa(x, lse, x, x, x, d), Error);
  EXPECT_THROW(gpu.ops().flash_attention_forward(x, lse, x, 1, 8, 100, 12), Error);
}

}  // namespace
}  // namespace snug
