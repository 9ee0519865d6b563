// Generation in 16 bits (issue 26 point 5): a model computing in bf16 or fp16 keeps its weights and
// its KV cache in that dtype, as transformers does for a model loaded with torch_dtype.
//  - the 16-bit cache kernels give the fp32 cache kernels' outputs bit for bit on values already
//    rounded to the dtype (what a 16-bit forward writes), fast and reference alike, and the fast
//    ones stay within 1e-5 of the reference;
//  - a model with 16-bit parameters caches in 16 bits (2 bytes per element, counted as kv_cache),
//    and its cached logits equal those with an fp32 cache bit for bit;
//  - bf16 (fp16) weights generate exactly what fp32 weights holding the same rounded values
//    generate under --bf16 (--fp16) mixed precision, on both GEMM paths: storing the weights in
//    16 bits loses nothing at inference against fp32 masters + 16-bit compute copies, and saves
//    4 of their 6 bytes per parameter;
//  - f16 parameters initialized from a seed hold the fp32 draws rounded to f16.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "generate/generate.h"
#include "kernels/backends.h"
#include "kernels/gemm_path.h"
#include "kernels/op_table.h"
#include "models/registry.h"
#include "nn/init.h"
#include "nn/kv_cache.h"
#include "support/compare.h"

namespace snug {
namespace {
namespace half_precision_generation_test {

std::vector<float> randn(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  NormalGenerator rng(seed);
  rng.fill(v.data(), static_cast<int64_t>(n), 0.0f, 1.0f);
  return v;
}

// v rounded to the 16-bit dtype and back.
std::vector<float> rounded(std::vector<float> v, bool fp16) {
  ref_op_table().round_to_half(v.data(), static_cast<int64_t>(v.size()), fp16);
  return v;
}

using test::max_rel;

TEST(KVCacheOps, SixteenBitCacheEqualsTheFp32CacheOnRoundedValues) {
  const int64_t B = 2, T = 9, NH = 6, NKV = 2, hs = 5, W = NKV * hs, Q = NH * hs;
  for (const bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "f16" : "bf16");
    const auto q = randn(B * T * Q, 1), k = randn(B * T * W, 2), v = randn(B * T * W, 3);
    const auto kr = rounded(k, fp16), vr = rounded(v, fp16);
    for (const OpTable* ops : {&fast_op_table(), &ref_op_table()}) {
      SCOPED_TRACE(ops->impl);
      // The 16-bit cache written in two pieces (4 rows, then 5) from the unrounded values: the
      // write rounds, so it holds exactly kr, vr.
      std::vector<uint16_t> kc(B * T * W), vc(B * T * W);
      std::vector<float> first(B * 4 * W), rest(B * 5 * W);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t i = 0; i < W; ++i)
            (t < 4 ? first[(b * 4 + t) * W + i] : rest[(b * 5 + t - 4) * W + i]) =
                k[(b * T + t) * W + i];
      ops->kv_cache_write_half(kc.data(), first.data(), B, 4, T, 0, W, W, fp16);
      ops->kv_cache_write_half(kc.data(), rest.data(), B, 5, T, 4, W, W, fp16);
      ops->kv_cache_write_half(vc.data(), v.data(), B, T, T, 0, W, W, fp16);
      std::vector<float> kw(kc.size()), vw(vc.size());
      ref_op_table().unpack_half(kw.data(), kc.data(), static_cast<int64_t>(kc.size()), fp16);
      ref_op_table().unpack_half(vw.data(), vc.data(), static_cast<int64_t>(vc.size()), fp16);
      EXPECT_EQ(kw, kr);
      EXPECT_EQ(vw, vr);
      // Attention over it: the fp32 cache's outputs on the rounded values, bit for bit; with a
      // sliding window of 5 too, and as 3 new queries after 6 cached rows.
      for (const int64_t window : {int64_t{0}, int64_t{5}}) {
        std::vector<float> half(B * T * Q), f32(B * T * Q);
        ops->attention_decode_gqa_half(half.data(), q.data(), kc.data(), vc.data(), B, T, 0, T, NH,
                                       NKV, hs, Q, window, fp16);
        ops->attention_decode_gqa(f32.data(), q.data(), kr.data(), vr.data(), B, T, 0, T, NH, NKV,
                                  hs, Q, window);
        EXPECT_EQ(half, f32) << "window " << window;
      }
      std::vector<float> tail_half(B * 3 * Q), tail_f32(B * 3 * Q);
      ops->attention_decode_gqa_half(tail_half.data(), q.data(), kc.data(), vc.data(), B, 3, 6, T,
                                     NH, NKV, hs, Q, 0, fp16);
      ops->attention_decode_gqa(tail_f32.data(), q.data(), kr.data(), vr.data(), B, 3, 6, T, NH,
                                NKV, hs, Q, 0);
      EXPECT_EQ(tail_half, tail_f32);
      // Gather: row b of dst is row from[b] of src for the first len rows; the rest untouched.
      const std::vector<int32_t> from{1, 0};
      std::vector<uint16_t> g(B * T * W, 7);
      ops->kv_cache_gather_half(g.data(), kc.data(), from.data(), B, T, 6, W);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < T * W; ++i)
          EXPECT_EQ(g[b * T * W + i], i < 6 * W ? kc[from[b] * T * W + i] : 7) << b << " " << i;
    }
    // Fast against reference on the same 16-bit cache.
    std::vector<uint16_t> kc(B * T * W), vc(B * T * W);
    ref_op_table().kv_cache_write_half(kc.data(), k.data(), B, T, T, 0, W, W, fp16);
    ref_op_table().kv_cache_write_half(vc.data(), v.data(), B, T, T, 0, W, W, fp16);
    std::vector<float> fast(B * T * Q), ref(B * T * Q);
    fast_op_table().attention_decode_gqa_half(fast.data(), q.data(), kc.data(), vc.data(), B, T, 0,
                                              T, NH, NKV, hs, Q, 0, fp16);
    ref_op_table().attention_decode_gqa_half(ref.data(), q.data(), kc.data(), vc.data(), B, T, 0, T,
                                             NH, NKV, hs, Q, 0, fp16);
    EXPECT_LT(max_rel(fast, ref), 1e-5f);
  }
}

