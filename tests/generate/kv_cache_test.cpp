// The KV cache (nn/kv_cache.h, kernels/kv_cache_ops.inc): the fast kernels equal the reference
// loops; decoding attention over a cache filled at once equals causal self-attention, and filled
// row by row equals its rows; a model's cached forward, prefill then one token at a time, gives
// the logits of a full forward at every position (GPT-2 with learned positions, a Llama shape
// with GQA and rotary, a GPT-NeoX shape with partial rotary and the interleaved projection); the
// cache's bytes are seed 004's formula and are accounted as kv_cache; beam reordering moves rows.
#include "nn/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/attention_dims.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "models/decoder_lm.h"
#include "models/registry.h"
#include "nn/init.h"
#include "nn/param_fill.h"
#include "support/block_decoder.h"
#include "support/block_lm.h"
#include "support/compare.h"
#include "support/random.h"

namespace snug {
namespace {
namespace kv_cache_test {

using test::max_rel;

std::vector<float> randn(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  NormalGenerator rng(seed);
  rng.fill(v.data(), static_cast<int64_t>(n), 0.0f, 1.0f);
  return v;
}

TEST(KVCacheOps, FastEqualsReferenceAndFullAttention) {
  const int64_t B = 2, T = 9, NH = 6, NKV = 2, hs = 5, W = NKV * hs, Q = NH * hs;
  const auto q = randn(B * T * Q, 1), k = randn(B * T * W, 2), v = randn(B * T * W, 3);
  // Cache rows = k, v written in two pieces (past 0: 4 rows, then 5).
  std::vector<float> kc(B * T * W, 0), vc(B * T * W, 0), kc2(kc), vc2(vc);
  for (auto [ops, kcp, vcp] :
       {std::tuple{&fast_op_table(), &kc, &vc}, std::tuple{&ref_op_table(), &kc2, &vc2}}) {
    std::vector<float> k0(k.begin(), k.begin() + 0), first(B * 4 * W), rest(B * 5 * W);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < W; ++i)
          (t < 4 ? first[(b * 4 + t) * W + i] : rest[(b * 5 + t - 4) * W + i]) =
              k[(b * T + t) * W + i];
    ops->kv_cache_write(kcp->data(), first.data(), B, 4, T, 0, W, W);
    ops->kv_cache_write(kcp->data(), rest.data(), B, 5, T, 4, W, W);
    ops->kv_cache_write(vcp->data(), v.data(), B, T, T, 0, W, W);
  }
  EXPECT_EQ(kc, k);
  EXPECT_EQ(kc2, k);
  EXPECT_EQ(vc, v);

  AttentionDims d;
  d.B = B, d.T = T, d.NH = NH, d.NKV = NKV, d.hs = hs, d.ldq = Q, d.ldk = d.ldv = W, d.ldo = Q;
  std::vector<float> full(B * T * Q), att(B * NH * T * T);
  ref_op_table().attention_forward_gqa(full.data(), att.data(), q.data(), k.data(), v.data(), d);
  std::vector<float> fast(B * T * Q), ref(B * T * Q);
  fast_op_table().attention_decode_gqa(fast.data(), q.data(), kc.data(), vc.data(), B, T, 0, T, NH,
                                       NKV, hs, Q, 0);
  ref_op_table().attention_decode_gqa(ref.data(), q.data(), kc.data(), vc.data(), B, T, 0, T, NH,
                                      NKV, hs, Q, 0);
  EXPECT_LT(max_rel(ref, full), 1e-6f);
  EXPECT_LT(max_rel(fast, ref), 1e-5f);

  // The last 3 rows as new queries after 6 cached ones: full attention's last 3 rows.
  std::vector<float> tail_q(B * 3 * Q), tail_full(B * 3 * Q), tail(B * 3 * Q);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t i = 0; i < Q; ++i) {
        tail_q[(b * 3 + t) * Q + i] = q[(b * T + 6 + t) * Q + i];
        tail_full[(b * 3 + t) * Q + i] = full[(b * T + 6 + t) * Q + i];
      }
  fast_op_table().attention_decode_gqa(tail.data(), tail_q.data(), kc.data(), vc.data(), B, 3, 6, T,
                                       NH, NKV, hs, Q, 0);
  EXPECT_LT(max_rel(tail, tail_full), 1e-5f);

