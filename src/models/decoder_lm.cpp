#include "models/decoder_lm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "kernels/attention_dims.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"
#include "nn/init.h"
#include "nn/neftune.h"
#include "nn/param_fill.h"

namespace snug {

struct DecoderLM::Saved : SavedRun {
  Tensor encoded;  // (B,T,C) the embeddings' output, layer 0's input
  nn::Embedding::Saved emb;
  std::vector<nn::DecoderLayer::Saved> layers;
  std::vector<Tensor> outs;  // each layer's output (B,T,C), the next one's input
  nn::NormSaved norm;
  nn::LMHeadLoss::Saved head;
  Tensor position_ids;  // (B,T) int32 when set_position_ids() gave some: the layers read them in
                        // forward and again when backward recomputes a segment
};

namespace {

// The memory phases' name of layer l: "transformer.h." -> "h.0", "model.layers." -> "layers.0".
std::string phase_label(const std::string& prefix) {
  const size_t dot = prefix.find('.');
  return dot == std::string::npos || dot + 1 == prefix.size() ? prefix : prefix.substr(dot + 1);
}

}  // namespace

DecoderLM::DecoderLM(const DecoderLMSpec& spec, Device& dev, DType param_dtype,
                     const std::optional<WeightQuantConfig>& quant)
    : BlockModel(dev, spec.name, spec.layer_prefix, phase_label(spec.layer_prefix),
                 spec.layer.attn.kernel, LogitsMode::chunked),
      spec_(spec) {
  ParameterStore& ps = store();
  const int64_t V = spec_.vocab, C = spec_.hidden;
  SNUG_CHECK(V > 0 && C > 0 && spec_.layers > 0 && spec_.max_positions > 0, spec_.name,
             ": vocabulary ", V, ", hidden size ", C, ", ", spec_.layers, " layers and ",
             spec_.max_positions, " positions must be positive");
  dev.pool().set_phase("init weights");
  ps.set_param_dtype(param_dtype);
  embed_.emplace(ps, spec_.embed_name, V, C, spec_.positions_name,
                 spec_.positions_name.empty() ? 0 : spec_.max_positions);
  ps.set_weight_quant(quant);  // the layers' Linear weights only
  layers_.reserve(static_cast<size_t>(spec_.layers));
  for (int64_t l = 0; l < spec_.layers; ++l) {
    const size_t begin = ps.list().size();
    layers_.emplace_back(ps, spec_.layer_prefix + std::to_string(l), spec_.layer);
    add_layer(begin, ps.list().size(), layers_.back().linears());
  }
  ps.set_weight_quant(std::nullopt);
  norm_params_.first = ps.list().size();
  norm_.emplace(ps, spec_.final_norm_name, C, spec_.layer.norm, spec_.layer.norm_eps);
  norm_params_.second = ps.list().size();
  head_.emplace(ps, spec_.head_name, C, V, spec_.tie_word_embeddings ? embed_->weight() : nullptr);
}

DecoderLM::~DecoderLM() = default;

void DecoderLM::apply_attention(AttentionImpl a) {
  spec_.layer.attn.kernel = a;
  for (nn::DecoderLayer& layer : layers_) layer.set_attention(a);
}

const Tensor& DecoderLM::logits() const {
  SNUG_CHECK(saved_ && saved_->head.probs.defined(), "logits(): no forward pass has run");
  return saved_->head.probs;
}

void DecoderLM::drop_saved() {
  saved_.reset();
}

void DecoderLM::head_block(bool acquiring) {
  // The final norm's parameters and the head weight (the embedding weight when tied).
  if (acquiring) {
    acquire_range(norm_params_.first, norm_params_.second);
    acquire(head_->weight());
  } else {
    release_range(norm_params_.first, norm_params_.second);
    release(head_->weight());
  }
}

std::vector<const Parameter*> DecoderLM::head_gemm_weights() const {
  return {head_->weight()};
}

float DecoderLM::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                         bool for_backward, float loss_scale) {
  const int64_t V = spec_.vocab, C = spec_.hidden, N = B * T;
  check_tokens(tokens, B, T, V, spec_.max_positions, spec_.max_positions_key);
  valid_targets_ = 0;
  if (targets)
    for (int64_t i = 0; i < N; ++i) {
      SNUG_CHECK(targets[i] < V, "forward: target id ", targets[i], " at position ", i,
                 " is outside the vocabulary [0, ", V, ")");
      valid_targets_ += targets[i] >= 0 ? 1 : 0;
    }
  if (!position_ids_.empty()) {
    SNUG_CHECK(static_cast<int64_t>(position_ids_.size()) == N, "forward: ", position_ids_.size(),
               " position ids for a batch of ", B, " x ", T);
    SNUG_CHECK(spec_.positions_name.empty(), "forward: position ids with learned positions (",
               spec_.positions_name, " of ", spec_.name, ") are not supported yet");
    check_position_ids(position_ids_.data(), B, T, "forward: position_ids");
  }
  saved_.reset();  // a new forward replaces whatever an earlier one kept
  auto s = std::make_unique<Saved>();
  begin_forward(*s, B, T, targets != nullptr, for_backward);
  Tensor tokens_t = host_ids(tokens, {B, T});
  const Tensor targets_t = targets ? host_ids(targets, {B, T}) : Tensor();
  nn::RunContext& c = ctx();
  Device& dev = device();
  MemoryPool& pool = dev.pool();
  s->encoded = nn::activation(dev, {B, T, C});
  acquire_range(0, first_layer_param());  // ZeRO stage 3: each block's parameters whole
  embed_->forward(tokens_t, s->encoded, s->emb);
  release_range(0, first_layer_param());
  tokens_t.reset();  // the embedding's Saved keeps the ids
  if (!position_ids_.empty()) s->position_ids = host_ids(position_ids_.data(), {B, T});
  c.position_ids = s->position_ids;  // for the layers (undefined: positions 0..T-1)
  // NEFTune on the input embeddings (nn/neftune.h); adding it after the positions is the same sum.
  if (for_backward && neftune_alpha() > 0) nn::add_neftune_noise(c, s->encoded, neftune_alpha());

  const bool segments = segmented(for_backward);
  const size_t L = layer_slots(*s);
  for (size_t l = 0; l < L; ++l) {
    pool.set_phase(phase("forward", l));
    layer_forward(l, *s);
    if (!for_backward) {
      // Inference: only the running residual stream has to survive the layer.
      s->layers[l] = {};
      if (l > 0) s->outs[l - 1].reset();
    } else if (segments) {
      // Keep only the inputs of segments (outputs of segment ends); everything else is
      // recomputed segment by segment in backward.
      s->layers[l] = {};
      if (l > 0 && !segment_end(l - 1)) s->outs[l - 1].reset();
    } else if (ckpt().policy == CheckpointPolicy::selective) {
      layers_[l].drop_selective(s->layers[l]);
    }
    if (for_backward) layers_[l].compact(s->layers[l]);
  }

  c.position_ids = Tensor();
  if (!for_backward) s->position_ids.reset();
  pool.set_phase("forward lm_head");
  const Tensor xf = nn::activation(dev, {B, T, C});
  head_block(true);
  norm_->forward(s->outs.back(), xf, s->norm);
  c.round_half(xf);  // the LM head GEMM's input
  if (!for_backward) {
    s->layers.clear();
    s->outs.clear();
    s->norm = {};
  }
  const LogitsMode mode = targets ? logits_option() : LogitsMode::full;
  // set_head_grad_last: the head weight's gradient is recomputed at the end of backward.
  const bool defer = head_grad_last();
  const double loss =
      head_->forward(xf, targets_t, valid_targets_, mode, for_backward, loss_scale, defer, s->head);
  head_block(false);
  if (!for_backward) c.free_compute_weights();
  pool.set_phase("forward done");
  saved_ = std::move(s);
  return static_cast<float>(loss);
}

