// Issue 16, acceptance 4: a small model composed from src/nn blocks alone (two layers: RMSNorm,
// GQA attention with rotary, gated MLP, untied head; tests/support/block_lm.h) has every
// parameter gradient confirmed by central finite differences, and its meta run equals its cpu
// run's memory to the byte. A second composition (LayerNorm, parallel residual, exact GELU,
// naive multi-head attention, tied head, partial rotary) covers the other blocks, and a GPT-NeoX
// composition (HF GPTNeoX names: biased LayerNorms, parallel residual, exact GELU, partial rotary,
// the per-head interleaved fused query_key_value with bias, untied embed_out) the interleaved
// projection, which also gives a separate-q/k/v model's loss and gradients on permuted weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "nn/init.h"
#include "support/block_lm.h"
#include "support/block_lm_checks.h"

namespace snug {
namespace {
namespace composed_model_test {

using test::BlockLM;
using test::BlockLMConfig;
using test::check_gradients;
using test::init_weights;
using test::llama_like;
using Batch = test::BlockBatch;
using test::batch;

// Partial rotary: 2 of 4 head dims.
BlockLMConfig neox_like() {
  return {.vocab = 9,
          .hidden = 8,
          .layers = 2,
          .heads = 2,
          .kv_heads = 2,
          .intermediate = 10,
          .rotary_dim = 2,
          .rope_theta = 50.0f,
          .norm_eps = 1e-5f,
          .norm = nn::NormKind::layer,
          .act = nn::Activation::gelu_erf,
          .kernel = AttentionImpl::naive,
          .parallel_residual = true,
          .tie_word_embeddings = true};
}

// The GPT-NeoX composition: flash attention (neox_like covers naive), 2 heads of 4 dims, 2 of
// them rotated.
BlockLMConfig gpt_neox_like() {
  BlockLMConfig c = neox_like();
  c.vocab = 10;
  c.kernel = AttentionImpl::flash;
  c.tie_word_embeddings = false;
  return c;
}

TEST(ComposedModel, ParametersHaveHuggingFaceLlamaNames) {
  Device dev(meta_backend());
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
  check_gradients(test::llama_style(llama_like()), 1, batch(llama_like().vocab));
}

TEST(ComposedModel, OtherBlocksGradientsMatchFiniteDifferences) {
  check_gradients(test::llama_style(neox_like()), 2, batch(neox_like().vocab));
}

TEST(ComposedModel, ParametersHaveHuggingFaceGptNeoXNames) {
  Device dev(meta_backend());
  BlockLM m(test::neox_style(gpt_neox_like()), dev);
  std::vector<std::string> want = {"gpt_neox.embed_in.weight"};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "gpt_neox.layers." + std::to_string(l) + ".";
    for (const char* s :
         {"input_layernorm.weight", "input_layernorm.bias", "post_attention_layernorm.weight",
          "post_attention_layernorm.bias", "attention.query_key_value.weight",
          "attention.query_key_value.bias", "attention.dense.weight", "attention.dense.bias",
          "mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.bias", "mlp.dense_4h_to_h.weight",
          "mlp.dense_4h_to_h.bias"})
      want.push_back(p + s);
  }
  for (const char* s :
       {"gpt_neox.final_layer_norm.weight", "gpt_neox.final_layer_norm.bias", "embed_out.weight"})
    want.push_back(s);
  std::vector<std::string> got;
  for (const Parameter* p : m.params().list()) got.push_back(p->name);
  EXPECT_EQ(got, want);
  EXPECT_EQ(m.params().find("gpt_neox.layers.0.attention.query_key_value.weight")->shape(),
            Shape({24, 8}));
  EXPECT_EQ(m.params().find("gpt_neox.layers.0.attention.query_key_value.bias")->shape(),
            Shape({24}));
}

TEST(ComposedModel, GptNeoXGradientsMatchFiniteDifferences) {
  check_gradients(test::neox_style(gpt_neox_like()), 5, batch(gpt_neox_like().vocab));
}

// GPT-NeoX's interleaved projection refused where it cannot apply, naming the block.
TEST(ComposedModel, InterleavedProjectionNeedsOneKvHeadPerHead) {
  BlockLMConfig c = gpt_neox_like();
  c.kv_heads = 1;
  Device dev(meta_backend());
  try {
    BlockLM m(test::neox_style(c), dev);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpt_neox.layers.0.attention"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("interleaved"), std::string::npos) << e.what();
  }
}

// The per-head interleaved projection is a permutation of separate q/k/v projections: a model
// with q_proj/k_proj/v_proj and the interleaved model with those weights (and biases) interleaved
// per head, row (h*3 + part)*hs + i = part's row h*hs + i, give the same loss and the permuted
// gradients, on both tables (the split/merge ops only move values; the GEMMs' per-element sums
// are the same but may be blocked differently for a 3x wider output).
TEST(ComposedModel, InterleavedProjectionEqualsSeparateProjectionsPermuted) {
  const BlockLMConfig cfg = gpt_neox_like();
  const int64_t NH = cfg.heads, hs = cfg.hidden / cfg.heads;
  test::BlockLMSpec sep = test::neox_style(cfg);
  sep.layer.attn.fused_qkv_name.clear();
  sep.layer.attn.fused_qkv_layout = nn::FusedQKVLayout::blocks;
  for (const OpTable* table : {&fast_op_table(), &ref_op_table()}) {
    Device d1(cpu_backend(), table), d2(cpu_backend(), table);
    BlockLM ms(sep, d1), mi(test::neox_style(cfg), d2);
    init_weights(ms, 6);
    // fused (3*NH*hs, cols) = the q, k, v parts (NH*hs, cols each) interleaved per head.
    const auto permute = [&](float* fused, const std::vector<float*>& parts, int64_t cols) {
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t part = 0; part < 3; ++part)
          for (int64_t i = 0; i < hs; ++i)
            for (int64_t c = 0; c < cols; ++c)
              fused[((h * 3 + part) * hs + i) * cols + c] =
                  parts[static_cast<size_t>(part)][(h * hs + i) * cols + c];
    };
    // The separate model's q, k, v values (or gradients) for the interleaved parameter n, whose
    // "query_key_value." starts at `at`.
    const std::string fused = "query_key_value.";
    const auto parts_of = [&](const std::string& n, size_t at, bool grad) {
      const std::string pre = n.substr(0, at), suffix = n.substr(at + fused.size());
      std::vector<float*> parts;
      for (const char* q : {"q_proj.", "k_proj.", "v_proj."}) {
        const Parameter* src = ms.params().find(pre + q + suffix);
        parts.push_back(grad ? src->grad.data<float>() : src->value.data<float>());
      }
      return parts;
    };
    for (Parameter* p : mi.params().list()) {
      const std::string& n = p->name;
      const size_t at = n.find(fused);
      if (at == std::string::npos) {
        const Parameter* src = ms.params().find(n);
        ASSERT_NE(src, nullptr) << n;
        std::copy_n(src->value.data<float>(), p->numel(), p->value.data<float>());
      } else {
        permute(p->value.data<float>(), parts_of(n, at, false),
                p->value.ndim() == 2 ? cfg.hidden : 1);
      }
    }
    const Batch b = batch(cfg.vocab);
    const double ls = ms.forward(b.tokens.data(), b.targets.data(), b.B, b.T, true);
    const double li = mi.forward(b.tokens.data(), b.targets.data(), b.B, b.T, true);
    EXPECT_NEAR(li, ls, 1e-6 * std::abs(ls)) << table->impl;
    EXPECT_GT(ls, 0.5);
    ms.backward();
    mi.backward();
    int64_t compared = 0;
    for (Parameter* p : mi.params().list()) {
      const std::string& n = p->name;
      std::vector<float> want(static_cast<size_t>(p->numel()));
      const size_t at = n.find(fused);
      if (at == std::string::npos) {
        const float* g = ms.params().find(n)->grad.data<float>();
        want.assign(g, g + p->numel());
      } else {  // the separate model's gradients interleaved as the weights were
        permute(want.data(), parts_of(n, at, true), p->value.ndim() == 2 ? cfg.hidden : 1);
      }
      double scale = 0.0;
      for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
      EXPECT_GT(scale, 1e-4) << n;
      // The two layouts are different GEMM shapes, which oneDNN blocks and sums in different
      // orders: 1.67e-6 of the scale apart with its AVX2 kernels (ONEDNN_MAX_CPU_ISA=AVX2).
      for (int64_t j = 0; j < p->numel(); ++j)
        ASSERT_NEAR(p->grad.data<float>()[j], want[static_cast<size_t>(j)], 4e-6 * scale)
            << table->impl << " " << n << "[" << j << "]";
      compared += p->numel();
    }
    EXPECT_EQ(compared, count_params(ms.params().list()));
  }
}

// The fast table gives the reference table's loss and gradients.
TEST(ComposedModel, FastTableMatchesRefTable) {
  for (const test::BlockLMSpec& spec :
       {test::llama_style(llama_like()), test::llama_style(neox_like()),
        test::neox_style(gpt_neox_like())}) {
    Device fast(cpu_backend()), ref(cpu_backend(), &ref_op_table());
    BlockLM mf(spec, fast), mr(spec, ref);
    init_weights(mf, 3);
    init_weights(mr, 3);
    const Batch b = batch(spec.vocab);
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

// Two training steps on cpu and on meta agree to the byte (support/block_lm_checks.h).
TEST(ComposedModel, MetaRunEqualsCpuRunToTheByte) {
  for (const int variant : {0, 1, 2, 3}) {  // llama, neox-like, GPT-NeoX flash and naive
    BlockLMConfig cfg = variant == 0 ? llama_like() : variant == 1 ? neox_like() : gpt_neox_like();
    if (variant == 3) cfg.kernel = AttentionImpl::naive;
    cfg.vocab = 97;  // a head scratch and activations of some size
    cfg.hidden = 32;
    cfg.intermediate = 64;
    cfg.heads = 4;
    cfg.kv_heads = cfg.parallel_residual ? 4 : 1;  // MQA for the first
    cfg.rotary_dim = cfg.parallel_residual ? 4 : 0;
    const test::BlockLMSpec spec = variant >= 2 ? test::neox_style(cfg) : test::llama_style(cfg);
    Batch b;
    b.B = 3;
    b.T = 17;
    for (int64_t i = 0; i < b.B * b.T; ++i) {
      b.tokens.push_back(static_cast<int32_t>((13 * i) % cfg.vocab));
      b.targets.push_back(static_cast<int32_t>((29 * i + 1) % cfg.vocab));
    }
    const MemoryStats c = test::expect_meta_equals_cpu(spec, b, 4);
    EXPECT_GT(c.max_by_category[static_cast<int>(Category::activations)], 0);
    EXPECT_GT(c.max_by_category[static_cast<int>(Category::temporary)], 0);
    EXPECT_EQ(c.max_by_category[static_cast<int>(Category::gradients)],
              c.live[static_cast<int>(Category::weights)]);
  }
}

}  // namespace composed_model_test
}  // namespace
}  // namespace snug
