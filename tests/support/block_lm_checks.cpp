#include "support/block_lm_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "nn/init.h"

namespace snug::test {

BlockLMConfig llama_like() {
  // GQA: two query heads per kv head.
  BlockLMConfig c{
      .vocab = 11, .hidden = 8, .layers = 2, .heads = 4, .kv_heads = 2, .intermediate = 12};
  c.rope_theta = 100.0f;  // large angles even at T = 5, so the rotation matters
  c.norm = nn::NormKind::rms;
  c.act = nn::Activation::silu_gated;
  return c;
}

void init_weights(BlockLM& m, uint64_t seed) {
  NormalGenerator rng(seed);
  for (Parameter* p : m.params().list()) {
    float* v = p->value.data<float>();
    const bool vec = p->value.ndim() == 1;
    const bool norm =
        p->name.find("norm") != std::string::npos || p->name.find("layernorm") != std::string::npos;
    rng.fill(v, p->numel(), vec && norm && p->name.ends_with(".weight") ? 1.0f : 0.0f,
             vec ? 0.1f : 0.4f);
  }
}

BlockBatch batch(int64_t V) {
  BlockBatch b;
  for (int64_t i = 0; i < b.B * b.T; ++i) {
    b.tokens.push_back(static_cast<int32_t>((7 * i + 3) % V));
    b.targets.push_back(i == 4 ? -100 : static_cast<int32_t>((5 * i + 1) % V));  // one ignored
  }
  return b;
}

namespace {

// Worst |analytic - numeric| over the tensor, relative to tol_abs * scale + tol_rel * |numeric|
// (scale = the tensor's largest numeric magnitude): <= 1 passes.
double worst_ratio(const std::vector<float>& a, const std::vector<double>& n, double tol_abs,
                   double tol_rel) {
  double scale = 0.0;
  for (double x : n) scale = std::max(scale, std::abs(x));
  double worst = 0.0;
  for (size_t i = 0; i < n.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - n[i]) / (tol_abs * scale + tol_rel * std::abs(n[i])));
  return worst;
}

}  // namespace

// Central differences of the double loss of a forward on the ref table (double accumulation
// inside every kernel), against backward's gradients, for every element of every parameter.
// Steps 1e-2 and 2e-2 (each divided by the step representable in float), Richardson-extrapolated:
// the activations between kernels are fp32, so the loss carries rounding noise of about 1e-8
// that a difference divides by the step (measured, a single step's error shrinks as it grows from
// 3e-4 to 1e-2 on the Llama-style batch), while on more curved batches (the packed documents of
// tests/nn/packed_documents_test.cpp) a single 1e-2 step's h^2 truncation term alone broke the
// bound 5-fold; the extrapolation cancels that term at large steps. Measured with it: the worst
// element reaches 0.72 of the bound below (layer 1's k_proj, Llama-style), 0.17 on the packed
// batch.
void check_gradients(const BlockLMSpec& spec, uint64_t seed, const BlockBatch& b) {
  Device dev(cpu_backend(), &ref_op_table());
  BlockLM m(spec, dev);
  init_weights(m, seed);
  m.forward(b.tokens.data(), b.targets.data(), b.B, b.T, true, b.pos());
  m.backward();
  // Tolerance: 3e-4 of the tensor's largest gradient plus 2e-3 of the element's own. A gradient
  // off by 1% of the scale fails it (checked below for every tensor).
  constexpr double kAbs = 3e-4, kRel = 2e-3;
  int64_t checked = 0;
  for (Parameter* p : m.params().list()) {
    ASSERT_TRUE(p->grad.defined()) << p->name;
    float* v = p->value.data<float>();
    const float* g = p->grad.data<float>();
    std::vector<float> analytic(g, g + p->numel());
    std::vector<double> numeric(analytic.size());
    for (int64_t i = 0; i < p->numel(); ++i) {
      const float orig = v[i];
      const auto central = [&](float h) {
        const float hi = orig + h, lo = orig - h;
        v[i] = hi;
        const double lp = m.forward(b.tokens.data(), b.targets.data(), b.B, b.T, false, b.pos());
        v[i] = lo;
        const double lm = m.forward(b.tokens.data(), b.targets.data(), b.B, b.T, false, b.pos());
        v[i] = orig;
        return (lp - lm) / (static_cast<double>(hi) - static_cast<double>(lo));
      };
      // Richardson extrapolation of steps h and h/2: their h^2 truncation terms cancel.
      numeric[static_cast<size_t>(i)] = (4.0 * central(1e-2f) - central(2e-2f)) / 3.0;
    }
    double scale = 0.0;
    for (double x : numeric) scale = std::max(scale, std::abs(x));
    EXPECT_GT(scale, 1e-4) << p->name << ": a vanishing gradient checks nothing";
    const double worst = worst_ratio(analytic, numeric, kAbs, kRel);
    EXPECT_LE(worst, 1.0) << p->name << " worst error ratio " << worst << " (scale " << scale
                          << ")";
    // The bound is meaningful: the largest element off by 1% of the scale is caught.
    const size_t big = static_cast<size_t>(
        std::max_element(numeric.begin(), numeric.end(),
                         [](double x, double y) { return std::abs(x) < std::abs(y); }) -
        numeric.begin());
    std::vector<float> wrong = analytic;
    wrong[big] += static_cast<float>(0.01 * scale);
    EXPECT_GT(worst_ratio(wrong, numeric, kAbs, kRel), 1.0) << p->name;
    checked += p->numel();
  }
  EXPECT_EQ(checked, count_params(m.params().list()));
}

MemoryStats expect_meta_equals_cpu(const BlockLMSpec& spec, const BlockBatch& b, uint64_t seed) {
  Device cpu(cpu_backend()), meta(meta_backend());
  BlockLM mc(spec, cpu), mm(spec, meta);
  init_weights(mc, seed);
  for (BlockLM* m : {&mc, &mm}) {
    for (int step = 0; step < 2; ++step) {
      m->forward(b.tokens.data(), b.targets.data(), b.B, b.T, true, b.pos());
      m->backward();
    }
    m->params().zero_grad();
  }
  const MemoryStats c = cpu.pool().stats(), mt = meta.pool().stats();
  EXPECT_EQ(c.peak_total, mt.peak_total);
  EXPECT_EQ(c.peak_by_category, mt.peak_by_category);
  EXPECT_EQ(c.max_by_category, mt.max_by_category);
  EXPECT_EQ(c.live, mt.live);
  EXPECT_EQ(c.alloc_count, mt.alloc_count);
  EXPECT_EQ(c.free_count, mt.free_count);
  EXPECT_EQ(c.live_total, c.live[static_cast<int>(Category::weights)]);
  return c;
}

}  // namespace snug::test