  // Gather: row b of dst is row from[b] of src, for the first len rows.
  const std::vector<int32_t> from{1, 1};
  std::vector<float> g(B * T * W, -1), g2(B * T * W, -1);
  fast_op_table().kv_cache_gather(g.data(), k.data(), from.data(), B, T, T, W);
  ref_op_table().kv_cache_gather(g2.data(), k.data(), from.data(), B, T, T, W);
  EXPECT_EQ(g, g2);
  for (int64_t i = 0; i < T * W; ++i) EXPECT_EQ(g[i], k[T * W + i]);
}

// The sizes of the block compositions the cached forward is held to (GQA: 6 heads over 2).
test::BlockLMConfig kv_test_sizes() {
  return {.vocab = 29, .hidden = 24, .layers = 2, .heads = 6, .kv_heads = 2, .intermediate = 20};
}

// A DecoderLM of `b`'s blocks, summarized by its name and vocabulary, with random init.
DecoderLMSpec spec_of(const test::BlockLMSpec& b, const char* name) {
  return test::decoder_spec(b, name, 32);
}
ModelSummary summary_of(const test::BlockLMSpec& b, const char* name) {
  ModelSummary m;
  m.name = name;
  m.vocab_size = b.vocab;
  return m;
}

// Prefill 5 tokens, then 1 at a time: every step's logits equal the full forward's at that
// position (B = 2 rows), within `tol` (max difference over max magnitude).
void expect_cached_equals_full(Model& m, int64_t T = 11, float tol = 1e-5f) {
  const int64_t B = 2, V = m.summary().vocab_size;
  std::vector<int32_t> tokens(B * T);
  for (int64_t i = 0; i < B * T; ++i) tokens[i] = static_cast<int32_t>((i * 7 + 3) % V);
  m.forward(tokens.data(), nullptr, B, T, false);
  const Tensor& full = m.logits();  // (B,T,V)
  std::vector<float> want(full.data<float>(), full.data<float>() + B * T * V);
  m.free_activations();

  nn::KVCache cache(m.device(), m.kv_cache_shape(), B, T);
  for (int64_t t0 = 0; t0 < T;) {
    const int64_t n = t0 == 0 ? 5 : 1;
    std::vector<int32_t> step(B * n);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i) step[b * n + i] = tokens[b * T + t0 + i];
    const Tensor logits = m.forward_cached(step.data(), B, n, cache);
    ASSERT_EQ(logits.shape(), Shape({B, V}));
    t0 += n;
    EXPECT_EQ(cache.len(), t0);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> got(logits.data<float>() + b * V, logits.data<float>() + (b + 1) * V);
      std::vector<float> ref(want.begin() + (b * T + t0 - 1) * V, want.begin() + (b * T + t0) * V);
      EXPECT_LT(max_rel(got, ref), tol) << "row " << b << " position " << t0 - 1;
    }
  }
}

TEST(KVCache, CachedForwardEqualsFullForwardGpt2) {
  Device dev(cpu_backend());
  auto m = create_model(resolve_model("gpt2-tiny"), dev);
  m->init_weights(3);
  expect_cached_equals_full(*m);
}

TEST(KVCache, CachedForwardEqualsFullForwardLlamaAndNeoxShapes) {
  test::BlockLMConfig c = kv_test_sizes();
  c.rope_theta = 500.0f;
  Device dev(cpu_backend());
  test::BlockDecoderLM llama(spec_of(test::llama_style(c), "tiny-llama"), dev,
                             summary_of(test::llama_style(c), "tiny-llama"));
  llama.init_weights(5);
  expect_cached_equals_full(llama);

  c.kv_heads = c.heads;
  c.rotary_dim = 2;
  c.norm = nn::NormKind::layer;
  c.act = nn::Activation::gelu_erf;
  c.parallel_residual = true;
  test::BlockDecoderLM neox(spec_of(test::neox_style(c), "tiny-neox"), dev,
                            summary_of(test::neox_style(c), "tiny-neox"));
  neox.init_weights(6);
  expect_cached_equals_full(neox);
}

TEST(KVCache, CachedForwardEqualsFullForwardOnEveryCausalFixture) {
  // The transformers-made folders of tests/fixtures/hf (golden parity): llama's scaled rope,
  // qwen2's biases, neox's partial rotary, and mistral's sliding window of 11 at 20 positions.
  int cases = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(SNUG_TEST_DATA_DIR) + "/hf")) {
    const ModelConfig cfg = resolve_model(e.path().string());
    if (cfg.shape.model_type == "bert") continue;
    SCOPED_TRACE(e.path().filename().string());
    Device dev(cpu_backend());
    auto m = create_model(cfg, dev);
    load_model_weights(*m, e.path().string());
    expect_cached_equals_full(*m, 20);
    ++cases;
  }
  EXPECT_GE(cases, 6);
}