void DecoderLM::layer_forward(size_t l, Saved& s) {
  const Tensor& x = l == 0 ? s.encoded : s.outs[l - 1];
  acquire_layer(l);
  s.outs[l] = layers_[l].forward(x, s.layers[l]);
  release_layer(l);
}

nn::KVCacheShape DecoderLM::kv_cache_shape() const {
  const nn::AttentionConfig& a = spec_.layer.attn;
  const int64_t heads = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
  const int64_t hs = a.head_dim > 0 ? a.head_dim : a.hidden / a.num_heads;
  return {.layers = spec_.layers,
          .width = heads * hs,
          .max_positions = spec_.max_positions,
          .kv_heads = heads,
          .head_dim = hs,
          // In the compute dtype, as transformers' cache holds the keys and values the
          // projections produced (16-bit ones under a 16-bit model or autocast).
          .dtype = ctx().compute == ComputeDType::f16    ? DType::f16
                   : ctx().compute == ComputeDType::bf16 ? DType::bf16
                                                         : DType::f32};
}

Tensor DecoderLM::forward_cached(const int32_t* tokens, int64_t B, int64_t T, nn::KVCache& cache) {
  const int64_t V = spec_.vocab, C = spec_.hidden, N = B * T, past = cache.len();
  SNUG_CHECK(B == cache.batch() && T > 0 && past + T <= cache.max_len(), "generate: ", B, " x ", T,
             " new tokens after ", past, " do not fit the KV cache of ", cache.batch(), " x ",
             cache.max_len());
  for (int64_t i = 0; i < N; ++i)
    SNUG_CHECK(tokens[i] >= 0 && tokens[i] < V, "generate: token id ", tokens[i],
               " is outside the vocabulary [0, ", V, ")");
  saved_.reset();
  nn::RunContext& c = ctx();
  c.training = false;
  Device& dev = device();
  MemoryPool& pool = dev.pool();
  if (c.low_precision() && (past == 0 || !c.has_compute_weights())) {
    // Mixed precision: the 16-bit copies of the GEMM weights, cast at the prefill and kept for
    // the whole generation (generate() frees them with free_activations()).
    pool.set_phase("generate cast weights");
    c.cast_compute_weights(gemm_weights());
  }
  pool.set_phase("generate embeddings");
  Tensor x = nn::activation(dev, {B, T, C});
  {
    const Tensor tokens_t = host_ids(tokens, {B, T});
    nn::Embedding::Saved es;
    embed_->forward(tokens_t, x, es, past);
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    pool.set_phase(phase("generate", l));
    nn::DecoderLayer::Saved s;
    const nn::KVSlot slot = cache.slot(static_cast<int64_t>(l));
    x = layers_[l].forward(x, s, &slot);
  }
  pool.set_phase("generate lm_head");
  // The last token of each row: the only logits generation reads.
  Tensor last = nn::activation(dev, {B, 1, C});
  for (int64_t b = 0; b < B; ++b)
    device().copy(nn::offset(nn::f32(last), b * C), nn::offset(nn::f32(x), ((b + 1) * T - 1) * C),
                  C);
  x.reset();
  const Tensor xf = nn::activation(dev, {B, 1, C});
  nn::NormSaved ns;
  norm_->forward(last, xf, ns);
  ns = {};
  c.round_half(xf);  // the LM head GEMM's input
  last.reset();
  nn::LMHeadLoss::Saved hs;
  head_->forward(xf, Tensor(), 0, LogitsMode::full, false, 1.0f, false, hs);
  cache.advance(T);
  pool.set_phase("generate done");
  Tensor logits = hs.probs;
  return logits.view({B, V});
}

