// The fast kernels (snug::kernels) against the plain reference loops (snug::ref), op by op, on
// odd sizes and fixed random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/gemm_library.h"
#include "kernels/kernels.h"
#include "support/compare.h"
#include "support/random.h"

namespace snug {
namespace {
namespace kernels_vs_ref_test {

using test::all_close;
using test::max_abs;
using test::random_floats;
using test::random_ints;
using Vec = std::vector<float>;

constexpr double kRtol = 1e-5;

// Absolute floor for a comparison: kRtol times the reference's largest magnitude.
double floor_of(const Vec& want) {
  return kRtol * std::max(1.0, max_abs(want));
}

void check_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                uint64_t seed) {
  SCOPED_TRACE(std::string("transA=") + (ta ? "1" : "0") + " transB=" + (tb ? "1" : "0") +
               " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
  // Padded leading dimensions, to exercise the strides.
  const int64_t lda = (ta ? M : K) + 3;
  const int64_t ldb = (tb ? K : N) + 2;
  const int64_t ldc = N + 5;
  const Vec A = random_floats((ta ? K : M) * lda, seed);
  const Vec Bm = random_floats((tb ? N : K) * ldb, seed + 1);
  Vec c_ref = random_floats(M * ldc, seed + 2);
  if (beta == 0.0f) {
    // beta == 0: C is write-only, NaN there must not leak into the result.
    for (float& x : c_ref) x = std::numeric_limits<float>::quiet_NaN();
  }
  Vec c_fast = c_ref;
  ref::gemm_f32(ta, tb, M, N, K, alpha, A.data(), lda, Bm.data(), ldb, beta, c_ref.data(), ldc);
  kernels::gemm_f32(ta, tb, M, N, K, alpha, A.data(), lda, Bm.data(), ldb, beta, c_fast.data(),
                    ldc);
  for (int64_t i = 0; i < M; ++i) {
    EXPECT_TRUE(all_close(c_fast.data() + i * ldc, c_ref.data() + i * ldc, N, kRtol, 1e-5))
        << "row " << i;
  }
  // The padding between rows is untouched.
  if (beta != 0.0f) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = N; j < ldc; ++j) EXPECT_EQ(c_fast[i * ldc + j], c_ref[i * ldc + j]);
  }
}

TEST(KernelsVsRef, GemmAllTransposes) {
  uint64_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm(ta, tb, 13, 11, 9, 1.0f, 0.0f, seed += 10);
      check_gemm(ta, tb, 13, 11, 9, 0.7f, 0.3f, seed += 10);
      check_gemm(ta, tb, 67, 45, 131, -1.25f, 1.0f, seed += 10);
      check_gemm(ta, tb, 1, 37, 5, 1.0f, 0.0f, seed += 10);
    }
}

TEST(KernelsVsRef, GemmEmptyK) {
  Vec c(6, 2.0f);
  const Vec dummy(1, 1.0f);
  kernels::gemm_f32(false, false, 2, 3, 0, 1.0f, dummy.data(), 1, dummy.data(), 3, 0.5f, c.data(),
                    3);
  for (float x : c) EXPECT_EQ(x, 1.0f);
  kernels::gemm_f32(false, false, 2, 3, 0, 1.0f, dummy.data(), 1, dummy.data(), 3, 0.0f, c.data(),
                    3);
  for (float x : c) EXPECT_EQ(x, 0.0f);
}

TEST(KernelsVsRef, GemmBadArgumentsThrow) {
  Vec a(16), b(16), c(16);
  // lda smaller than K: oneDNN rejects it, and gemm_f32 turns that into snug::Error.
  EXPECT_THROW(
      kernels::gemm_f32(false, false, 4, 4, 4, 1.0f, a.data(), 2, b.data(), 4, 0.0f, c.data(), 4),
      Error);
}

TEST(KernelsVsRef, GemmLibraryName) {
  const std::string name = kernels::gemm_library();
  EXPECT_EQ(name.rfind(kernels::built_with_onednn() ? "oneDNN " : "BLAS ", 0), 0u) << name;
  EXPECT_STREQ(kernels::sgemm_name(), kernels::built_with_onednn() ? "dnnl_sgemm" : "cblas_sgemm");
  EXPECT_NE(name.find(kernels::sgemm_name()), std::string::npos) << name;
}

