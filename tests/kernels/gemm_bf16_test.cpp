// The bf16 GEMM path (kernels/gemm_path.h): the plain reference against exact products, the
// oneDNN kernel against the reference (where oneDNN has a bf16 matmul: AVX-512 CPUs; elsewhere
// those tests skip and say why), and the --gemm-path dispatch on made-up CPUs (everywhere).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/gemm_path.h"
#include "kernels/kernels.h"
#include "kernels/lm_head.h"
#include "support/compare.h"
#include "support/gemm_paths.h"
#include "support/random.h"

namespace snug {
namespace {
namespace gemm_bf16_test {

using test::all_close;
using test::random_floats;
using test::random_ints;
using Vec = std::vector<float>;
using Bits = std::vector<uint16_t>;

Bits to_bits(const Vec& v) {
  Bits b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
  return b;
}
Vec widen(const Bits& b) {
  Vec v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = bf16_to_f32(b[i]);
  return v;
}

struct Gemm {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
};

// Operands of g with padded leading dimensions, as bf16 bits, and C's initial values.
struct Operands {
  int64_t lda, ldb, ldc;
  Bits A, B;
  Vec C;
};
Operands make(const Gemm& g, uint64_t seed) {
  Operands o;
  o.lda = (g.ta ? g.M : g.K) + 3;
  o.ldb = (g.tb ? g.K : g.N) + 2;
  o.ldc = g.N + 5;
  o.A = to_bits(random_floats((g.ta ? g.K : g.M) * o.lda, seed, -2.0f, 2.0f));
  o.B = to_bits(random_floats((g.tb ? g.N : g.K) * o.ldb, seed + 1, -2.0f, 2.0f));
  o.C = random_floats(g.M * o.ldc, seed + 2);
  if (g.beta == 0.0f)  // C is write-only: NaN there must not reach the result
    for (float& x : o.C) x = std::numeric_limits<float>::quiet_NaN();
  return o;
}

// |fp32 sum in any order - exact sum| <= K * 2^-24 * sum_k |a_k b_k| (each of the K - 1
// additions rounds by at most half an ulp of a partial sum bounded by sum |a_k b_k|), scaled by
// |alpha|, plus C's own rounding.
Vec error_bound(const Gemm& g, const Operands& o) {
  Vec bound(static_cast<size_t>(g.M * g.N));
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < g.K; ++k) {
        const double a = bf16_to_f32(g.ta ? o.A[k * o.lda + i] : o.A[i * o.lda + k]);
        const double b = bf16_to_f32(g.tb ? o.B[j * o.ldb + k] : o.B[k * o.ldb + j]);
        s += std::abs(a * b);
      }
      const double c = g.beta == 0.0f ? 0.0 : std::abs(g.beta * o.C[i * o.ldc + j]);
      bound[i * g.N + j] = static_cast<float>((static_cast<double>(g.K) + 2.0) *
                                              std::ldexp(1.0, -24) * (std::abs(g.alpha) * s + c));
    }
  return bound;
}

const std::vector<Gemm>& cases() {
  static const std::vector<Gemm> c = [] {
    std::vector<Gemm> v;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        v.push_back({ta, tb, 13, 11, 9, 1.0f, 0.0f});
        v.push_back({ta, tb, 13, 11, 9, 0.7f, 0.3f});
        v.push_back({ta, tb, 67, 45, 131, -1.25f, 1.0f});
        v.push_back({ta, tb, 1, 37, 5, 1.0f, 0.0f});
        v.push_back({ta, tb, 70, 64, 300, 1.0f, 1.0f});
      }
    return v;
  }();
  return c;
}

std::string label(const Gemm& g) {
  return "transA=" + std::to_string(g.ta) + " transB=" + std::to_string(g.tb) +
         " M=" + std::to_string(g.M) + " N=" + std::to_string(g.N) + " K=" + std::to_string(g.K) +
         " alpha=" + std::to_string(g.alpha) + " beta=" + std::to_string(g.beta);
}

