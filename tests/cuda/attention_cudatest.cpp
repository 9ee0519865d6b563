// The CUDA materialized attention and the interleaved qkv layout (kernels/cuda/attention.cu)
// against snug::ref on random inputs: the same cases as flash attention, with the (B,NH,T,T)
// probabilities, dropout's mask (bit-exact) and dropped probabilities compared too.
#include <gtest/gtest.h>

#include "attention_cases.h"
#include "attention_checks.h"
#include "kernels/kernels.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace attention_cudatest {

using test::AttentionCase;
using test::columns;
using test::GpuBuffer;
using test::random_floats;
using test::rel_norm_error;

TEST(CudaAttention, ForwardBackwardGqa) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  uint64_t seed = 200;
  for (const AttentionCase& c : test::attention_cases()) {
    SCOPED_TRACE(testing::Message() << c);
    AttentionDims d = test::case_dims(c);
    const int64_t BT = c.B * c.T, NTT = c.B * c.NH * c.T * c.T;
    const auto q = random_floats(BT * d.ldq, ++seed, -2.0f, 2.0f);
    const auto k = random_floats(BT * d.ldk, ++seed, -2.0f, 2.0f);
    const auto v = random_floats(BT * d.ldv, ++seed);
    const auto dout = random_floats(BT * d.ldo, ++seed);
    const std::vector<int32_t> pos = test::packed_positions(c.B, c.T, ++seed);
    std::vector<uint8_t> mask(static_cast<size_t>(NTT));
    std::vector<float> dropped(static_cast<size_t>(NTT));
    GpuBuffer<int32_t> gpos(gpu, pos);
    GpuBuffer<uint8_t> gmask(gpu, NTT);
    GpuBuffer<float> gdropped(gpu, NTT);
    AttentionDims dg = d;
    if (c.packed) {
      d.pos = pos.data();
      dg.pos = gpos;
    }
    if (c.dropout > 0) {
      d.drop_mask = mask.data();
      d.att_dropped = dropped.data();
      dg.drop_mask = gmask;
      dg.att_dropped = gdropped;
    }

    std::vector<float> out(static_cast<size_t>(BT * d.ldo), 0.0f), att(static_cast<size_t>(NTT));
    ref::attention_forward_gqa(out.data(), att.data(), q.data(), k.data(), v.data(), d);
    GpuBuffer<float> gq(gpu, q), gk(gpu, k), gv(gpu, v), gout(gpu, BT * d.ldo), gatt(gpu, NTT);
    ops.attention_forward_gqa(gout, gatt, gq, gk, gv, dg);
    const int64_t wq = c.NH * c.hs;
    EXPECT_LT(rel_norm_error(columns(gout.host(), BT, wq, d.ldo), columns(out, BT, wq, d.ldo)),
              test::kF32Tol);
    EXPECT_LT(rel_norm_error(gatt.host(), att), test::kF32Tol);
    if (c.dropout > 0) {
      EXPECT_EQ(gmask.host(), mask);
      EXPECT_LT(rel_norm_error(gdropped.host(), dropped), test::kF32Tol);
    }

    // Backward from the reference's saved tensors (att is consumed: a fresh copy).
    std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
    GpuBuffer<float> ratt(gpu, att), gdout(gpu, dout), gdq(gpu, BT * d.ldq), gdk(gpu, BT * d.ldk),
        gdv(gpu, BT * d.ldv);
    GpuBuffer<uint8_t> rmask(gpu, mask);
    GpuBuffer<float> rdropped(gpu, dropped);
    if (c.dropout > 0) {
      dg.drop_mask = rmask;
      dg.att_dropped = rdropped;
    }
    ref::attention_backward_gqa(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(),
                                v.data(), att.data(), d);
    ops.attention_backward_gqa(gdq, gdk, gdv, gdout, gq, gk, gv, ratt, dg);
    test::expect_grads_near({gdq.host(), gdk.host(), gdv.host()}, {dq, dk, dv}, d, test::kF32Tol);
  }
}

// The fused [q|k|v] entry points at GPT-2's head shape (B=2, T=256, C=768, NH=12).
TEST(CudaAttention, FusedQkv) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  const int64_t B = 2, T = 256, C = 768, NH = 12;
  const auto qkv = random_floats(B * T * 3 * C, 17, -2.0f, 2.0f);
  const auto dout = random_floats(B * T * C, 18);
  std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(B * T * 3 * C);
  ref::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  GpuBuffer<float> gqkv(gpu, qkv), gdout(gpu, dout), gout(gpu, B * T * C),
      gatt(gpu, B * NH * T * T), gdqkv(gpu, B * T * 3 * C);
  ops.attention_forward(gout, gatt, gqkv, B, T, C, NH);
  EXPECT_LT(rel_norm_error(gout.host(), out), test::kF32Tol);
  EXPECT_LT(rel_norm_error(gatt.host(), att), test::kF32Tol);
  ref::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  ops.attention_backward(gdqkv, gdout, gqkv, gatt, B, T, C, NH);
  EXPECT_LT(rel_norm_error(gdqkv.host(), dqkv), test::kF32Tol);
}

TEST(CudaAttention, QkvInterleavedSplitMerge) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  for (auto [N, NH, hs] : {std::tuple<int64_t, int64_t, int64_t>{13, 3, 37}, {512, 8, 64}}) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " NH=" << NH << " hs=" << hs);
    const int64_t n = N * NH * hs;
    const auto qkv = random_floats(3 * n, 30 + N);
    std::vector<float> q(n), k(n), v(n);
    ref::qkv_interleaved_split(q.data(), k.data(), v.data(), qkv.data(), N, NH, hs);
    GpuBuffer<float> gqkv(gpu, qkv), gq(gpu, n), gk(gpu, n), gv(gpu, n);
    ops.qkv_interleaved_split(gq, gk, gv, gqkv, N, NH, hs);
    EXPECT_EQ(gq.host(), q);
    EXPECT_EQ(gk.host(), k);
    EXPECT_EQ(gv.host(), v);

    const auto dq = random_floats(n, 40 + N), dk = random_floats(n, 50 + N),
               dv = random_floats(n, 60 + N);
    std::vector<float> dqkv(3 * n);
    ref::qkv_interleaved_merge(dqkv.data(), dq.data(), dk.data(), dv.data(), N, NH, hs);
    GpuBuffer<float> gdq(gpu, dq), gdk(gpu, dk), gdv(gpu, dv), gdqkv(gpu, 3 * n);
    ops.qkv_interleaved_merge(gdqkv, gdq, gdk, gdv, N, NH, hs);
    EXPECT_EQ(gdqkv.host(), dqkv);
  }
}

}  // namespace attention_cudatest
}  // namespace
}  // namespace snug