// Without oneDNN (SNUG_ONEDNN=OFF) there is no bf16 matmul at all: the probe says so and why,
// --gemm-path auto widens, and a direct call throws rather than computing anything.
TEST(KernelsVsRef, WithoutOneDnnThereIsNoBf16Matmul) {
  if (kernels::built_with_onednn()) GTEST_SKIP() << "built with oneDNN";
  EXPECT_FALSE(kernels::bf16_matmul_support().available);
  EXPECT_NE(kernels::bf16_matmul_support().reason.find("no bf16 matmul"), std::string::npos);
  EXPECT_EQ(kernels::onednn_cpu_isa(), "absent");
  EXPECT_EQ(kernels::resolve_gemm_path("auto"), kernels::GemmPath::widen);
  const std::vector<uint16_t> a(4, 0x3f80), b(4, 0x3f80);
  std::vector<float> c(4, 0.0f);
  try {
    kernels::gemm_bf16(false, false, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
    ADD_FAILURE() << "gemm_bf16 ran without oneDNN";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no bf16 matmul"), std::string::npos) << e.what();
  }
}

TEST(KernelsVsRef, LinearForward) {
  const int64_t N = 13, IC = 9, OC = 11;
  const Vec inp = random_floats(N * IC, 1);
  const Vec w = random_floats(IC * OC, 2);
  const Vec b = random_floats(OC, 3);
  for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
    Vec out_ref(N * OC), out_fast(N * OC, std::numeric_limits<float>::quiet_NaN());
    ref::linear_forward(out_ref.data(), inp.data(), w.data(), bias, N, IC, OC);
    kernels::linear_forward(out_fast.data(), inp.data(), w.data(), bias, N, IC, OC);
    EXPECT_TRUE(all_close(out_fast, out_ref, kRtol, floor_of(out_ref))) << "bias " << !!bias;
  }
}

TEST(KernelsVsRef, LinearBackward) {
  for (int64_t N : {13, 200}) {
    const int64_t IC = 9, OC = 11;
    SCOPED_TRACE("N=" + std::to_string(N));
    const Vec inp = random_floats(N * IC, 4);
    const Vec w = random_floats(IC * OC, 5);
    const Vec dout = random_floats(N * OC, 6);
    // Parameter gradients accumulate onto what is there.
    const Vec dw0 = random_floats(IC * OC, 7);
    const Vec db0 = random_floats(OC, 8);
    Vec dinp_ref(N * IC), dw_ref = dw0, db_ref = db0;
    Vec dinp_fast(N * IC, 123.0f), dw_fast = dw0, db_fast = db0;
    ref::linear_backward(dinp_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), inp.data(),
                         w.data(), N, IC, OC);
    kernels::linear_backward(dinp_fast.data(), dw_fast.data(), db_fast.data(), dout.data(),
                             inp.data(), w.data(), N, IC, OC);
    EXPECT_TRUE(all_close(dinp_fast, dinp_ref, kRtol, floor_of(dinp_ref)));
    EXPECT_TRUE(all_close(dw_fast, dw_ref, kRtol, floor_of(dw_ref)));
    EXPECT_TRUE(all_close(db_fast, db_ref, kRtol, floor_of(db_ref)));
    // nullptr gradients are skipped.
    Vec dw2 = dw0;
    kernels::linear_backward(nullptr, dw2.data(), nullptr, dout.data(), inp.data(), w.data(), N, IC,
                             OC);
    EXPECT_TRUE(all_close(dw2, dw_ref, kRtol, floor_of(dw_ref)));
  }
}

TEST(KernelsVsRef, Embedding) {
  const int64_t B = 2, T = 7, C = 12, V = 37, maxT = 9;
  // Few distinct tokens, so that dwte rows receive several contributions.
  const std::vector<int32_t> idx = random_ints(B * T, 9, 0, 4);
  const Vec wte = random_floats(V * C, 10);
  const Vec wpe = random_floats(maxT * C, 11);
  Vec out_ref(B * T * C), out_fast(B * T * C);
  ref::embedding_forward(out_ref.data(), idx.data(), wte.data(), wpe.data(), B, T, C);
  kernels::embedding_forward(out_fast.data(), idx.data(), wte.data(), wpe.data(), B, T, C);
  EXPECT_TRUE(all_close(out_fast, out_ref, 0.0, 0.0));

  const Vec dout = random_floats(B * T * C, 12);
  Vec dwte_ref = random_floats(V * C, 13), dwpe_ref = random_floats(maxT * C, 14);
  Vec dwte_fast = dwte_ref, dwpe_fast = dwpe_ref;
  ref::embedding_backward(dwte_ref.data(), dwpe_ref.data(), dout.data(), idx.data(), B, T, C);
  kernels::embedding_backward(dwte_fast.data(), dwpe_fast.data(), dout.data(), idx.data(), B, T, C);
  EXPECT_TRUE(all_close(dwte_fast, dwte_ref, kRtol, 1e-6));
  EXPECT_TRUE(all_close(dwpe_fast, dwpe_ref, kRtol, 1e-6));
  Vec dwte_only = random_floats(V * C, 13);
  kernels::embedding_backward(dwte_only.data(), nullptr, dout.data(), idx.data(), B, T, C);
  EXPECT_TRUE(all_close(dwte_only, dwte_ref, kRtol, 1e-6));
}