// Max over the entries of |got - want| / bound (<= 1 passes); the padding of C is untouched.
void expect_within_bound(const Gemm& g, const Operands& o, const Vec& got, const Vec& want) {
  const Vec bound = error_bound(g, o);
  for (int64_t i = 0; i < g.M; ++i) {
    for (int64_t j = 0; j < g.N; ++j) {
      const float d = std::abs(got[i * o.ldc + j] - want[i * o.ldc + j]);
      ASSERT_LE(d, bound[i * g.N + j]) << "C[" << i << "," << j << "] got " << got[i * o.ldc + j]
                                       << " want " << want[i * o.ldc + j];
    }
    if (g.beta != 0.0f) {
      for (int64_t j = g.N; j < o.ldc; ++j)
        ASSERT_EQ(got[i * o.ldc + j], o.C[i * o.ldc + j]) << "padding";
    }
  }
}

TEST(GemmBf16, ReferenceIsTheExactProductUpToFp32SumOrder) {
  // ref::gemm_bf16 (fp32 sums) against ref::gemm_f32 on the widened values (double sums):
  // bf16 products are exact in fp32, so only the order and precision of the sums differ.
  uint64_t seed = 1;
  for (const Gemm& g : cases()) {
    SCOPED_TRACE(label(g));
    const Operands o = make(g, seed += 10);
    Vec got = o.C, want = o.C;
    ref::gemm_bf16(g.ta, g.tb, g.M, g.N, g.K, g.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, g.beta,
                   got.data(), o.ldc);
    const Vec A = widen(o.A), B = widen(o.B);
    ref::gemm_f32(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A.data(), o.lda, B.data(), o.ldb, g.beta,
                  want.data(), o.ldc);
    expect_within_bound(g, o, got, want);
  }
}

TEST(GemmBf16, OneDnnMatchesTheReferenceWithinTheSumOrderBound) {
  SKIP_WITHOUT_BF16_MATMUL();
  uint64_t seed = 7;
  for (const Gemm& g : cases()) {
    SCOPED_TRACE(label(g));
    const Operands o = make(g, seed += 10);
    Vec got = o.C;
    kernels::gemm_bf16(g.ta, g.tb, g.M, g.N, g.K, g.alpha, o.A.data(), o.lda, o.B.data(), o.ldb,
                       g.beta, got.data(), o.ldc);
    // Within the sum-order bound of the exact product, as the reference is (test above).
    Vec exact = o.C;
    const Vec A = widen(o.A), B = widen(o.B);
    ref::gemm_f32(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A.data(), o.lda, B.data(), o.ldb, g.beta,
                  exact.data(), o.ldc);
    expect_within_bound(g, o, got, exact);
    // A second call reuses the cached primitive and gives the same bits.
    Vec again = o.C;
    kernels::gemm_bf16(g.ta, g.tb, g.M, g.N, g.K, g.alpha, o.A.data(), o.lda, o.B.data(), o.ldb,
                       g.beta, again.data(), o.ldc);
    ASSERT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)), 0);
  }
}