std::string fixture(const std::string& name) {
  return std::string(SNUG_TEST_DATA_DIR) + "/hf/" + name;
}

// A fixture folder's model with `dtype` parameters computing in `compute`.
std::unique_ptr<Model> fixture_model(const std::string& name, Device& dev, DType dtype,
                                     ComputeDType compute, kernels::GemmPath path) {
  auto m = create_model(resolve_model(fixture(name)), dev, dtype);
  load_model_weights(*m, fixture(name));
  m->set_compute_dtype(compute);
  m->set_gemm_path(path);
  return m;
}

// (B, V) logits of the prefill of 5 tokens, then of 4 single tokens, through `cache`.
std::vector<std::vector<float>> cached_logits(Model& m, nn::KVCache& cache) {
  const int64_t B = 2, V = m.summary().vocab_size;
  std::vector<std::vector<float>> out;
  for (int64_t t0 = 0; t0 < 9;) {
    const int64_t n = t0 == 0 ? 5 : 1;
    std::vector<int32_t> step(B * n);
    for (int64_t i = 0; i < B * n; ++i) step[i] = static_cast<int32_t>((t0 * 13 + i * 7 + 3) % V);
    const Tensor logits = m.forward_cached(step.data(), B, n, cache);
    out.emplace_back(logits.data<float>(), logits.data<float>() + B * V);
    t0 += n;
  }
  m.free_activations();
  return out;
}

