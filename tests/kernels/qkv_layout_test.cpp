// GPT-NeoX's per-head interleaved fused projection (kernels/ops.inc, qkv_interleaved_split and
// qkv_interleaved_merge): fast against reference, a hand-laid-out example, and merge inverting
// split.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/kernels.h"
#include "support/random.h"

namespace snug {
namespace {
namespace qkv_layout_test {

using Vec = std::vector<float>;

// N = 1, NH = 2, hs = 2: the row is [q0 q0' k0 k0' v0 v0' | q1 q1' k1 k1' v1 v1'].
TEST(QkvLayout, SplitsHeadsAsGptNeoXViewsThem) {
  const Vec qkv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  for (auto split : {&kernels::qkv_interleaved_split, &ref::qkv_interleaved_split}) {
    Vec q(4), k(4), v(4);
    split(q.data(), k.data(), v.data(), qkv.data(), 1, 2, 2);
    EXPECT_EQ(q, Vec({1, 2, 7, 8}));
    EXPECT_EQ(k, Vec({3, 4, 9, 10}));
    EXPECT_EQ(v, Vec({5, 6, 11, 12}));
  }
}

TEST(QkvLayout, FastEqualsRefAndMergeInvertsSplit) {
  const int64_t N = 37, NH = 3, hs = 5, w = NH * hs;
  const Vec qkv = test::random_floats(N * 3 * w, 11);
  Vec qf(N * w), kf(N * w), vf(N * w), qr(N * w), kr(N * w), vr(N * w);
  kernels::qkv_interleaved_split(qf.data(), kf.data(), vf.data(), qkv.data(), N, NH, hs);
  ref::qkv_interleaved_split(qr.data(), kr.data(), vr.data(), qkv.data(), N, NH, hs);
  EXPECT_EQ(qf, qr);
  EXPECT_EQ(kf, kr);
  EXPECT_EQ(vf, vr);
  // Row 5, head 2, element 3 of k sits at ((5*NH + 2)*3 + 1)*hs + 3 in the fused row layout.
  EXPECT_EQ(kf[5 * w + 2 * hs + 3], qkv[((5 * NH + 2) * 3 + 1) * hs + 3]);
  Vec mf(qkv.size(), -1.0f), mr(qkv.size(), -2.0f);
  kernels::qkv_interleaved_merge(mf.data(), qf.data(), kf.data(), vf.data(), N, NH, hs);
  ref::qkv_interleaved_merge(mr.data(), qr.data(), kr.data(), vr.data(), N, NH, hs);
  EXPECT_EQ(mf, qkv);
  EXPECT_EQ(mr, qkv);
}

}  // namespace qkv_layout_test
}  // namespace
}  // namespace snug