TEST(KVCache, MixedPrecisionCachedForwardRoundsAsTheFullForward) {
  // --bf16 and --fp16 (16-bit compute copies of the GEMM weights, 16-bit GEMM and attention
  // outputs): the cached forward rounds where the full one does, so the two differ only by the
  // attention kernels' fp32 summation order carried through the 16-bit roundings.
  test::BlockLMConfig c = kv_test_sizes();
  for (const ComputeDType d : {ComputeDType::bf16, ComputeDType::f16}) {
    Device dev(cpu_backend());
    auto gpt2 = create_model(resolve_model("gpt2-tiny"), dev);
    gpt2->init_weights(3);
    gpt2->set_compute_dtype(d);
    expect_cached_equals_full(*gpt2, 11, d == ComputeDType::bf16 ? 2e-2f : 4e-3f);
    test::BlockDecoderLM llama(spec_of(test::llama_style(c), "tiny-llama"), dev,
                               summary_of(test::llama_style(c), "tiny-llama"));
    llama.init_weights(5);
    llama.set_compute_dtype(d);
    expect_cached_equals_full(llama, 11, d == ComputeDType::bf16 ? 2e-2f : 4e-3f);
    // The compute copies are held from the prefill until free_activations().
    const auto weights = [&] {
      return dev.pool().stats().live[static_cast<size_t>(Category::weights)];
    };
    llama.free_activations();  // the copies the cached forwards above kept
    const int64_t before = weights();
    nn::KVCache cache(dev, llama.kv_cache_shape(), 1, 4);
    const std::vector<int32_t> toks{1, 2};
    llama.forward_cached(toks.data(), 1, 2, cache);
    EXPECT_EQ(weights(), before + 2 * llama.num_compute_copy_params());
    llama.forward_cached(toks.data(), 1, 1, cache);
    EXPECT_EQ(weights(), before + 2 * llama.num_compute_copy_params());
    llama.free_activations();
    EXPECT_EQ(weights(), before);
  }
}

TEST(KVCacheOps, SlidingWindowDecodeEqualsWindowedAttention) {
  const int64_t B = 1, T = 12, NH = 2, NKV = 1, hs = 4, W = NKV * hs, Q = NH * hs, win = 5;
  const auto q = randn(B * T * Q, 4), k = randn(B * T * W, 5), v = randn(B * T * W, 6);
  AttentionDims d;
  d.B = B, d.T = T, d.NH = NH, d.NKV = NKV, d.hs = hs, d.ldq = Q, d.ldk = d.ldv = W, d.ldo = Q;
  d.window = win;
  std::vector<float> full(B * T * Q), att(B * NH * T * T), fast(B * T * Q), ref(B * T * Q);
  ref_op_table().attention_forward_gqa(full.data(), att.data(), q.data(), k.data(), v.data(), d);
  fast_op_table().attention_decode_gqa(fast.data(), q.data(), k.data(), v.data(), B, T, 0, T, NH,
                                       NKV, hs, Q, win);
  ref_op_table().attention_decode_gqa(ref.data(), q.data(), k.data(), v.data(), B, T, 0, T, NH, NKV,
                                      hs, Q, win);
  EXPECT_LT(max_rel(ref, full), 1e-6f);
  EXPECT_LT(max_rel(fast, ref), 1e-5f);
}

TEST(KVCache, BytesAreTheSeedFormulaAndCountAsKvCache) {
  Device dev(meta_backend());
  const ModelConfig cfg = resolve_model("gpt2-124m");
  auto m = create_model(cfg, dev);
  const int64_t before = dev.pool().stats().live[static_cast<size_t>(Category::kv_cache)];
  EXPECT_EQ(before, 0);
  nn::KVCache cache(dev, m->kv_cache_shape(), 3, 1000);
  // 2 x batch x layers x heads x head_dim x context x bytes
  const int64_t want = 2LL * 3 * 12 * 12 * 64 * 1000 * 4;
  EXPECT_EQ(cache.bytes(), want);
  EXPECT_EQ(dev.pool().stats().live[static_cast<size_t>(Category::kv_cache)], want);
}

TEST(KVCache, ReorderMovesRowsAndRefusesBadIndices) {
  Device dev(cpu_backend());
  auto m = create_model(resolve_model("gpt2-tiny"), dev);
  m->init_weights(1);
  nn::KVCache cache(dev, m->kv_cache_shape(), 3, 8);
  const std::vector<int32_t> toks{1, 2, 3, 4, 5, 6};  // rows of 2 tokens
  m->forward_cached(toks.data(), 3, 2, cache);
  const int64_t W = cache.shape().width;
  std::vector<float> row2(cache.slot(0).k.data<float>() + 2 * 8 * W,
                          cache.slot(0).k.data<float>() + 2 * 8 * W + 2 * W);
  cache.reorder({2, 2, 0});
  const float* k0 = cache.slot(0).k.data<float>();
  EXPECT_EQ(std::vector<float>(k0, k0 + 2 * W), row2);
  EXPECT_EQ(std::vector<float>(k0 + 8 * W, k0 + 8 * W + 2 * W), row2);
  EXPECT_THROW(cache.reorder({0, 1}), Error);
  EXPECT_THROW(cache.reorder({0, 1, 3}), Error);
  EXPECT_THROW(nn::KVCache(dev, m->kv_cache_shape(), 1, 100000), Error);
}

}  // namespace kv_cache_test
}  // namespace
}  // namespace snug
