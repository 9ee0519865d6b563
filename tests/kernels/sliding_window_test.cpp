// Sliding-window attention (kernels/attention_dims.h, AttentionDims::window = W): query row t
// sees keys [t - W + 1, t] only. Checked in every attention kernel (naive and flash, fast and
// ref, GQA): each row equals plain causal attention over just its window's rows; fast equals ref,
// with and without packed documents; the backward passes finite differences; a window at least T
// long is the plain causal mask bit for bit; a window needs the causal mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/op_table.h"
#include "support/attention_case.h"
#include "support/compare.h"
#include "support/gradcheck.h"

namespace snug {
namespace {
namespace sliding_window_test {

using test::AttnCase;
using test::AttnResult;
using test::run_attention;
using test::used_columns;
using Vec = std::vector<float>;

// Rows [t0, t1) of batch row b of x (row stride ld, T rows per batch row).
Vec rows_of(const Vec& x, int64_t ld, int64_t T, int64_t b, int64_t t0, int64_t t1) {
  const auto first = x.begin() + (b * T + t0) * ld;
  return Vec(first, first + (t1 - t0) * ld);
}

// T = 70 crosses the naive row blocks (32) and the flash tiles (64).
constexpr int64_t kT = 70;

TEST(SlidingWindow, EachRowIsCausalAttentionOverItsWindow) {
  for (int64_t W : {1, 5, 33}) {
    AttnCase c(2, kT, 4, 2, 8, true, 300 + static_cast<uint64_t>(W));
    c.d.window = W;
    for (bool flash : {false, true}) {
      const AttnResult all = run_attention(fast_op_table(), c, flash);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < kT; ++t) {
          const int64_t s = std::max<int64_t>(0, t - W + 1), n = t - s + 1;
          AttnCase one(1, n, 4, 2, 8, true, 1);
          one.d.ldq = c.d.ldq;
          one.d.ldk = c.d.ldk;
          one.d.ldv = c.d.ldv;
          one.d.ldo = c.d.ldo;
          one.q = rows_of(c.q, c.d.ldq, kT, b, s, t + 1);
          one.k = rows_of(c.k, c.d.ldk, kT, b, s, t + 1);
          one.v = rows_of(c.v, c.d.ldv, kT, b, s, t + 1);
          one.dout.assign(one.q.size(), 0.0f);
          const AttnResult r = run_attention(ref_op_table(), one, false);
          const Vec got = rows_of(all.out, c.d.ldo, kT, b, t, t + 1);
          const Vec want = rows_of(r.out, c.d.ldo, n, 0, n - 1, n);
          ASSERT_TRUE(test::all_close(used_columns(got, 1, c.d.ldo, 32),
                                      used_columns(want, 1, c.d.ldo, 32), 1e-4, 1e-5))
              << (flash ? "flash" : "naive") << " W=" << W << " b=" << b << " t=" << t;
        }
    }
  }
}

TEST(SlidingWindow, FastEqualsRefWithAndWithoutDocuments) {
  // Documents (20, 45, 5) and (64, 6): windows cross document starts and tile edges.
  std::vector<int32_t> pos;
  for (int64_t len : {20, 45, 5, 64, 6})
    for (int64_t i = 0; i < len; ++i) pos.push_back(static_cast<int32_t>(i));
  for (int64_t W : {1, 7, 40, 64})
    for (int64_t NKV : {6, 2})
      for (bool docs : {false, true}) {
        AttnCase c(2, kT, 6, NKV, 8, true, 400 + static_cast<uint64_t>(W + NKV));
        c.d.window = W;
        if (docs) c.d.pos = pos.data();
        for (bool flash : {false, true}) {
          const AttnResult f = run_attention(fast_op_table(), c, flash);
          const AttnResult r = run_attention(ref_op_table(), c, flash);
          const std::string w = std::string(flash ? "flash" : "naive") + " W=" + std::to_string(W) +
                                " NKV=" + std::to_string(NKV) + (docs ? " documents" : "");
          test::expect_same_attention(f, r, w);
        }
      }
}

// Central differences of L = sum(out * R), the forward on the reference naive kernel.
TEST(SlidingWindow, BackwardMatchesFiniteDifferences) {
  for (int64_t NKV : {4, 2}) {
    AttnCase c(2, 7, 4, NKV, 3, true, 500 + static_cast<uint64_t>(NKV));
    c.d.window = 3;
    test::expect_backward_matches_finite_differences(c);
  }
}

TEST(SlidingWindow, AWindowOfTOrMoreIsThePlainCausalMask) {
  AttnCase c(2, kT, 4, 2, 8, true, 600);
  for (bool flash : {false, true})
    for (const OpTable* ops : {&fast_op_table(), &ref_op_table()}) {
      c.d.window = 0;
      const AttnResult plain = run_attention(*ops, c, flash);
      for (int64_t W : {kT, kT + 5}) {
        c.d.window = W;
        const AttnResult w = run_attention(*ops, c, flash);
        EXPECT_EQ(w.out, plain.out);
        EXPECT_EQ(w.dq, plain.dq);
        EXPECT_EQ(w.dk, plain.dk);
        EXPECT_EQ(w.dv, plain.dv);
      }
    }
}

TEST(SlidingWindow, NeedsTheCausalMaskAndANonNegativeSize) {
  AttnCase c(1, 4, 2, 2, 2, false, 700);
  c.d.window = 2;
  for (bool flash : {false, true}) {
    EXPECT_THROW(run_attention(fast_op_table(), c, flash), Error);
    EXPECT_THROW(run_attention(ref_op_table(), c, flash), Error);
  }
  c.d.causal = true;
  c.d.window = -1;
  EXPECT_THROW(run_attention(fast_op_table(), c, false), Error);
}

}  // namespace sliding_window_test
}  // namespace
}  // namespace snug
