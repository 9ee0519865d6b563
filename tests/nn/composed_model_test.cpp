// Issue 16, acceptance 4: a small model composed from src/nn blocks alone (two layers: RMSNorm,
// GQA attention with rotary, gated MLP, untied head; tests/support/block_lm.h) has every
// parameter gradient confirmed by central finite differences, and its meta run equals its cpu
// run's memory to the byte. A second composition (LayerNorm, parallel residual, exact GELU,
// naive multi-head attention, tied head, partial rotary) covers the other blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/op_table.h"
#include "nn/init.h"
#include "support/block_lm.h"

namespace snug {
namespace {

using test::BlockLM;
using test::BlockLMConfig;

BlockLMConfig llama_like() {
  BlockLMConfig c;
  c.vocab = 11;
  c.hidden = 8;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;  // GQA: two query heads per kv head
  c.intermediate = 12;
  c.rope_theta = 100.0f;  // large angles even at T = 5, so the rotation matters
  c.norm = nn::NormKind::rms;
  c.act = nn::Activation::silu_gated;
  return c;
}

BlockLMConfig neox_like() {
  BlockLMConfig c;
  c.vocab = 9;
  c.hidden = 8;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 2;
  c.intermediate = 10;
  c.rotary_dim = 2;  // partial rotary: 2 of 4 head dims
  c.rope_theta = 50.0f;
  c.norm_eps = 1e-5f;
  c.norm = nn::NormKind::layer;
  c.act = nn::Activation::gelu_erf;
  c.kernel = AttentionImpl::naive;
  c.parallel_residual = true;
  c.tie_word_embeddings = true;
  return c;
}

// Deterministic weights: matrices N(0, 0.4), norm weights 1 + N(0, 0.1), biases N(0, 0.1).
void init(BlockLM& m, uint64_t seed) {
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

struct Batch {
  int64_t B = 2, T = 5;
  std::vector<int32_t> tokens, targets;
};
Batch batch(int64_t V) {
  Batch b;
  for (int64_t i = 0; i < b.B * b.T; ++i) {
    b.tokens.push_back(static_cast<int32_t>((7 * i + 3) % V));
    b.targets.push_back(i == 4 ? -100 : static_cast<int32_t>((5 * i + 1) % V));  // one ignored
  }
  return b;
}

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

// Central differences of the double loss of a forward on the ref table (double accumulation
// inside every kernel), against backward's gradients, for every element of every parameter.
// Step 1e-2 (divided by the step representable in float): the activations between kernels are
// fp32, so the loss carries rounding noise of about 1e-8 that a difference divides by the step;
// measured, the error shrinks as the step grows from 3e-4 to 1e-2 (noise-dominated, not
// truncation-dominated), and at 1e-2 the worst element (layer 1's k_proj) reaches 0.66 of the bound
// below.
void check_gradients(const BlockLMConfig& cfg, uint64_t seed) {
  Device dev(DeviceKind::cpu, &ref_op_table());
  BlockLM m(test::llama_style(cfg), dev);
  init(m, seed);
  const Batch b = batch(cfg.vocab);
  m.forward(b.tokens.data(), b.targets.data(), b.B, b.T, true);
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
      const float hi = orig + 1e-2f, lo = orig - 1e-2f;
      v[i] = hi;
      const double lp = m.forward(b.tokens.data(), b.targets.data(), b.B, b.T, false);
      v[i] = lo;
      const double lm = m.forward(b.tokens.data(), b.targets.data(), b.B, b.T, false);
      v[i] = orig;
      numeric[static_cast<size_t>(i)] =
          (lp - lm) / (static_cast<double>(hi) - static_cast<double>(lo));
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

TEST(ComposedModel, ParametersHaveHuggingFaceLlamaNames) {
  Device dev(DeviceKind::meta);
  BlockLM m(test::llama_style(llama_like()), dev);
  std::vector<std::string> want = {"model.embed_tokens.weight"};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* s :
         {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
          "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"})
      want.push_back(p + s);
  }
  want.push_back("model.norm.weight");
  want.push_back("lm_head.weight");
  std::vector<std::string> got;
  for (const Parameter* p : m.params().list()) got.push_back(p->name);
  EXPECT_EQ(got, want);
  // GQA shapes: k/v project to kv_heads * head_dim = 2 * 2.
  EXPECT_EQ(m.params().find("model.layers.0.self_attn.k_proj.weight")->shape(), Shape({4, 8}));
  EXPECT_EQ(m.params().find("model.layers.0.self_attn.q_proj.weight")->shape(), Shape({8, 8}));
  EXPECT_EQ(m.params().find("lm_head.weight")->shape(), Shape({11, 8}));
}

TEST(ComposedModel, GradientsMatchFiniteDifferences) {
  check_gradients(llama_like(), 1);
}

TEST(ComposedModel, OtherBlocksGradientsMatchFiniteDifferences) {
  check_gradients(neox_like(), 2);
}

// The fast table gives the reference table's loss and gradients.
TEST(ComposedModel, FastTableMatchesRefTable) {
  for (const BlockLMConfig& cfg : {llama_like(), neox_like()}) {
    Device fast(DeviceKind::cpu), ref(DeviceKind::cpu, &ref_op_table());
    BlockLM mf(test::llama_style(cfg), fast), mr(test::llama_style(cfg), ref);
    init(mf, 3);
    init(mr, 3);
    const Batch b = batch(cfg.vocab);
    const double lf = mf.forward(b.tokens.data(), b.targets.data(), b.B, b.T, true);
    const double lr = mr.forward(b.tokens.data(), b.targets.data(), b.B, b.T, true);
    EXPECT_NEAR(lf, lr, 1e-5 * std::abs(lr));
    EXPECT_GT(lr, 0.5);
    mf.backward();
    mr.backward();
    for (size_t i = 0; i < mf.params().list().size(); ++i) {
      const Parameter* pf = mf.params().list()[i];
      const Parameter* pr = mr.params().list()[i];
      double scale = 0.0;
      for (int64_t j = 0; j < pr->numel(); ++j)
        scale = std::max(scale, static_cast<double>(std::abs(pr->grad.data<float>()[j])));
      for (int64_t j = 0; j < pr->numel(); ++j)
        ASSERT_NEAR(pf->grad.data<float>()[j], pr->grad.data<float>()[j], 1e-4 * scale + 1e-7)
            << pf->name << "[" << j << "]";
    }
  }
}

// Two training steps (forward, backward, forward, backward, zero_grad) on cpu and on meta: the
// pool's peak, its split at the peak, every category's maximum, the live bytes and the number of
// allocations agree to the byte.
TEST(ComposedModel, MetaRunEqualsCpuRunToTheByte) {
  for (BlockLMConfig cfg : {llama_like(), neox_like()}) {
    cfg.vocab = 97;  // a head scratch and activations of some size
    cfg.hidden = 32;
    cfg.intermediate = 64;
    cfg.heads = 4;
    cfg.kv_heads = cfg.parallel_residual ? 4 : 1;  // MQA for the first
    cfg.rotary_dim = cfg.parallel_residual ? 4 : 0;
    Device cpu(DeviceKind::cpu), meta(DeviceKind::meta);
    BlockLM mc(test::llama_style(cfg), cpu), mm(test::llama_style(cfg), meta);
    init(mc, 4);
    Batch b;
    b.B = 3;
    b.T = 17;
    for (int64_t i = 0; i < b.B * b.T; ++i) {
      b.tokens.push_back(static_cast<int32_t>((13 * i) % cfg.vocab));
      b.targets.push_back(static_cast<int32_t>((29 * i + 1) % cfg.vocab));
    }
    for (BlockLM* m : {&mc, &mm}) {
      for (int step = 0; step < 2; ++step) {
        m->forward(b.tokens.data(), b.targets.data(), b.B, b.T, true);
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
    // Nothing kept after backward: only the weights stay live.
    EXPECT_EQ(c.live_total, c.live[static_cast<int>(Category::weights)]);
    EXPECT_GT(c.max_by_category[static_cast<int>(Category::activations)], 0);
    EXPECT_GT(c.max_by_category[static_cast<int>(Category::temporary)], 0);
    EXPECT_EQ(c.max_by_category[static_cast<int>(Category::gradients)],
              c.live[static_cast<int>(Category::weights)]);
  }
}

}  // namespace
}  // namespace snug