TEST(KernelsVsRef, LayerNorm) {
  for (int64_t C : {12, 131}) {
    const int64_t N = 13;
    SCOPED_TRACE("C=" + std::to_string(C));
    Vec inp = random_floats(N * C, 15, -2.0f, 3.0f);
    const Vec w = random_floats(C, 16, 0.5f, 1.5f);
    const Vec b = random_floats(C, 17);
    Vec out_ref(N * C), mean_ref(N), rstd_ref(N);
    Vec out_fast(N * C), mean_fast(N), rstd_fast(N);
    ref::layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), inp.data(), w.data(),
                           b.data(), N, C, 1e-5f);
    kernels::layernorm_forward(out_fast.data(), mean_fast.data(), rstd_fast.data(), inp.data(),
                               w.data(), b.data(), N, C, 1e-5f);
    EXPECT_TRUE(all_close(out_fast, out_ref, kRtol, floor_of(out_ref)));
    EXPECT_TRUE(all_close(mean_fast, mean_ref, kRtol, floor_of(mean_ref)));
    EXPECT_TRUE(all_close(rstd_fast, rstd_ref, kRtol, 0.0));

    const Vec dout = random_floats(N * C, 18);
    Vec dinp_ref = random_floats(N * C, 19), dw_ref = random_floats(C, 20),
        db_ref = random_floats(C, 21);
    Vec dinp_fast = dinp_ref, dw_fast = dw_ref, db_fast = db_ref;
    ref::layernorm_backward(dinp_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), inp.data(),
                            w.data(), mean_ref.data(), rstd_ref.data(), N, C);
    kernels::layernorm_backward(dinp_fast.data(), dw_fast.data(), db_fast.data(), dout.data(),
                                inp.data(), w.data(), mean_ref.data(), rstd_ref.data(), N, C);
    EXPECT_TRUE(all_close(dinp_fast, dinp_ref, kRtol, floor_of(dinp_ref)));
    EXPECT_TRUE(all_close(dw_fast, dw_ref, kRtol, floor_of(dw_ref)));
    EXPECT_TRUE(all_close(db_fast, db_ref, kRtol, floor_of(db_ref)));
  }
}

TEST(KernelsVsRef, Gelu) {
  const int64_t n = 10007;  // several parallel chunks and a ragged tail
  const Vec inp = random_floats(n, 22, -8.0f, 8.0f);
  Vec out_ref(n), out_fast(n);
  ref::gelu_forward(out_ref.data(), inp.data(), n);
  kernels::gelu_forward(out_fast.data(), inp.data(), n);
  // For x << 0 the reference's 1 + tanh(u) cancels, so compare at an absolute floor there.
  EXPECT_TRUE(all_close(out_fast, out_ref, 2e-6, 1e-6));
  Vec inplace = inp;
  kernels::gelu_forward(inplace.data(), inplace.data(), n);
  EXPECT_TRUE(all_close(inplace, out_fast, 0.0, 0.0));

  const Vec dout = random_floats(n, 23);
  Vec dinp_ref(n), dinp_fast(n);
  ref::gelu_backward(dinp_ref.data(), inp.data(), dout.data(), n);
  kernels::gelu_backward(dinp_fast.data(), inp.data(), dout.data(), n);
  EXPECT_TRUE(all_close(dinp_fast, dinp_ref, 1e-5, 1e-6));
  Vec alias = dout;
  kernels::gelu_backward(alias.data(), inp.data(), alias.data(), n);
  EXPECT_TRUE(all_close(alias, dinp_fast, 0.0, 0.0));
}