void DecoderLM::backward(float loss_scale) {
  check_backward(saved_.get());
  Saved& s = *saved_;
  nn::RunContext& c = ctx();
  Device& dev = device();
  MemoryPool& pool = dev.pool();
  pool.set_phase("backward lm_head");
  SNUG_CHECK(!s.head.dx.defined() || loss_scale == s.head.loss_scale, "backward: loss_scale ",
             loss_scale, " differs from the ", s.head.loss_scale,
             " given to forward (the chunked LM head computes its gradient in forward)");
  s.head.loss_scale = loss_scale;
  Tensor dres = nn::temporary(dev, {s.B, s.T, spec_.hidden});  // reused layer to layer
  {
    head_block(true);
    const Tensor dxf = head_->backward(s.head);
    dres.zero_();  // the norms accumulate into the residual stream's gradient
    norm_->backward(dxf, s.norm, dres);
    if (!s.head.deferred) s.head.x.reset();
    head_block(false);
  }
  c.flush_grads();  // --bf16-full: fp32 accumulators into the bf16 gradients (no-op otherwise)
  ready_range(norm_params_.first, norm_params_.second);
  if (!spec_.tie_word_embeddings && !s.head.deferred) ready(head_->weight());

  c.position_ids = s.position_ids;  // segments recomputed below read them
  for (size_t li = layers_.size(); li-- > 0;) {
    nn::DecoderLayer::Saved& a = s.layers[li];
    acquire_layer(li);  // ZeRO stage 3: for the recomputed forward and the backward
    if (!a.attn.q.defined()) {
      // Segment checkpointing: recompute this layer's segment from its saved input.
      pool.set_phase(phase("recompute", li));
      const size_t k = static_cast<size_t>(ckpt().every_k);
      s.outs[li].reset();  // consumed already; recomputing the segment reallocates it
      for (size_t j = li - li % k; j <= li; ++j) layer_forward(j, s);
      // The segment's earlier layers wait for their own backward in 16 bits, as forward kept them.
      for (size_t j = li - li % k; j < li; ++j) layers_[j].compact(s.layers[j]);
    } else {
      layers_[li].widen(a);  // 16-bit saved tensors back to fp32 temporaries (no-op in fp32)
      if (!a.attn.q_lin.in.defined()) {
        pool.set_phase(phase("recompute", li));
        layers_[li].recompute_selective(a);
      }
    }
    pool.set_phase(phase("backward", li));
    s.outs[li].reset();  // its gradient is dres; the value itself is no longer needed
    layers_[li].backward(dres, a);
    c.flush_grads();
    layer_ready(li);
    release_layer(li);
  }

  c.position_ids = Tensor();
  if (s.head.deferred) {
    pool.set_phase("backward lm_head deferred");
    acquire(head_->weight());
    head_->weight_backward(s.head);
    release(head_->weight());
    if (!spec_.tie_word_embeddings) ready(head_->weight());
  }

  pool.set_phase("backward embeddings");
  acquire_range(0, first_layer_param());
  embed_->backward(dres, s.emb);
  release_range(0, first_layer_param());
  c.flush_grads();
  if (embed_->positions()) ready(embed_->positions());
  ready(embed_->weight());
  dres.reset();
  saved_.reset();
  c.free_compute_weights();
  pool.set_phase("backward done");
}

void DecoderLM::init_normal_weights(uint64_t seed, float std) {
  const std::string n1 = "." + spec_.layer.norm1_name + ".",
                    n2 = "." + spec_.layer.norm2_name + ".";
  const std::string final_norm = spec_.final_norm_name + ".";
  // One normal stream over the weight matrices in parameter order; each parameter starts at its
  // offset in it (NormalGenerator::at), so its chunks fill in parallel with the serial values.
  int64_t offset = 0;
  for (Parameter* p : parameters()) {
    const std::string& n = p->name;
    const bool bias = n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    const bool norm = n.rfind(final_norm, 0) == 0 || n.find(n1) != std::string::npos ||
                      n.find(n2) != std::string::npos;
    const int64_t base = offset;
    nn::fill_values_indexed(*p, [&](float* d, int64_t begin, int64_t cnt) {
      if (bias || norm)
        std::fill(d, d + cnt, bias ? 0.0f : 1.0f);
      else
        NormalGenerator::at(seed, base + begin).fill(d, cnt, 0.0f, std);
    });
    if (!bias && !norm) offset += p->numel();
  }
}

}  // namespace snug