TEST(GemmBf16, EmptyAndZeroDepthProducts) {
  // K = 0: C = beta C, no library call (runs on every CPU).
  Vec c = {1, 2, 3, 4, 5, 6};
  const Bits dummy(1);
  kernels::gemm_bf16(false, false, 2, 3, 0, 1.0f, dummy.data(), 1, dummy.data(), 3, 0.5f, c.data(),
                     3);
  EXPECT_EQ(c, (Vec{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  kernels::gemm_bf16(false, false, 2, 3, 0, 1.0f, dummy.data(), 1, dummy.data(), 3, 0.0f, c.data(),
                     3);
  EXPECT_EQ(c, Vec(6, 0.0f));
  kernels::gemm_bf16(false, false, 0, 3, 4, 1.0f, dummy.data(), 4, dummy.data(), 3, 0.0f, c.data(),
                     3);  // M = 0: nothing
  EXPECT_THROW(kernels::gemm_bf16(false, false, 4, 4, 4, 1.0f, dummy.data(), 2, dummy.data(), 4,
                                  0.0f, c.data(), 4),
               Error);  // lda < K
}

TEST(GemmBf16, LinearMatchesTheReference) {
  SKIP_WITHOUT_BF16_MATMUL();
  const int64_t N = 37, IC = 70, OC = 53;
  const Bits inp = to_bits(random_floats(N * IC, 3)), w = to_bits(random_floats(IC * OC, 4)),
             dout = to_bits(random_floats(N * OC, 5));
  const Vec b = random_floats(OC, 6);
  Vec out_f(N * OC), out_r(N * OC);
  kernels::linear_forward_bf16(out_f.data(), inp.data(), w.data(), b.data(), N, IC, OC);
  ref::linear_forward_bf16(out_r.data(), inp.data(), w.data(), b.data(), N, IC, OC);
  EXPECT_TRUE(all_close(out_f, out_r, 1e-5, 1e-5));
  Vec dinp_f(N * IC), dinp_r(N * IC), dw_f = random_floats(IC * OC, 7), dw_r = dw_f,
                                      db_f = random_floats(OC, 8), db_r = db_f;
  kernels::linear_backward_bf16(dinp_f.data(), dw_f.data(), db_f.data(), dout.data(), inp.data(),
                                w.data(), N, IC, OC);
  ref::linear_backward_bf16(dinp_r.data(), dw_r.data(), db_r.data(), dout.data(), inp.data(),
                            w.data(), N, IC, OC);
  EXPECT_TRUE(all_close(dinp_f, dinp_r, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(dw_f, dw_r, 1e-5, 1e-5));  // accumulated onto the initial values
  EXPECT_TRUE(all_close(db_f, db_r, 1e-5, 1e-5));
}

// nn.Linear layout (w(OC,IC)): fast against reference, the input gradient overwritten and
// accumulated, a frozen weight (no inp, no dw); and the reference against the fp32 nn.Linear on
// the widened values (bit for bit: it widens and calls it).
TEST(GemmBf16, LinearNtMatchesTheReference) {
  SKIP_WITHOUT_BF16_MATMUL();
  const int64_t N = 37, IC = 70, OC = 53;
  const Bits inp = to_bits(random_floats(N * IC, 13)), w = to_bits(random_floats(OC * IC, 14)),
             dout = to_bits(random_floats(N * OC, 15));
  const Vec b = random_floats(OC, 16);
  Vec out_f(N * OC), out_r(N * OC), out_w(N * OC);
  kernels::linear_nt_forward_bf16(out_f.data(), inp.data(), w.data(), b.data(), N, IC, OC);
  ref::linear_nt_forward_bf16(out_r.data(), inp.data(), w.data(), b.data(), N, IC, OC);
  EXPECT_TRUE(all_close(out_f, out_r, 1e-5, 1e-5));
  ref::linear_nt_forward(out_w.data(), widen(inp).data(), widen(w).data(), b.data(), N, IC, OC);
  EXPECT_EQ(out_r, out_w);
  for (const bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate dinp" : "overwrite dinp");
    Vec dinp_f = random_floats(N * IC, 17), dinp_r = dinp_f, dw_f = random_floats(OC * IC, 18),
        dw_r = dw_f, db_f = random_floats(OC, 19), db_r = db_f;
    kernels::linear_nt_backward_bf16(dinp_f.data(), dw_f.data(), db_f.data(), dout.data(),
                                     inp.data(), w.data(), N, IC, OC, accumulate);
    ref::linear_nt_backward_bf16(dinp_r.data(), dw_r.data(), db_r.data(), dout.data(), inp.data(),
                                 w.data(), N, IC, OC, accumulate);
    EXPECT_TRUE(all_close(dinp_f, dinp_r, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(dw_f, dw_r, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(db_f, db_r, 1e-5, 1e-5));
  }
  // A frozen weight: no inp, no dw, no db; the input gradient only.
  Vec dinp_f(N * IC), dinp_r(N * IC);
  kernels::linear_nt_backward_bf16(dinp_f.data(), nullptr, nullptr, dout.data(), nullptr, w.data(),
                                   N, IC, OC, false);
  ref::linear_nt_backward_bf16(dinp_r.data(), nullptr, nullptr, dout.data(), nullptr, w.data(), N,
                               IC, OC, false);
  EXPECT_TRUE(all_close(dinp_f, dinp_r, 1e-5, 1e-5));
}

// The bf16 LM head: fast against reference (loss, dlnf, dwte), and the reference against the
// fp32 head on the widened values (the same logits; the backward differs only by rounding the
// dlogits to bf16, an error of at most 2^-9 relative per dlogit).
TEST(GemmBf16, LmHeadMatchesTheReferenceAndTheFp32Head) {
  const int64_t N = 23, C = 17, V = 301, chunk = 6;
  const Bits lnf = to_bits(random_floats(N * C, 11, -2.0f, 2.0f)),
             wte = to_bits(random_floats(V * C, 12, -2.0f, 2.0f));
  std::vector<int32_t> targets = random_ints(N, 13, 0, static_cast<int32_t>(V - 1));
  targets[4] = -100;
  const float scale = 1.0f / static_cast<float>(N - 1);
  auto run = [&](bool fast, bool bf16, Vec& losses, Vec& dlnf, Vec& dwte) {
    Vec scratch(static_cast<size_t>(kernels::lm_head_scratch_floats(N, V, chunk)), NAN);
    losses.assign(N, 0.0f);
    dlnf.assign(N * C, 0.0f);
    dwte.assign(V * C, 0.0f);
    const Vec lf = widen(lnf), wf = widen(wte);
    if (bf16)
      return fast ? kernels::lm_head_xent_bf16(losses.data(), dlnf.data(), dwte.data(), lnf.data(),
                                               wte.data(), targets.data(), N, C, V, scale,
                                               scratch.data(), chunk)
                  : ref::lm_head_xent_bf16(losses.data(), dlnf.data(), dwte.data(), lnf.data(),
                                           wte.data(), targets.data(), N, C, V, scale,
                                           scratch.data(), chunk);
    return ref::lm_head_xent(losses.data(), dlnf.data(), dwte.data(), lf.data(), wf.data(),
                             targets.data(), N, C, V, scale, scratch.data(), chunk);
  };
  Vec l_r, dl_r, dw_r, l_32, dl_32, dw_32;
  const double t_r = run(false, true, l_r, dl_r, dw_r);
  const double t_32 = run(false, false, l_32, dl_32, dw_32);
  EXPECT_NEAR(t_r, t_32, 1e-9 * std::abs(t_32));  // same logits, same loss
  EXPECT_TRUE(all_close(l_r, l_32, 1e-9, 1e-9));
  EXPECT_TRUE(all_close(dl_r, dl_32, 1e-2, 1e-2 * test::max_abs(dl_32)));
  EXPECT_TRUE(all_close(dw_r, dw_32, 1e-2, 1e-2 * test::max_abs(dw_32)));
  EXPECT_FALSE(all_close(dw_r, dw_32, 0.0, 0.0)) << "the dlogits must be rounded to bf16";
  if (!kernels::bf16_matmul_support().available)
    GTEST_SKIP() << "fast kernel not checked: " << kernels::bf16_matmul_support().reason;
  Vec l_f, dl_f, dw_f;
  const double t_f = run(true, true, l_f, dl_f, dw_f);
  EXPECT_NEAR(t_f, t_r, 1e-5 * std::abs(t_r));
  EXPECT_TRUE(all_close(l_f, l_r, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(dl_f, dl_r, 1e-4, 1e-5 * test::max_abs(dl_r)));
  EXPECT_TRUE(all_close(dw_f, dw_r, 1e-4, 1e-5 * test::max_abs(dw_r)));
  // Forward only: same loss (also through the vocabulary-sliced path, chunk < N).
  Vec scratch(static_cast<size_t>(kernels::lm_head_scratch_floats(N, V, chunk)), NAN);
  const double fwd =
      kernels::lm_head_xent_bf16(nullptr, nullptr, nullptr, lnf.data(), wte.data(), targets.data(),
                                 N, C, V, scale, scratch.data(), chunk);
  EXPECT_NEAR(fwd, t_r, 1e-5 * std::abs(t_r));
}

TEST(GemmPath, AutoFollowsTheHardwareAndForcingIsChecked) {
  using kernels::choose_gemm_path;
  using kernels::GemmPath;
  kernels::Bf16MatmulSupport amx{true, true, "brg:avx512_core_amx_bf16", ""};
  kernels::Bf16MatmulSupport emulated{true, false, "gemm:jit", "oneDNN emulates bf16"};
  kernels::Bf16MatmulSupport none{false, false, "", "oneDNN has no bf16 matmul on this CPU"};
  EXPECT_EQ(choose_gemm_path("auto", amx), GemmPath::onednn_bf16);
  EXPECT_EQ(choose_gemm_path("auto", emulated), GemmPath::widen);
  EXPECT_EQ(choose_gemm_path("auto", none), GemmPath::widen);
  EXPECT_EQ(choose_gemm_path("widen", amx), GemmPath::widen);
  EXPECT_EQ(choose_gemm_path("onednn-bf16", amx), GemmPath::onednn_bf16);
  EXPECT_EQ(choose_gemm_path("onednn_bf16", emulated), GemmPath::onednn_bf16);
  try {
    choose_gemm_path("onednn-bf16", none);
    FAIL() << "forcing onednn-bf16 without a bf16 matmul must throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--gemm-path onednn-bf16"), std::string::npos) << m;
    EXPECT_NE(m.find("no bf16 matmul"), std::string::npos) << m;
  }
  try {
    choose_gemm_path("amx", amx);
    FAIL() << "an unknown path must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: auto, widen, onednn-bf16"), std::string::npos);
  }
  EXPECT_STREQ(kernels::gemm_path_name(GemmPath::onednn_bf16), "onednn-bf16");
  EXPECT_STREQ(kernels::gemm_path_name(GemmPath::widen), "widen");
}

// A GPU run's bf16 products take the device's own bf16 GEMMs (cuBLASLt) whatever this CPU has;
// only widen widens there. On the CPU (and meta) the device changes nothing.
TEST(GemmPath, AGpuRunTakesItsOwnBf16Gemms) {
  using kernels::GemmPath;
  using kernels::resolve_gemm_path;
  EXPECT_EQ(resolve_gemm_path("auto", "cuda"), GemmPath::onednn_bf16);
  EXPECT_EQ(resolve_gemm_path("auto", "cuda:1"), GemmPath::onednn_bf16);
  EXPECT_EQ(resolve_gemm_path("onednn-bf16", "cuda"), GemmPath::onednn_bf16);
  EXPECT_EQ(resolve_gemm_path("widen", "cuda"), GemmPath::widen);
  EXPECT_EQ(resolve_gemm_path("auto", "cpu"), resolve_gemm_path("auto"));
  EXPECT_EQ(resolve_gemm_path("widen", "meta"), GemmPath::widen);
  EXPECT_THROW(resolve_gemm_path("fast", "cuda"), Error);
}

TEST(GemmPath, ThisCpuIsProbedConsistently) {
  const kernels::Bf16MatmulSupport& s = kernels::bf16_matmul_support();
  EXPECT_EQ(s.native, s.available && s.impl.rfind("brg", 0) == 0) << s.impl;
  EXPECT_EQ(s.reason.empty(), s.native) << s.reason;
  EXPECT_FALSE(kernels::onednn_cpu_isa().empty());
  // AVX2-only CPUs (oneDNN 2.6: bf16 needs AVX-512) never get the bf16 path.
  if (kernels::onednn_cpu_isa() == "avx2") {
    EXPECT_FALSE(s.available);
  }
  RecordProperty("bf16_matmul_impl", s.impl);
  RecordProperty("onednn_isa", kernels::onednn_cpu_isa());
}

}  // namespace gemm_bf16_test
}  // namespace
}  // namespace snug
