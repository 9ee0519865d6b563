// The kernels the src/nn blocks added (kernels/ops.inc): nn.Linear layout, RMSNorm, rotary
// embedding, gated SiLU, exact GELU, and the general (GQA, strided, causal or bidirectional)
// attention. Each backward is checked by central finite differences of L = sum(y * R) with the
// forward run by the reference kernels (support/gradcheck.h), for both tables; each fast kernel
// is held to its reference on sizes that cross the fast kernels' blocks and tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/op_table.h"
#include "support/attention_case.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace snug {
namespace {
namespace block_kernels_test {

using test::all_close;
using test::AttnCase;
using test::AttnResult;
using test::expect_grad_close;
using test::numerical_grad;
using test::random_floats;
using test::run_attention;
using test::used_columns;
using Vec = std::vector<float>;

using test::dot;

double max_abs(const Vec& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// body(table, name) for the ref and the fast table.
void for_both(const std::function<void(const OpTable&, const std::string&)>& body) {
  body(ref_op_table(), "ref");
  body(fast_op_table(), "fast");
}

TEST(BlockKernels, LinearNtGrad) {
  const int64_t N = 5, IC = 4, OC = 3;
  Vec inp = random_floats(N * IC, 1), w = random_floats(OC * IC, 2), b = random_floats(OC, 3);
  const Vec R = random_floats(N * OC, 4);
  const Vec prior = random_floats(N * IC, 5);  // what accumulate_dinp adds onto
  Vec out(N * OC);
  auto loss = [&] {
    ref::linear_nt_forward(out.data(), inp.data(), w.data(), b.data(), N, IC, OC);
    return dot(out, R);
  };
  const auto n_inp = numerical_grad(inp, loss);
  const auto n_w = numerical_grad(w, loss);
  const auto n_b = numerical_grad(b, loss);
  for_both([&](const OpTable& ops, const std::string& name) {
    Vec dinp(N * IC), dw(OC * IC, 0.0f), db(OC, 0.0f);
    ops.linear_nt_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(), N, IC,
                           OC, false);
    expect_grad_close(dinp, n_inp, name + " dinp");
    expect_grad_close(dw, n_w, name + " dw");
    expect_grad_close(db, n_b, name + " db");
    Vec acc = prior;
    ops.linear_nt_backward(acc.data(), nullptr, nullptr, R.data(), inp.data(), w.data(), N, IC, OC,
                           true);
    for (size_t i = 0; i < acc.size(); ++i) EXPECT_NEAR(acc[i], prior[i] + dinp[i], 1e-5) << name;
  });
}

TEST(BlockKernels, LinearNtFastVsRef) {
  const int64_t N = 37, IC = 70, OC = 131;
  const Vec inp = random_floats(N * IC, 6), w = random_floats(OC * IC, 7), b = random_floats(OC, 8);
  const Vec dout = random_floats(N * OC, 9);
  Vec o_f(N * OC), o_r(N * OC);
  kernels::linear_nt_forward(o_f.data(), inp.data(), w.data(), b.data(), N, IC, OC);
  ref::linear_nt_forward(o_r.data(), inp.data(), w.data(), b.data(), N, IC, OC);
  EXPECT_TRUE(all_close(o_f, o_r, 1e-4, 1e-4));
  Vec di_f(N * IC), dw_f(OC * IC, 0.5f), db_f(OC, 0.5f);
  Vec di_r(N * IC), dw_r(OC * IC, 0.5f), db_r(OC, 0.5f);
  kernels::linear_nt_backward(di_f.data(), dw_f.data(), db_f.data(), dout.data(), inp.data(),
                              w.data(), N, IC, OC, false);
  ref::linear_nt_backward(di_r.data(), dw_r.data(), db_r.data(), dout.data(), inp.data(), w.data(),
                          N, IC, OC, false);
  EXPECT_TRUE(all_close(di_f, di_r, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(dw_f, dw_r, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(db_f, db_r, 1e-5, 1e-5));
}

TEST(BlockKernels, RmsNormGrad) {
  const int64_t N = 4, C = 6;
  const float eps = 1e-5f;
  Vec inp = random_floats(N * C, 10), w = random_floats(C, 11, 0.5f, 1.5f);
  const Vec R = random_floats(N * C, 12);
  Vec out(N * C), rstd(N);
  auto loss = [&] {
    ref::rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
    return dot(out, R);
  };
  const auto n_inp = numerical_grad(inp, loss);
  const auto n_w = numerical_grad(w, loss);
  loss();  // rstd of the unperturbed input
  for_both([&](const OpTable& ops, const std::string& name) {
    Vec dinp(N * C, 0.0f), dw(C, 0.0f);
    ops.rmsnorm_backward(dinp.data(), dw.data(), R.data(), inp.data(), w.data(), rstd.data(), N, C);
    expect_grad_close(dinp, n_inp, name + " dinp");
    expect_grad_close(dw, n_w, name + " dw");
  });
}

TEST(BlockKernels, RmsNormFastVsRef) {
  const int64_t N = 33, C = 200;
  const Vec inp = random_floats(N * C, 13, -2.0f, 2.0f), w = random_floats(C, 14);
  const Vec dout = random_floats(N * C, 15);
  Vec o_f(N * C), o_r(N * C), r_f(N), r_r(N);
  kernels::rmsnorm_forward(o_f.data(), r_f.data(), inp.data(), w.data(), N, C, 1e-6f);
  ref::rmsnorm_forward(o_r.data(), r_r.data(), inp.data(), w.data(), N, C, 1e-6f);
  EXPECT_TRUE(all_close(o_f, o_r, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(r_f, r_r, 1e-5, 0.0));
  // Both accumulate onto what dinp and dw hold.
  Vec di_f(N * C, 1.0f), dw_f(C, 1.0f), di_r(N * C, 1.0f), dw_r(C, 1.0f);
  kernels::rmsnorm_backward(di_f.data(), dw_f.data(), dout.data(), inp.data(), w.data(), r_r.data(),
                            N, C);
  ref::rmsnorm_backward(di_r.data(), dw_r.data(), dout.data(), inp.data(), w.data(), r_r.data(), N,
                        C);
  EXPECT_TRUE(all_close(di_f, di_r, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(dw_f, dw_r, 1e-5, 1e-5));
}

// Hugging Face's formula on one head, written out: pairs (j, j + R/2), float angles t * inv_j.
TEST(BlockKernels, RopeMatchesRotateHalfAndLeavesThePassDims) {
  const int64_t B = 1, T = 3, NH = 1, hs = 6, R = 4;
  const float theta = 10000.0f;
  Vec x = random_floats(B * T * hs, 16);
  const Vec orig = x;
  ref::rope_forward(x.data(), B, T, NH, hs, hs, R, theta, nullptr, nullptr);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < R / 2; ++j) {
      const double inv = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(j) / R);
      const double a = static_cast<double>(t) * inv;
      const double x1 = orig[t * hs + j], x2 = orig[t * hs + j + R / 2];
      EXPECT_NEAR(x[t * hs + j], x1 * std::cos(a) - x2 * std::sin(a), 1e-5);
      EXPECT_NEAR(x[t * hs + j + R / 2], x2 * std::cos(a) + x1 * std::sin(a), 1e-5);
    }
    for (int64_t i = R; i < hs; ++i) EXPECT_EQ(x[t * hs + i], orig[t * hs + i]);  // partial rotary
  }
  EXPECT_EQ(x[0], orig[0]);  // position 0 is the identity
}

TEST(BlockKernels, RopeGrad) {
  // Two heads in rows of stride 15 (three spare columns untouched), partial rotary R = 4 of 6.
  const int64_t B = 2, T = 3, NH = 2, hs = 6, ld = 15, R = 4;
  const float theta = 100.0f;
  Vec x = random_floats(B * T * ld, 17);
  const Vec R_ = random_floats(B * T * ld, 18);
  auto loss = [&] {
    Vec y = x;
    ref::rope_forward(y.data(), B, T, NH, hs, ld, R, theta, nullptr, nullptr);
    return dot(y, R_);
  };
  const auto n_x = numerical_grad(x, loss);
  for_both([&](const OpTable& ops, const std::string& name) {
    Vec dx = R_;
    ops.rope_backward(dx.data(), B, T, NH, hs, ld, R, theta, nullptr, nullptr);
    expect_grad_close(dx, n_x, name + " dx");
  });
}

TEST(BlockKernels, RopeFastVsRef) {
  const int64_t B = 2, T = 50, NH = 3, hs = 16, ld = 3 * 16 + 5, R = 16;
  const Vec x = random_floats(B * T * ld, 19);
  for (bool backward : {false, true}) {
    Vec f = x, r = x;
    if (backward) {
      kernels::rope_backward(f.data(), B, T, NH, hs, ld, R, 10000.0f, nullptr, nullptr);
      ref::rope_backward(r.data(), B, T, NH, hs, ld, R, 10000.0f, nullptr, nullptr);
    } else {
      kernels::rope_forward(f.data(), B, T, NH, hs, ld, R, 10000.0f, nullptr, nullptr);
      ref::rope_forward(r.data(), B, T, NH, hs, ld, R, 10000.0f, nullptr, nullptr);
    }
    EXPECT_TRUE(all_close(f, r, 1e-5, 1e-6)) << "backward " << backward;
  }
  Vec bad = x;
  EXPECT_THROW(kernels::rope_forward(bad.data(), B, T, NH, hs, ld, 3, 1e4f, nullptr, nullptr),
               Error);
  EXPECT_THROW(ref::rope_forward(bad.data(), B, T, NH, hs, ld, 18, 1e4f, nullptr, nullptr), Error);
}

// A scaled rope gives its own inverse frequencies: theta's own table reproduces the default
// bit for bit; another table rotates pair j by t * inv_freq[j] (fast and ref), and the backward
// is still the transpose (finite differences).
TEST(BlockKernels, RopeGivenInverseFrequencies) {
  const int64_t B = 2, T = 9, NH = 2, hs = 8, ld = 2 * 8 + 3, R = 6;
  const float theta = 500.0f;
  const Vec x = random_floats(B * T * ld, 23);
  std::vector<float> own(R / 2), scaled(R / 2);
  for (int64_t j = 0; j < R / 2; ++j) {
    own[j] = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(R));
    scaled[j] = own[j] / (1.0f + static_cast<float>(j));
  }
  for_both([&](const OpTable& ops, const std::string& name) {
    Vec a = x, b = x;
    ops.rope_forward(a.data(), B, T, NH, hs, ld, R, theta, nullptr, nullptr);
    ops.rope_forward(b.data(), B, T, NH, hs, ld, R, theta, nullptr, own.data());
    EXPECT_EQ(a, b) << name;
    Vec c = x;
    ops.rope_forward(c.data(), B, T, NH, hs, ld, R, theta, nullptr, scaled.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < R / 2; ++j) {
        const int64_t i = (1 * T + t) * ld + hs;  // batch 1, head 1
        const double ang = static_cast<double>(static_cast<float>(t) * scaled[j]);
        const double x1 = x[i + j], x2 = x[i + j + R / 2];
        EXPECT_NEAR(c[i + j], x1 * std::cos(ang) - x2 * std::sin(ang), 2e-6) << name;
        EXPECT_NEAR(c[i + j + R / 2], x2 * std::cos(ang) + x1 * std::sin(ang), 2e-6) << name;
      }
  });
  Vec xs = x;
  const Vec r = random_floats(B * T * ld, 24);
  auto loss = [&] {
    Vec y = xs;
    ref::rope_forward(y.data(), B, T, NH, hs, ld, R, theta, nullptr, scaled.data());
    return dot(y, r);
  };
  const auto n_x = numerical_grad(xs, loss);
  for_both([&](const OpTable& ops, const std::string& name) {
    Vec dx = r;
    ops.rope_backward(dx.data(), B, T, NH, hs, ld, R, theta, nullptr, scaled.data());
    expect_grad_close(dx, n_x, name + " dx");
  });
}

TEST(BlockKernels, SwigluAndGeluErfGrad) {
  const int64_t n = 9;
  Vec gate = random_floats(n, 20, -4.0f, 4.0f), up = random_floats(n, 21, -2.0f, 2.0f);
  const Vec R = random_floats(n, 22);
  Vec out(n);
  auto sw = [&] {
    ref::swiglu_forward(out.data(), gate.data(), up.data(), n);
    return dot(out, R);
  };
  const auto n_gate = numerical_grad(gate, sw);
  const auto n_up = numerical_grad(up, sw);
  Vec x = random_floats(n, 23, -4.0f, 4.0f);
  auto ge = [&] {
    ref::gelu_erf_forward(out.data(), x.data(), n);
    return dot(out, R);
  };
  const auto n_x = numerical_grad(x, ge);
  for_both([&](const OpTable& ops, const std::string& name) {
    Vec dgate(n), dup(n), dx(n);
    ops.swiglu_backward(dgate.data(), dup.data(), R.data(), gate.data(), up.data(), n);
    expect_grad_close(dgate, n_gate, name + " dgate");
    expect_grad_close(dup, n_up, name + " dup");
    ops.gelu_erf_backward(dx.data(), x.data(), R.data(), n);
    expect_grad_close(dx, n_x, name + " gelu_erf dx");
  });
}

TEST(BlockKernels, ActivationsFastVsRefAndKnownValues) {
  const int64_t n = 10000;  // several parallel chunks
  const Vec a = random_floats(n, 24, -8.0f, 8.0f), b = random_floats(n, 25, -3.0f, 3.0f);
  const Vec d = random_floats(n, 26);
  Vec f(n), r(n), f2(n), r2(n);
  kernels::swiglu_forward(f.data(), a.data(), b.data(), n);
  ref::swiglu_forward(r.data(), a.data(), b.data(), n);
  EXPECT_TRUE(all_close(f, r, 1e-5, 1e-6));
  kernels::swiglu_backward(f.data(), f2.data(), d.data(), a.data(), b.data(), n);
  ref::swiglu_backward(r.data(), r2.data(), d.data(), a.data(), b.data(), n);
  EXPECT_TRUE(all_close(f, r, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(f2, r2, 1e-5, 1e-6));
  kernels::gelu_erf_forward(f.data(), a.data(), n);
  ref::gelu_erf_forward(r.data(), a.data(), n);
  EXPECT_TRUE(all_close(f, r, 1e-6, 1e-6));
  kernels::gelu_erf_backward(f.data(), a.data(), d.data(), n);
  ref::gelu_erf_backward(r.data(), a.data(), d.data(), n);
  EXPECT_TRUE(all_close(f, r, 1e-5, 1e-6));
  // torch.nn.functional.gelu(torch.tensor(1.0)) = 0.8413447; silu(1.0) * 2 = 1.4621172.
  const float one = 1.0f, two = 2.0f;
  float y = 0.0f;
  kernels::gelu_erf_forward(&y, &one, 1);
  EXPECT_NEAR(y, 0.8413447f, 1e-6);
  kernels::swiglu_forward(&y, &one, &two, 1);
  EXPECT_NEAR(y, 1.4621172f, 1e-6);
}

TEST(BlockKernels, AttentionGqaGrad) {
  for (bool causal : {true, false}) {
    for (int64_t NKV : {4, 2, 1}) {
      AttnCase c(2, 4, 4, NKV, 3, causal, 30 + static_cast<uint64_t>(NKV));
      const std::string what =
          std::string(causal ? "causal" : "bidirectional") + " NKV=" + std::to_string(NKV);
      Vec out(static_cast<size_t>(c.rows() * c.d.ldo)), att(2 * 4 * 4 * 4);
      const Vec R = used_columns(c.dout, c.rows(), c.d.ldo, 4 * 3);
      auto loss = [&] {
        ref::attention_forward_gqa(out.data(), att.data(), c.q.data(), c.k.data(), c.v.data(), c.d);
        return dot(out, R);
      };
      const auto n_q = numerical_grad(c.q, loss);
      const auto n_k = numerical_grad(c.k, loss);
      const auto n_v = numerical_grad(c.v, loss);
      c.dout = R;
      for (bool flash : {false, true})
        for_both([&](const OpTable& ops, const std::string& name) {
          AttnResult r = run_attention(ops, c, flash);
          const std::string w = name + (flash ? " flash " : " naive ") + what;
          // Spare columns of dq/dk/dv are not written: compare the used ones (numerical is 0).
          expect_grad_close(used_columns(r.dq, c.rows(), c.d.ldq, 12), n_q, w + " dq");
          expect_grad_close(used_columns(r.dk, c.rows(), c.d.ldk, NKV * 3), n_k, w + " dk");
          expect_grad_close(used_columns(r.dv, c.rows(), c.d.ldv, NKV * 3), n_v, w + " dv");
        });
    }
  }
}

TEST(BlockKernels, AttentionGqaFastVsRef) {
  // T = 70 crosses the naive row blocks (32) and the flash tiles (64), with ragged last ones.
  for (bool causal : {true, false}) {
    for (int64_t NKV : {6, 2, 1}) {
      AttnCase c(2, 70, 6, NKV, 8, causal, 40 + static_cast<uint64_t>(NKV));
      for (bool flash : {false, true}) {
        const AttnResult f = run_attention(fast_op_table(), c, flash);
        const AttnResult r = run_attention(ref_op_table(), c, flash);
        const std::string w = std::string(flash ? "flash" : "naive") +
                              (causal ? " causal" : " bidirectional") +
                              " NKV=" + std::to_string(NKV);
        EXPECT_TRUE(all_close(f.out, r.out, 1e-4, 1e-5)) << w;
        EXPECT_TRUE(all_close(f.dq, r.dq, 1e-4, 1e-5 * std::max(1.0, max_abs(r.dq)))) << w;
        EXPECT_TRUE(all_close(f.dk, r.dk, 1e-4, 1e-5 * std::max(1.0, max_abs(r.dk)))) << w;
        EXPECT_TRUE(all_close(f.dv, r.dv, 1e-4, 1e-5 * std::max(1.0, max_abs(r.dv)))) << w;
      }
    }
  }
}

// GQA means query head h reads kv head h / (NH/NKV) (transformers' repeat_kv): the same as
// multi-head attention on k and v with each kv head repeated NH/NKV times in place.
TEST(BlockKernels, AttentionGqaEqualsRepeatedKv) {
  const int64_t B = 2, T = 9, NH = 6, NKV = 2, hs = 4, rep = NH / NKV;
  AttnCase g(B, T, NH, NKV, hs, true, 50);
  AttnCase m(B, T, NH, NH, hs, true, 50);
  m.q = g.q;
  m.dout = g.dout;
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < hs; ++i) {
        m.k[bt * m.d.ldk + h * hs + i] = g.k[bt * g.d.ldk + (h / rep) * hs + i];
        m.v[bt * m.d.ldv + h * hs + i] = g.v[bt * g.d.ldv + (h / rep) * hs + i];
      }
  for (bool flash : {false, true}) {
    const AttnResult rg = run_attention(fast_op_table(), g, flash);
    const AttnResult rm = run_attention(fast_op_table(), m, flash);
    EXPECT_TRUE(all_close(rg.out, rm.out, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(rg.dq, rm.dq, 1e-5, 1e-6));
    // A kv head's gradient is the sum over the query heads that share it.
    for (int64_t bt = 0; bt < B * T; ++bt)
      for (int64_t kh = 0; kh < NKV; ++kh)
        for (int64_t i = 0; i < hs; ++i) {
          double sk = 0.0, sv = 0.0;
          for (int64_t r = 0; r < rep; ++r) {
            sk += rm.dk[bt * m.d.ldk + (kh * rep + r) * hs + i];
            sv += rm.dv[bt * m.d.ldv + (kh * rep + r) * hs + i];
          }
          EXPECT_NEAR(rg.dk[bt * g.d.ldk + kh * hs + i], sk, 1e-5);
          EXPECT_NEAR(rg.dv[bt * g.d.ldv + kh * hs + i], sv, 1e-5);
        }
  }
}

TEST(BlockKernels, AttentionDimsAreChecked) {
  AttnCase c(1, 3, 4, 3, 2, true, 60);  // 4 heads over 3 kv heads
  EXPECT_THROW(run_attention(fast_op_table(), c, true), Error);
  EXPECT_THROW(run_attention(ref_op_table(), c, false), Error);
}

TEST(BlockKernels, EmbeddingWithoutPositions) {
  const int64_t B = 2, T = 3, C = 4, V = 5;
  const std::vector<int32_t> idx = {1, 3, 1, 0, 4, 2};
  const Vec wte = random_floats(V * C, 61);
  for_both([&](const OpTable& ops, const std::string& name) {
    Vec out(B * T * C);
    ops.embedding_forward(out.data(), idx.data(), wte.data(), nullptr, B, T, C);
    for (int64_t bt = 0; bt < B * T; ++bt)
      for (int64_t c = 0; c < C; ++c) EXPECT_EQ(out[bt * C + c], wte[idx[bt] * C + c]) << name;
    const std::vector<int32_t> targets = {3, -100, 0, -1, 2, 7};
    EXPECT_EQ(ops.count_valid_targets(targets.data(), 6), 4) << name;
  });
}

}  // namespace block_kernels_test
}  // namespace
}  // namespace snug
