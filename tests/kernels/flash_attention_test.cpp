// Memory-efficient (tiled, online-softmax) attention against the naive attention kernels, the
// log-sum-exp computed here, and finite differences.
#include "kernels/flash_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace snug {
namespace {
namespace flash_attention_test {

using test::all_close;
using test::max_abs;
using test::random_floats;
using Vec = std::vector<float>;

struct Shape {
  int64_t B, T, C, NH;
};

std::string name_of(const Shape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
         " NH=" + std::to_string(s.NH) + " hs=" + std::to_string(s.C / s.NH);
}

// hs from 4 to 16; T = 1, 7, 33, 100 and ones that cross several 64-wide tiles unevenly.
const std::vector<Shape> kShapes = {
    {2, 1, 12, 3},  {2, 7, 12, 3},  {1, 33, 24, 3}, {2, 100, 48, 3},
    {1, 64, 16, 2}, {1, 65, 32, 2}, {1, 150, 8, 1}, {2, 129, 36, 3},
};

Vec make_qkv(const Shape& s, uint64_t seed) {
  // Wide enough that the softmax rows are far from uniform.
  return random_floats(s.B * s.T * 3 * s.C, seed, -2.0f, 2.0f);
}

// log(sum_{t2 <= t} exp(q_t . k_t2 / sqrt(hs))) in double, for every (b, h, t).
std::vector<double> lse_of(const Vec& qkv, const Shape& s) {
  const int64_t hs = s.C / s.NH, C3 = 3 * s.C;
  std::vector<double> lse(static_cast<size_t>(s.B * s.NH * s.T));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        std::vector<double> sc;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i)
            dot += static_cast<double>(qkv[(b * s.T + t) * C3 + h * hs + i]) *
                   qkv[(b * s.T + t2) * C3 + s.C + h * hs + i];
          sc.push_back(dot / std::sqrt(static_cast<double>(hs)));
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double sum = 0.0;
        for (double x : sc) sum += std::exp(x - mx);
        lse[(b * s.NH + h) * s.T + t] = mx + std::log(sum);
      }
  return lse;
}

enum class Impl { kRef, kFast };
const char* impl_name(Impl impl) {
  return impl == Impl::kRef ? "ref" : "fast";
}

void flash_forward(Impl impl, Vec& out, Vec& lse, const Vec& qkv, const Shape& s) {
  if (impl == Impl::kRef)
    ref::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  else
    kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
}

void flash_backward(Impl impl, Vec& dqkv, const Vec& dout, const Vec& qkv, const Vec& out,
                    const Vec& lse, const Shape& s) {
  if (impl == Impl::kRef)
    ref::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B,
                                  s.T, s.C, s.NH);
  else
    kernels::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                      s.B, s.T, s.C, s.NH);
}

TEST(FlashAttention, ForwardMatchesNaiveAttention) {
  uint64_t seed = 300;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(name_of(s));
    const Vec qkv = make_qkv(s, seed += 10);
    Vec want(s.B * s.T * s.C), att(s.B * s.NH * s.T * s.T);
    kernels::attention_forward(want.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    const double atol = 1e-5 * std::max(1.0, max_abs(want));
    for (Impl impl : {Impl::kRef, Impl::kFast}) {
      SCOPED_TRACE(impl_name(impl));
      Vec out(want.size(), NAN), lse(s.B * s.NH * s.T, NAN);
      flash_forward(impl, out, lse, qkv, s);
      EXPECT_TRUE(all_close(out, want, 1e-5, atol));
    }
  }
}

TEST(FlashAttention, LseIsLogSumExpOfScaledScores) {
  uint64_t seed = 400;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(name_of(s));
    const Vec qkv = make_qkv(s, seed += 10);
    const std::vector<double> want = lse_of(qkv, s);
    for (Impl impl : {Impl::kRef, Impl::kFast}) {
      SCOPED_TRACE(impl_name(impl));
      Vec out(s.B * s.T * s.C), lse(want.size(), NAN);
      flash_forward(impl, out, lse, qkv, s);
      EXPECT_TRUE(all_close(lse, want, 1e-5, 1e-5));
    }
  }
}

TEST(FlashAttention, BackwardMatchesNaiveAttention) {
  uint64_t seed = 500;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(name_of(s));
    const Vec qkv = make_qkv(s, seed += 10);
    const Vec dout = random_floats(s.B * s.T * s.C, seed + 1);
    Vec out(s.B * s.T * s.C), att(s.B * s.NH * s.T * s.T), want(qkv.size(), NAN);
    kernels::attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    kernels::attention_backward(want.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C,
                                s.NH);
    const double atol = 1e-4 * std::max(1.0, max_abs(want));
    for (Impl impl : {Impl::kRef, Impl::kFast}) {
      SCOPED_TRACE(impl_name(impl));
      Vec fout(out.size()), lse(s.B * s.NH * s.T), dqkv(qkv.size(), NAN);
      flash_forward(impl, fout, lse, qkv, s);
      flash_backward(impl, dqkv, dout, qkv, fout, lse, s);
      EXPECT_TRUE(all_close(dqkv, want, 1e-4, atol));
    }
  }
}