void check_attention(int64_t B, int64_t T, int64_t C, int64_t NH, uint64_t seed) {
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
               " NH=" + std::to_string(NH));
  const Vec qkv = random_floats(B * T * 3 * C, seed, -2.0f, 2.0f);
  Vec out_ref(B * T * C), att_ref(B * NH * T * T);
  Vec out_fast(B * T * C), att_fast(B * NH * T * T, std::numeric_limits<float>::quiet_NaN());
  ref::attention_forward(out_ref.data(), att_ref.data(), qkv.data(), B, T, C, NH);
  kernels::attention_forward(out_fast.data(), att_fast.data(), qkv.data(), B, T, C, NH);
  EXPECT_TRUE(all_close(out_fast, out_ref, kRtol, floor_of(out_ref)));
  EXPECT_TRUE(all_close(att_fast, att_ref, kRtol, 1e-6));
  // Causal: exact zeros above the diagonal, rows sum to 1.
  for (int64_t bh = 0; bh < B * NH; ++bh)
    for (int64_t t = 0; t < T; ++t) {
      double sum = 0.0;
      for (int64_t t2 = 0; t2 < T; ++t2) {
        const float a = att_fast[(bh * T + t) * T + t2];
        if (t2 > t) {
          ASSERT_EQ(a, 0.0f);
        }
        sum += a;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }

  const Vec dout = random_floats(B * T * C, seed + 1);
  Vec dqkv_ref(B * T * 3 * C), dqkv_fast(B * T * 3 * C, 7.0f);
  ref::attention_backward(dqkv_ref.data(), dout.data(), qkv.data(), att_ref.data(), B, T, C, NH);
  kernels::attention_backward(dqkv_fast.data(), dout.data(), qkv.data(), att_fast.data(), B, T, C,
                              NH);
  EXPECT_TRUE(all_close(dqkv_fast, dqkv_ref, 1e-4, 1e-5 * std::max(1.0, max_abs(dqkv_ref))));
}

TEST(KernelsVsRef, Attention) {
  check_attention(2, 7, 12, 3, 24);
  check_attention(1, 1, 8, 2, 25);
  // Several row blocks (block size 32) and a ragged last block.
  check_attention(2, 70, 24, 2, 26);
}

TEST(KernelsVsRef, SoftmaxXent) {
  for (int64_t V : {37, 5001}) {
    const int64_t N = 13;
    SCOPED_TRACE("V=" + std::to_string(V));
    const Vec logits = random_floats(N * V, 27, -6.0f, 6.0f);
    std::vector<int32_t> targets = random_ints(N, 28, 0, static_cast<int32_t>(V - 1));
    targets[3] = -100;
    targets[8] = -1;
    Vec loss_ref(N), probs_ref(N * V), loss_fast(N), probs_fast(N * V);
    const double total_ref = ref::softmax_xent_forward(loss_ref.data(), probs_ref.data(),
                                                       logits.data(), targets.data(), N, V);
    const double total_fast = kernels::softmax_xent_forward(loss_fast.data(), probs_fast.data(),
                                                            logits.data(), targets.data(), N, V);
    EXPECT_NEAR(total_fast, total_ref, 1e-5 * std::abs(total_ref));
    EXPECT_TRUE(all_close(loss_fast, loss_ref, kRtol, 1e-6));
    EXPECT_EQ(loss_fast[3], 0.0f);
    EXPECT_EQ(loss_fast[8], 0.0f);
    EXPECT_TRUE(all_close(probs_fast, probs_ref, kRtol, 1e-9));

    // probs aliasing logits.
    Vec inplace = logits, loss_alias(N);
    const double total_alias = kernels::softmax_xent_forward(loss_alias.data(), inplace.data(),
                                                             inplace.data(), targets.data(), N, V);
    EXPECT_EQ(total_alias, total_fast);
    EXPECT_TRUE(all_close(inplace, probs_fast, 0.0, 0.0));
    EXPECT_TRUE(all_close(loss_alias, loss_fast, 0.0, 0.0));

    const float scale = 1.0f / 11.0f;
    Vec d_ref(N * V), d_fast(N * V, 5.0f);
    ref::softmax_xent_backward(d_ref.data(), probs_ref.data(), targets.data(), scale, N, V);
    kernels::softmax_xent_backward(d_fast.data(), probs_fast.data(), targets.data(), scale, N, V);
    EXPECT_TRUE(all_close(d_fast, d_ref, kRtol, 1e-9));
    for (int64_t j = 0; j < V; ++j) {
      EXPECT_EQ(d_fast[3 * V + j], 0.0f);
      EXPECT_EQ(d_fast[8 * V + j], 0.0f);
    }
    // dlogits aliasing probs.
    kernels::softmax_xent_backward(inplace.data(), inplace.data(), targets.data(), scale, N, V);
    EXPECT_TRUE(all_close(inplace, d_fast, 0.0, 0.0));
  }
}

