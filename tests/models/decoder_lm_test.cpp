// DecoderLM (models/decoder_lm.h) on a family that is not GPT-2: a Llama-shaped spec (RMSNorm,
// GQA with rotary, SwiGLU, untied head) gets the run options for free, because they live in the
// blocks and the run context rather than in a model class. Checked here on that shape:
// every checkpoint policy gives bitwise the gradients of none (with LoRA dropout and bf16 in
// play), the meta run equals the cpu run to the byte under each run option, a grad-ready listener
// gets every trainable parameter once with its final gradient, in the documented order, and
// changes neither the numbers nor the memory, and NEFTune touches only
// training forwards. The checkpoint and meta checks run on a GPT-NeoX-shaped spec too (LayerNorm,
// parallel residual, exact GELU, partial rotary, the per-head interleaved fused projection), whose
// split q, k, v go through mixed precision's compact/widen like separate projections'. And all of
// it again on packed documents (set_position_ids): recomputed segments read the position ids too.
#include "models/decoder_lm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"
#include "nn/init.h"
#include "nn/param_fill.h"
#include "support/block_decoder.h"
#include "support/block_lm.h"

namespace snug {
namespace {
namespace decoder_lm_test {

DecoderLMSpec tiny_spec(AttentionImpl kernel, bool neox = false) {
  test::BlockLMConfig c{
      .vocab = 13, .hidden = 8, .layers = 3, .heads = 4, .kv_heads = 2, .intermediate = 12};
  c.rope_theta = 100.0f;
  c.kernel = kernel;
  if (neox) {
    c.kv_heads = c.heads;
    c.rotary_dim = 2;
    c.norm = nn::NormKind::layer;
    c.act = nn::Activation::gelu_erf;
    c.parallel_residual = true;
  }
  return test::decoder_spec(neox ? test::neox_style(c) : test::llama_style(c),
                            neox ? "tiny-neox" : "tiny-llama", 16);
}

constexpr int64_t B = 2, T = 7;

struct Batch {
  std::vector<int32_t> tokens, targets;
};
Batch batch() {
  Batch b;
  for (int64_t i = 0; i < B * T; ++i) {
    b.tokens.push_back(static_cast<int32_t>((5 * i + 3) % 13));
    b.targets.push_back(i % 5 == 2 ? -100 : static_cast<int32_t>((7 * i + 1) % 13));
  }
  return b;
}

struct Options {
  CheckpointConfig ckpt;
  ComputeDType compute = ComputeDType::f32;
  bool lora = false;
  bool hook = false;    // a listener that consumes each gradient, the head's last (as LOMO)
  bool listen = false;  // a listener that only records the order (the gradients stay)
  double neftune = 0.0;
  AttentionImpl kernel = AttentionImpl::flash;
  bool neox = false;
  bool packed = false;  // row 0 packs documents of 3 and 4 tokens, row 1 of 2 and 5
};

const std::vector<int32_t> kPackedPositions = {0, 1, 2, 0, 1, 2, 3, 0, 1, 0, 1, 2, 3, 4};

struct Outcome {
  float loss = 0.0f;
  std::map<std::string, std::vector<float>> grads;
  std::vector<std::string> ready_order;
  MemoryStats mem;
};

Outcome run(const Backend& kind, const Options& o) {
  Device dev(kind);
  test::BlockDecoderLM m(tiny_spec(o.kernel, o.neox), dev);
  if (!dev.is_meta()) m.init_weights(3);
  if (o.lora) {
    LoraConfig lc;
    lc.r = 2;
    lc.alpha = 4;
    lc.dropout = 0.25;
    lc.target_modules = {"all-linear"};
    m.add_lora(lc, 9);
    // B starts at zero; give it values so A's gradient is not zero.
    if (!dev.is_meta())
      for (const LoraAdapter& a : m.lora_adapters())
        for (int64_t i = 0; i < a.B->numel(); ++i)
          a.B->value.data<float>()[i] = 0.01f * static_cast<float>(i % 7 - 3);
  }
  if (o.packed) m.set_position_ids(kPackedPositions);
  m.set_checkpointing(o.ckpt);
  m.set_compute_dtype(o.compute);
  m.set_neftune_noise_alpha(o.neftune);
  Outcome out;
  std::optional<GradReadySubscription> sub;
  if (o.hook || o.listen) {
    m.set_head_grad_last(o.hook);
    sub.emplace(m, [&](Parameter& p, const GradReadyInfo&) {
      out.ready_order.push_back(p.name);
      if (!o.hook) return;
      if (!dev.is_meta())
        out.grads[p.name].assign(p.grad.data<float>(), p.grad.data<float>() + p.numel());
      p.free_grad();
    });
  }
  const Batch b = batch();
  m.set_forward_count(5);
  out.loss = m.forward(b.tokens.data(), b.targets.data(), B, T);
  m.backward();
  if (!o.hook && !dev.is_meta())
    for (Parameter* p : m.parameters())
      if (p->grad.defined())
        out.grads[p->name].assign(p->grad.data<float>(), p->grad.data<float>() + p->numel());
  out.mem = dev.pool().stats();
  return out;
}

CheckpointConfig policy(CheckpointPolicy p, int64_t k = 1) {
  CheckpointConfig c;
  c.policy = p;
  c.every_k = k;
  return c;
}

TEST(DecoderLM, EveryCheckpointPolicyGivesBitwiseTheGradientsOfNone) {
  for (bool packed : {false, true})
    for (bool neox : {false, true})
      for (ComputeDType compute : {ComputeDType::f32, ComputeDType::bf16})
        for (AttentionImpl kernel : {AttentionImpl::flash, AttentionImpl::naive}) {
          Options o;
          o.compute = compute;
          o.kernel = kernel;
          o.lora = true;
          o.neox = neox;
          o.packed = packed;
          const Outcome none = run(cpu_backend(), o);
          // A and B on 7 Linears (NeoX: 4) in 3 layers
          ASSERT_EQ(none.grads.size(), 2u * 3u * (neox ? 4u : 7u));
          for (const CheckpointConfig& c :
               {policy(CheckpointPolicy::every_layer), policy(CheckpointPolicy::every_k, 2),
                policy(CheckpointPolicy::selective)}) {
            o.ckpt = c;
            const Outcome got = run(cpu_backend(), o);
            EXPECT_EQ(got.loss, none.loss);
            EXPECT_EQ(got.grads, none.grads) << static_cast<int>(c.policy);
          }
        }
}

TEST(DecoderLM, MetaEqualsCpuToTheByteUnderEachRunOption) {
  std::vector<Options> all(6);
  all[1].compute = ComputeDType::bf16;
  all[1].ckpt = policy(CheckpointPolicy::selective);
  all[2].compute = ComputeDType::f16;
  all[2].ckpt = policy(CheckpointPolicy::every_k, 2);
  all[2].kernel = AttentionImpl::naive;
  all[3].lora = true;
  all[4].hook = true;
  all[5].neftune = 5.0;
  all[5].listen = true;
  all[5].ckpt = policy(CheckpointPolicy::every_layer);
  for (size_t n = 0, count = all.size(); n < count; ++n) {  // each again on the NeoX shape
    all.push_back(all[n]);
    all.back().neox = true;
  }
  for (size_t n = 0, count = all.size(); n < count; ++n) {  // and on packed documents
    all.push_back(all[n]);
    all.back().packed = true;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const Outcome cpu = run(cpu_backend(), all[i]), meta = run(meta_backend(), all[i]);
    EXPECT_EQ(meta.mem.peak_total, cpu.mem.peak_total) << i;
    EXPECT_EQ(meta.mem.peak_by_category, cpu.mem.peak_by_category) << i;
    EXPECT_EQ(meta.mem.max_by_category, cpu.mem.max_by_category) << i;
    EXPECT_EQ(meta.mem.alloc_count, cpu.mem.alloc_count) << i;
    EXPECT_EQ(meta.mem.peak_phase, cpu.mem.peak_phase) << i;
    EXPECT_GT(cpu.mem.peak_total, 0) << i;
  }
}

TEST(DecoderLM, GradReadyListenerWithHeadLastGetsEachParameterOnceWithItsFinalGradient) {
  Options plain;
  const Outcome want = run(cpu_backend(), plain);
  Options hooked;
  hooked.hook = true;
  const Outcome got = run(cpu_backend(), hooked);
  EXPECT_EQ(got.loss, want.loss);
  ASSERT_EQ(got.ready_order.size(), want.grads.size());  // each once
  for (const auto& [name, g] : want.grads) {
    ASSERT_TRUE(got.grads.count(name)) << name;
    const std::vector<float>& h = got.grads.at(name);
    ASSERT_EQ(h.size(), g.size());
    // The untied head's gradient is recomputed chunk by chunk at the end: same kernel, same sums.
    for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(h[i], g[i]) << name << "[" << i << "]";
  }
  // Last layer first, the embeddings last.
  EXPECT_EQ(got.ready_order.front(), "model.norm.weight");
  EXPECT_EQ(got.ready_order.back(), "model.embed_tokens.weight");
}

// A data-parallel bucket listener must not change a run: with and without one, the same loss, the
// same gradients bit for bit, the same memory to the byte and allocation (cpu and meta).
TEST(DecoderLM, ListeningChangesNeitherTheNumbersNorTheMemory) {
  for (bool neox : {false, true})
    for (ComputeDType compute : {ComputeDType::f32, ComputeDType::bf16})
      for (const Backend* kind : {&cpu_backend(), &meta_backend()}) {
        Options o;
        o.neox = neox;
        o.compute = compute;
        o.lora = neox;
        const Outcome plain = run(*kind, o);
        o.listen = true;
        const Outcome heard = run(*kind, o);
        EXPECT_FALSE(heard.ready_order.empty());
        EXPECT_EQ(heard.loss, plain.loss);
        EXPECT_EQ(heard.grads, plain.grads);
        EXPECT_EQ(heard.mem.peak_total, plain.mem.peak_total);
        EXPECT_EQ(heard.mem.peak_by_category, plain.mem.peak_by_category);
        EXPECT_EQ(heard.mem.max_by_category, plain.mem.max_by_category);
        EXPECT_EQ(heard.mem.alloc_count, plain.mem.alloc_count);
        EXPECT_EQ(heard.mem.peak_phase, plain.mem.peak_phase);
      }
}

// The order decoder_lm.h documents, which the all-reduce buckets rely on: the final norm, the
// untied head (unless asked for last), the layers from the last to the first (base parameters in
// parameters() order, then the adapters'), the head if asked for last, the embeddings.
std::vector<std::string> documented_order(const ParameterList& params, int64_t layers,
                                          bool head_last) {
  std::vector<std::string> norm, head, embed;
  std::vector<std::vector<std::string>> base(static_cast<size_t>(layers)),
      adapters(static_cast<size_t>(layers));
  for (const Parameter* p : params) {
    if (!p->requires_grad) continue;
    const std::string& n = p->name;
    const size_t at = n.find("layers.");
    if (at != std::string::npos) {
      const auto l = static_cast<size_t>(std::stoi(n.substr(at + 7)));
      (n.find(".lora_") != std::string::npos ? adapters : base)[l].push_back(n);
    } else {
      (n.rfind("model.norm.", 0) == 0 ? norm : n == "lm_head.weight" ? head : embed).push_back(n);
    }
  }
  std::vector<std::string> order = norm;
  if (!head_last) order.insert(order.end(), head.begin(), head.end());
  for (size_t l = base.size(); l-- > 0;) {
    order.insert(order.end(), base[l].begin(), base[l].end());
    order.insert(order.end(), adapters[l].begin(), adapters[l].end());
  }
  if (head_last) order.insert(order.end(), head.begin(), head.end());
  order.insert(order.end(), embed.begin(), embed.end());
  return order;
}

TEST(DecoderLM, ParametersBecomeReadyInTheDocumentedOrder) {
  for (bool lora : {false, true})
    for (bool head_last : {false, true}) {
      Device dev(cpu_backend());
      test::BlockDecoderLM m(tiny_spec(AttentionImpl::flash), dev);
      m.init_weights(3);
      if (lora) {
        LoraConfig lc;
        lc.r = 2;
        lc.target_modules = {"all-linear"};
        m.add_lora(lc, 9);
      }
      m.set_head_grad_last(head_last);
      std::vector<std::string> got;
      const GradReadySubscription sub(
          m, [&](Parameter& p, const GradReadyInfo&) { got.push_back(p.name); });
      const Batch b = batch();
      m.forward(b.tokens.data(), b.targets.data(), B, T);
      m.backward();
      const std::vector<std::string> want = documented_order(m.parameters(), 3, head_last);
      EXPECT_EQ(got, want) << lora << head_last;
      EXPECT_EQ(got.size(), lora ? 2u * 3u * 7u : m.parameters().size());
    }
}

// The packed batch's loss is its documents' losses run alone, weighted by their valid targets;
// position ids that do not fit the batch are refused.
TEST(DecoderLM, PackedDocumentsGiveTheirLossesAlone) {
  for (bool neox : {false, true}) {
    Device dev(cpu_backend());
    test::BlockDecoderLM m(tiny_spec(AttentionImpl::flash, neox), dev);
    m.init_weights(3);
    const Batch b = batch();
    const std::vector<std::vector<int64_t>> docs = {{3, 4}, {2, 5}};
    double sum = 0.0;
    int64_t valid = 0;
    for (int64_t row = 0; row < B; ++row) {
      int64_t t0 = 0;
      for (int64_t len : docs[static_cast<size_t>(row)]) {
        const int64_t at = row * T + t0;
        int64_t n = 0;
        for (int64_t i = at; i < at + len; ++i) n += b.targets[static_cast<size_t>(i)] >= 0;
        sum += m.forward(b.tokens.data() + at, b.targets.data() + at, 1, len, false) *
               static_cast<double>(n);
        valid += n;
        t0 += len;
      }
    }
    m.set_position_ids(kPackedPositions);
    const float packed = m.forward(b.tokens.data(), b.targets.data(), B, T, false);
    EXPECT_NEAR(packed, sum / static_cast<double>(valid), 1e-5 * std::abs(packed)) << neox;
    m.set_position_ids({});
    EXPECT_GT(std::abs(m.forward(b.tokens.data(), b.targets.data(), B, T, false) - packed), 1e-4);
    m.set_position_ids({0, 1, 2});
    EXPECT_THROW(m.forward(b.tokens.data(), b.targets.data(), B, T, false), Error);
    std::vector<int32_t> bad = kPackedPositions;
    bad[4] = 5;
    m.set_position_ids(bad);
    EXPECT_THROW(m.forward(b.tokens.data(), b.targets.data(), B, T, false), Error);
  }
}

TEST(DecoderLM, NeftuneNoiseChangesTrainingForwardsOnly) {
  Options o;
  const Outcome plain = run(cpu_backend(), o);
  o.neftune = 5.0;
  const Outcome noisy = run(cpu_backend(), o);
  EXPECT_NE(noisy.loss, plain.loss);
  EXPECT_EQ(run(cpu_backend(), o).loss, noisy.loss);  // the same draws for the same count

  Device dev(cpu_backend());
  test::BlockDecoderLM m(tiny_spec(AttentionImpl::flash), dev);
  m.init_weights(3);
  const Batch b = batch();
  const float eval = m.forward(b.tokens.data(), b.targets.data(), B, T, false);
  m.set_neftune_noise_alpha(5.0);
  EXPECT_EQ(m.forward(b.tokens.data(), b.targets.data(), B, T, false), eval);
}

}  // namespace decoder_lm_test
}  // namespace
}  // namespace snug
