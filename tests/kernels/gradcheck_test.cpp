// Finite-difference gradient checks of every backward kernel, reference and fast.
//
// For an op y = f(x) the checked scalar is L = sum(y * R) with a fixed random R (so dL/dy = R
// is what the backward receives). Numerical gradients are central differences of L, with the
// forward evaluated by the reference kernels and L accumulated in double; the step is
// eps = 1e-3 on float inputs, divided by the step actually representable in float.
#include "support/gradcheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "support/compare.h"
#include "support/random.h"

namespace snug {
namespace {
namespace gradcheck_test {

using test::expect_grad_close;
using test::numerical_grad;
using test::random_floats;
using test::random_ints;
using Vec = std::vector<float>;

using test::dot;

// Runs body(impl) for impl = "ref" and "fast".
enum class Impl { kRef, kFast };
void for_both(const std::function<void(Impl, const std::string&)>& body) {
  body(Impl::kRef, "ref");
  body(Impl::kFast, "fast");
}

TEST(GradCheck, Linear) {
  const int64_t N = 5, IC = 4, OC = 3;
  Vec inp = random_floats(N * IC, 1);
  Vec w = random_floats(IC * OC, 2);
  Vec b = random_floats(OC, 3);
  const Vec R = random_floats(N * OC, 4);
  Vec out(N * OC);
  auto loss = [&] {
    ref::linear_forward(out.data(), inp.data(), w.data(), b.data(), N, IC, OC);
    return dot(out, R);
  };
  const auto n_inp = numerical_grad(inp, loss);
  const auto n_w = numerical_grad(w, loss);
  const auto n_b = numerical_grad(b, loss);
  for_both([&](Impl impl, const std::string& name) {
    Vec dinp(N * IC), dw(IC * OC, 0.0f), db(OC, 0.0f);
    if (impl == Impl::kRef)
      ref::linear_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(), N, IC,
                           OC);
    else
      kernels::linear_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(), N,
                               IC, OC);
    expect_grad_close(dinp, n_inp, name + " dinp");
    expect_grad_close(dw, n_w, name + " dw");
    expect_grad_close(db, n_b, name + " db");
  });
}

TEST(GradCheck, Embedding) {
  const int64_t B = 2, T = 3, C = 4, V = 5, maxT = 4;
  const std::vector<int32_t> idx = {1, 3, 1, 0, 1, 4};  // token 1 repeats, token 2 unused
  Vec wte = random_floats(V * C, 5);
  Vec wpe = random_floats(maxT * C, 6);
  const Vec R = random_floats(B * T * C, 7);
  Vec out(B * T * C);
  auto loss = [&] {
    ref::embedding_forward(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, R);
  };
  const auto n_wte = numerical_grad(wte, loss);
  const auto n_wpe = numerical_grad(wpe, loss);
  for_both([&](Impl impl, const std::string& name) {
    Vec dwte(V * C, 0.0f), dwpe(maxT * C, 0.0f);
    if (impl == Impl::kRef)
      ref::embedding_backward(dwte.data(), dwpe.data(), R.data(), idx.data(), B, T, C);
    else
      kernels::embedding_backward(dwte.data(), dwpe.data(), R.data(), idx.data(), B, T, C);
    expect_grad_close(dwte, n_wte, name + " dwte");
    expect_grad_close(dwpe, n_wpe, name + " dwpe");
  });
}

TEST(GradCheck, LayerNorm) {
  const int64_t N = 3, C = 7;
  Vec inp = random_floats(N * C, 8, -2.0f, 2.0f);
  Vec w = random_floats(C, 9, 0.5f, 1.5f);
  Vec b = random_floats(C, 10);
  const Vec R = random_floats(N * C, 11);
  Vec out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    ref::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                           C, 1e-5f);
    return dot(out, R);
  };
  const auto n_inp = numerical_grad(inp, loss);
  const auto n_w = numerical_grad(w, loss);
  const auto n_b = numerical_grad(b, loss);
  loss();  // mean and rstd of the unperturbed input
  for_both([&](Impl impl, const std::string& name) {
    Vec dinp(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    if (impl == Impl::kRef)
      ref::layernorm_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(),
                              mean.data(), rstd.data(), N, C);
    else
      kernels::layernorm_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(),
                                  mean.data(), rstd.data(), N, C);
    expect_grad_close(dinp, n_inp, name + " dinp");
    expect_grad_close(dw, n_w, name + " dw");
    expect_grad_close(db, n_b, name + " db");
  });
}

TEST(GradCheck, Gelu) {
  const int64_t n = 41;
  Vec inp = random_floats(n, 12, -4.0f, 4.0f);
  const Vec R = random_floats(n, 13);
  Vec out(n);
  auto loss = [&] {
    ref::gelu_forward(out.data(), inp.data(), n);
    return dot(out, R);
  };
  const auto n_inp = numerical_grad(inp, loss);
  for_both([&](Impl impl, const std::string& name) {
    Vec dinp(n);
    if (impl == Impl::kRef)
      ref::gelu_backward(dinp.data(), inp.data(), R.data(), n);
    else
      kernels::gelu_backward(dinp.data(), inp.data(), R.data(), n);
    expect_grad_close(dinp, n_inp, name + " dinp");
  });
}

TEST(GradCheck, Attention) {
  const int64_t B = 2, T = 4, C = 6, NH = 2;
  Vec qkv = random_floats(B * T * 3 * C, 14, -1.5f, 1.5f);
  const Vec R = random_floats(B * T * C, 15);
  Vec out(B * T * C), att(B * NH * T * T);
  auto loss = [&] {
    ref::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  const auto n_qkv = numerical_grad(qkv, loss);
  for_both([&](Impl impl, const std::string& name) {
    // The backward consumes att: recompute the forward right before it.
    Vec dqkv(B * T * 3 * C);
    if (impl == Impl::kRef) {
      ref::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
      ref::attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
    } else {
      kernels::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
      kernels::attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
    }
    expect_grad_close(dqkv, n_qkv, name + " dqkv");
  });
}

TEST(GradCheck, SoftmaxXent) {
  const int64_t N = 4, V = 9;
  Vec logits = random_floats(N * V, 16, -3.0f, 3.0f);
  const std::vector<int32_t> targets = {2, -100, 8, 0};
  const float scale = 1.0f / 3.0f;  // mean over the 3 valid rows
  Vec losses(N), probs(N * V);
  auto loss = [&] {
    return scale * ref::softmax_xent_forward(losses.data(), probs.data(), logits.data(),
                                             targets.data(), N, V);
  };
  const auto n_logits = numerical_grad(logits, loss);
  for_both([&](Impl impl, const std::string& name) {
    Vec dlogits(N * V, 9.0f);
    if (impl == Impl::kRef) {
      ref::softmax_xent_forward(losses.data(), probs.data(), logits.data(), targets.data(), N, V);
      ref::softmax_xent_backward(dlogits.data(), probs.data(), targets.data(), scale, N, V);
    } else {
      kernels::softmax_xent_forward(losses.data(), probs.data(), logits.data(), targets.data(), N,
                                    V);
      kernels::softmax_xent_backward(dlogits.data(), probs.data(), targets.data(), scale, N, V);
    }
    EXPECT_EQ(losses[1], 0.0f) << name;
    for (int64_t j = 0; j < V; ++j) EXPECT_EQ(dlogits[1 * V + j], 0.0f) << name;
    expect_grad_close(dlogits, n_logits, name + " dlogits");
  });
}

}  // namespace gradcheck_test
}  // namespace
}  // namespace snug