TEST(KernelsVsRef, SoftmaxXentRejectsOutOfRangeTarget) {
  const Vec logits = random_floats(2 * 5, 32);
  Vec losses(2), probs(2 * 5);
  const std::vector<int32_t> targets = {1, 5};
  EXPECT_THROW(kernels::softmax_xent_forward(losses.data(), probs.data(), logits.data(),
                                             targets.data(), 2, 5),
               Error);
  EXPECT_THROW(
      ref::softmax_xent_forward(losses.data(), probs.data(), logits.data(), targets.data(), 2, 5),
      Error);
}

// sum_squares_each gives each vector's single-op sum bit for bit, fp32 and bf16 mixed, empty
// vectors included; fast against ref as the single ops are.
TEST(KernelsVsRef, SumSquaresEachIsEachSingleSum) {
  const std::vector<int64_t> sizes = {0, 1, 37, 100003, 5, 70001};
  const bool bf16[] = {false, false, false, false, true, true};
  std::vector<Vec> f32(sizes.size());
  std::vector<std::vector<uint16_t>> h16(sizes.size());
  std::vector<const void*> xs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    f32[i] = random_floats(sizes[i], 40 + i, -3.0f, 3.0f);
    for (const float v : f32[i]) h16[i].push_back(f32_to_bf16(v));
    xs.push_back(bf16[i] ? static_cast<const void*>(h16[i].data()) : f32[i].data());
  }
  const auto count = static_cast<int64_t>(sizes.size());
  std::vector<double> fast(sizes.size(), -1.0), slow(sizes.size(), -1.0);
  kernels::sum_squares_each(fast.data(), xs.data(), sizes.data(), bf16, count);
  ref::sum_squares_each(slow.data(), xs.data(), sizes.data(), bf16, count);
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE("vector " + std::to_string(i));
    const int64_t n = sizes[i];
    EXPECT_EQ(fast[i], bf16[i] ? kernels::sum_squares_bf16(h16[i].data(), n)
                               : kernels::sum_squares(f32[i].data(), n));
    EXPECT_EQ(slow[i], bf16[i] ? ref::sum_squares_bf16(h16[i].data(), n)
                               : ref::sum_squares(f32[i].data(), n));
    EXPECT_NEAR(fast[i], slow[i], 1e-12 * slow[i]);
  }
  EXPECT_EQ(fast[0], 0.0);
}

TEST(KernelsVsRef, Elementwise) {
  for (int64_t n : {1, 37, 100003}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Vec a = random_floats(n, 29), b = random_floats(n, 30);
    Vec out_ref(n), out_fast(n);
    ref::add(out_ref.data(), a.data(), b.data(), n);
    kernels::add(out_fast.data(), a.data(), b.data(), n);
    EXPECT_TRUE(all_close(out_fast, out_ref, 0.0, 0.0));
    Vec alias = a;
    kernels::add(alias.data(), alias.data(), b.data(), n);
    EXPECT_TRUE(all_close(alias, out_ref, 0.0, 0.0));

    EXPECT_NEAR(kernels::sum_squares(a.data(), n), ref::sum_squares(a.data(), n),
                1e-12 * ref::sum_squares(a.data(), n));

    Vec s_ref = a, s_fast = a;
    ref::scale(s_ref.data(), -0.37f, n);
    kernels::scale(s_fast.data(), -0.37f, n);
    EXPECT_TRUE(all_close(s_fast, s_ref, 0.0, 0.0));
  }
  EXPECT_EQ(kernels::sum_squares(nullptr, 0), 0.0);
}

TEST(KernelsVsRef, AdamW) {
  const int64_t n = 20011;
  Vec p_ref = random_floats(n, 31), m_ref(n, 0.0f), v_ref(n, 0.0f);
  Vec p_fast = p_ref, m_fast = m_ref, v_fast = v_ref;
  for (int64_t t = 1; t <= 5; ++t) {
    const Vec g = random_floats(n, 100 + t, -0.1f, 0.1f);
    ref::adamw_update(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, 6e-4f, 0.9f, 0.95f,
                      1e-8f, 0.1f, t);
    kernels::adamw_update(p_fast.data(), g.data(), m_fast.data(), v_fast.data(), n, 6e-4f, 0.9f,
                          0.95f, 1e-8f, 0.1f, t);
  }
  EXPECT_TRUE(all_close(p_fast, p_ref, kRtol, 1e-7));
  // m and v can cancel to ~0: compare at a floor relative to their scale.
  EXPECT_TRUE(all_close(m_fast, m_ref, kRtol, 1e-6 * max_abs(m_ref)));
  EXPECT_TRUE(all_close(v_fast, v_ref, kRtol, 1e-6 * max_abs(v_ref)));
}

}  // namespace kernels_vs_ref_test
}  // namespace
}  // namespace snug