// The fast kernels against the reference with each other's saved tensors: the backward only
// depends on (qkv, out, lse), not on which forward produced them.
TEST(FlashAttention, FastMatchesRefOnSameSavedTensors) {
  const Shape s{2, 100, 48, 3};
  const Vec qkv = make_qkv(s, 600);
  const Vec dout = random_floats(s.B * s.T * s.C, 601);
  Vec out(s.B * s.T * s.C), lse(s.B * s.NH * s.T);
  ref::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  Vec want(qkv.size()), got(qkv.size(), NAN);
  ref::flash_attention_backward(want.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B,
                                s.T, s.C, s.NH);
  kernels::flash_attention_backward(got.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                    s.B, s.T, s.C, s.NH);
  EXPECT_TRUE(all_close(got, want, 1e-4, 1e-4 * std::max(1.0, max_abs(want))));
}

// dqkv is overwritten, whatever it held; the inputs are left intact; a second call repeats the
// first exactly (no state carried in the thread-local scratch).
TEST(FlashAttention, OverwritesAndIsRepeatable) {
  const Shape s{2, 70, 24, 2};
  const Vec qkv = make_qkv(s, 700);
  const Vec dout = random_floats(s.B * s.T * s.C, 701);
  Vec out(s.B * s.T * s.C, NAN), lse(s.B * s.NH * s.T, NAN);
  kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  const Vec out1 = out, lse1 = lse;
  Vec dqkv(qkv.size(), NAN);
  kernels::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                    s.B, s.T, s.C, s.NH);
  const Vec dqkv1 = dqkv;
  for (float x : dqkv1) ASSERT_TRUE(std::isfinite(x));
  std::fill(out.begin(), out.end(), 7.0f);
  kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  std::fill(dqkv.begin(), dqkv.end(), 7.0f);
  kernels::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                    s.B, s.T, s.C, s.NH);
  EXPECT_EQ(out, out1);
  EXPECT_EQ(lse, lse1);
  EXPECT_EQ(dqkv, dqkv1);
  EXPECT_EQ(qkv, make_qkv(s, 700));
}

// Finite-difference check in the style of gradcheck_test.cpp: L = sum(out * R), central
// differences of the reference forward in double, eps = 1e-3.
TEST(FlashAttention, GradCheck) {
  // T = 70 crosses a tile boundary of the fast kernels (64), so tiles off the diagonal, the
  // online rescaling and the dK/dV accumulation over several query tiles are all exercised.
  for (const Shape& s : {Shape{2, 5, 6, 2}, Shape{1, 70, 8, 2}}) {
    SCOPED_TRACE(name_of(s));
    Vec qkv = make_qkv(s, 800 + static_cast<uint64_t>(s.T));
    const Vec R = random_floats(s.B * s.T * s.C, 900 + static_cast<uint64_t>(s.T));
    Vec out(s.B * s.T * s.C), lse(s.B * s.NH * s.T);
    auto loss = [&] {
      ref::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
      double l = 0.0;
      for (size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * R[i];
      return l;
    };
    const auto n_qkv = test::numerical_grad(qkv, loss);
    for (Impl impl : {Impl::kRef, Impl::kFast}) {
      Vec dqkv(qkv.size(), NAN);
      flash_forward(impl, out, lse, qkv, s);
      flash_backward(impl, dqkv, R, qkv, out, lse, s);
      test::expect_grad_close(dqkv, n_qkv, std::string(impl_name(impl)) + " dqkv");
    }
  }
}

TEST(FlashAttention, RejectsHeadsThatDoNotDivideC) {
  Vec qkv(3 * 10), out(10), lse(3), dqkv(30);
  EXPECT_ANY_THROW(
      kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), 1, 1, 10, 3));
  EXPECT_ANY_THROW(ref::flash_attention_forward(out.data(), lse.data(), qkv.data(), 1, 1, 10, 3));
  EXPECT_ANY_THROW(kernels::flash_attention_backward(dqkv.data(), out.data(), qkv.data(),
                                                     out.data(), lse.data(), 1, 1, 10, 3));
}

}  // namespace flash_attention_test
}  // namespace
}  // namespace snug