TEST(KVCache, SixteenBitModelCachesInItsDtypeAndEqualsAnFp32Cache) {
  for (const auto& [dtype, compute] :
       {std::pair{DType::bf16, ComputeDType::bf16}, std::pair{DType::f16, ComputeDType::f16}}) {
    SCOPED_TRACE(dtype_name(dtype));
    Device dev(cpu_backend());
    auto m = fixture_model("llama_gqa_sharded", dev, dtype, compute, kernels::GemmPath::widen);
    const nn::KVCacheShape shape = m->kv_cache_shape();
    ASSERT_EQ(shape.dtype, dtype);
    const int64_t before = dev.pool().stats().live[static_cast<size_t>(Category::kv_cache)];
    std::vector<std::vector<float>> half, f32;
    {
      nn::KVCache cache(dev, shape, 2, 9);
      // 2 x batch x layers x width x positions x 2 bytes
      EXPECT_EQ(cache.bytes(), 2 * 2 * shape.layers * shape.width * 9 * 2);
      EXPECT_EQ(dev.pool().stats().live[static_cast<size_t>(Category::kv_cache)] - before,
                cache.bytes());
      half = cached_logits(*m, cache);
    }
    nn::KVCacheShape wide = shape;
    wide.dtype = DType::f32;
    nn::KVCache cache(dev, wide, 2, 9);
    EXPECT_EQ(cache.bytes(), 2 * 2 * shape.layers * shape.width * 9 * 4);
    f32 = cached_logits(*m, cache);
    EXPECT_EQ(half, f32);  // the keys and values were 16-bit values already
  }
}

// The values a 16-bit model holds, written into an fp32 model's parameters.
void copy_values(const Model& from, Model& to) {
  for (const Parameter* p : from.parameters()) {
    Parameter* q = to.find(p->name);
    ASSERT_NE(q, nullptr) << p->name;
    from.read_values(*p, q->value.data<float>());
  }
}

TEST(Generation, SixteenBitWeightsGenerateWhatMixedPrecisionDoesOnTheSameValues) {
  std::vector<kernels::GemmPath> paths{kernels::GemmPath::widen};
  if (kernels::resolve_gemm_path("auto") == kernels::GemmPath::onednn_bf16)
    paths.push_back(kernels::GemmPath::onednn_bf16);
  int cases = 0;
  for (const std::string name : {"qwen2_bf16_tied", "llama_gqa_sharded", "neox_parallel"})
    for (const auto& [dtype, compute] :
         {std::pair{DType::bf16, ComputeDType::bf16}, std::pair{DType::f16, ComputeDType::f16}})
      for (const kernels::GemmPath path : paths) {
        if (compute == ComputeDType::f16 && path != kernels::GemmPath::widen) continue;
        SCOPED_TRACE(name + " " + dtype_name(dtype) + " " + kernels::gemm_path_name(path));
        Device dev(cpu_backend());
        auto half = fixture_model(name, dev, dtype, compute, path);
        // fp32 masters holding the 16-bit values, 16-bit compute copies cast at the prefill.
        auto mixed = fixture_model(name, dev, DType::f32, compute, path);
        copy_values(*half, *mixed);
        std::vector<std::vector<float>> a, b;
        {
          nn::KVCache cache(dev, half->kv_cache_shape(), 2, 9);
          a = cached_logits(*half, cache);
        }
        {
          nn::KVCache cache(dev, mixed->kv_cache_shape(), 2, 9);
          b = cached_logits(*mixed, cache);
        }
        EXPECT_EQ(a, b);
        // And greedy generation gives the same tokens.
        GenerationConfig g;
        g.max_new_tokens = 6;
        const std::vector<std::vector<int32_t>> prompts{{3, 1, 4, 1, 5}, {9, 2, 6, 5, 3}};
        EXPECT_EQ(generate_batch(*half, prompts, g).sequences[1].tokens,
                  generate_batch(*mixed, prompts, g).sequences[1].tokens);
        ++cases;
      }
  EXPECT_GE(cases, 6);
}

TEST(Generation, Fp16ParametersHoldTheSeededDrawsRounded) {
  Device dev(cpu_backend());
  const ModelConfig cfg = resolve_model("llama-tiny");
  auto f32 = create_model(cfg, dev);
  auto f16 = create_model(cfg, dev, DType::f16);
  f32->init_weights(11);
  f16->init_weights(11);
  int64_t n = 0;
  for (const Parameter* p : f16->parameters()) {
    ASSERT_EQ(p->value.dtype(), DType::f16) << p->name;
    std::vector<float> want(static_cast<size_t>(p->numel())), got(want.size());
    f32->read_values(*f32->find(p->name), want.data());
    f16->read_values(*p, got.data());
    EXPECT_EQ(got, rounded(want, true)) << p->name;
    n += p->numel();
  }
  EXPECT_EQ(n, cfg.num_params);
}

}  // namespace half_precision_generation_test
}  // namespace
}  // namespace snug
