#include "models/gpt2.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>

#include "core/error.h"
#include "kernels/flash_attention.h"
#include "kernels/kernels.h"
#include "kernels/lm_head.h"
#include "models/gpt2_internal.h"
#include "models/param_view.h"
#include "nn/init.h"

namespace snug {

namespace K = snug::kernels;

GPT2::GPT2(const GPT2Config& cfg, Device& dev, DType param_dtype,
           const std::optional<WeightQuantConfig>& quant)
    : cfg_(cfg), dev_(&dev), param_dtype_(param_dtype) {
  cfg_.validate();
  SNUG_CHECK(param_dtype == DType::f32 || param_dtype == DType::bf16,
             "GPT2: parameters are f32 or bf16 (--bf16-full), not ", dtype_name(param_dtype));
  const int64_t V = cfg_.vocab_size, P = cfg_.n_positions, C = cfg_.n_embd;
  dev.pool().set_phase("init weights");
  add_param("transformer.wte.weight", {V, C}, true);
  add_param("transformer.wpe.weight", {P, C}, true);
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    std::string h = "transformer.h.";
    h += std::to_string(l);
    h += '.';
    add_param(h + "ln_1.weight", {C}, false);
    add_param(h + "ln_1.bias", {C}, false);
    add_param(h + "attn.c_attn.weight", {C, 3 * C}, true, quant);
    add_param(h + "attn.c_attn.bias", {3 * C}, false);
    add_param(h + "attn.c_proj.weight", {C, C}, true, quant);
    add_param(h + "attn.c_proj.bias", {C}, false);
    add_param(h + "ln_2.weight", {C}, false);
    add_param(h + "ln_2.bias", {C}, false);
    add_param(h + "mlp.c_fc.weight", {C, 4 * C}, true, quant);
    add_param(h + "mlp.c_fc.bias", {4 * C}, false);
    add_param(h + "mlp.c_proj.weight", {4 * C, C}, true, quant);
    add_param(h + "mlp.c_proj.bias", {C}, false);
  }
  add_param("transformer.ln_f.weight", {C}, false);
  add_param("transformer.ln_f.bias", {C}, false);

  wte_ = params_[0];
  wpe_ = params_[1];
  layers_.resize(static_cast<size_t>(cfg_.n_layer));
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    Parameter** p = &params_[static_cast<size_t>(2 + 12 * l)];
    layers_[static_cast<size_t>(l)] = {p[0], p[1], p[2], p[3], p[4],  p[5],
                                       p[6], p[7], p[8], p[9], p[10], p[11]};
  }
  lnf_w_ = params_[params_.size() - 2];
  lnf_b_ = params_[params_.size() - 1];
  SNUG_ASSERT(count_params(params_) == cfg_.num_params());
}

GPT2::~GPT2() = default;

void GPT2::add_param(const std::string& name, const Shape& shape, bool decay,
                     const std::optional<WeightQuantConfig>& quant) {
  auto p = std::make_unique<Parameter>();
  p->name = name;
  if (quant) {
    // Frozen and stored quantized from the start: the fp32 tensor never exists on the device.
    p->quant = std::make_shared<QuantizedWeight>(empty_quantized_weight(shape, *quant, *dev_));
    p->requires_grad = false;
  } else {
    p->value = Tensor::empty(shape, param_dtype_, Category::weights, *dev_);
  }
  p->decay = decay;
  params_.push_back(p.get());
  owned_.push_back(std::move(p));
}

Parameter* GPT2::find(const std::string& name) const {
  for (Parameter* p : params_)
    if (p->name == name) return p;
  return nullptr;
}

void GPT2::init_weights(uint64_t seed) {
  if (dev_->is_meta()) return;
  NormalGenerator rng(seed);
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg_.n_layer));
  for (Parameter* p : params_) {
    const std::string& n = p->name;
    auto ends_with = [&](const char* s) {
      const std::string suffix(s);
      return n.size() >= suffix.size() &&
             n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    // bf16 parameters get these fp32 values rounded, chunk by chunk (models/param_view.h);
    // quantized ones are generated in host memory and quantized (the same values either way).
    auto fill = [&](float* d, int64_t cnt) {
      if (ends_with(".bias")) {
        for (int64_t i = 0; i < cnt; ++i) d[i] = 0.0f;
      } else if (n.find(".ln_") != std::string::npos) {
        for (int64_t i = 0; i < cnt; ++i) d[i] = 1.0f;
      } else {
        const float std = ends_with("c_proj.weight") ? proj_std : 0.02f;
        rng.fill(d, cnt, 0.0f, std);
      }
    };
    if (p->quantized()) {
      std::vector<float> host(static_cast<size_t>(p->numel()));
      fill(host.data(), p->numel());
      quantize_weight_into(*p->quant, host.data(), p->name);
    } else {
      fill_values(*p, fill);
    }
  }
}

const Tensor& GPT2::logits() const {
  SNUG_CHECK(saved_ && saved_->probs.defined(), "GPT2::logits(): no forward pass has run");
  return saved_->probs;
}

void GPT2::free_activations() {
  saved_.reset();
  free_compute_weights();
  grad_acc_.clear();
}

void GPT2::zero_grad() {
  for (Parameter* p : params_) p->free_grad();
}

void GPT2::set_checkpointing(const CheckpointConfig& c) {
  SNUG_CHECK(c.policy == CheckpointPolicy::none || c.policy == CheckpointPolicy::selective ||
                 c.every_k >= 1,
             "gradient checkpointing: segment length must be >= 1, got ", c.every_k);
  ckpt_ = c;
}

namespace {
// out, mean, rstd = LayerNorm(in) over the last dimension, with parameters w, b.
void layernorm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
               const Parameter* w, const Parameter* b, float eps) {
  const int64_t C = in.dim(-1);
  K::layernorm_forward(out.data<float>(), mean.data<float>(), rstd.data<float>(), in.data<float>(),
                       VectorF32(w).get(), VectorF32(b).get(), in.numel() / C, C, eps);
}

// a.atty (and a.lse or a.att) from a.qkv.
void run_attention(GPT2LayerActivations& a, AttentionImpl impl, int64_t NH) {
  const int64_t B = a.qkv.dim(0), T = a.qkv.dim(1), C = a.qkv.dim(2) / 3;
  if (impl == AttentionImpl::flash)
    K::flash_attention_forward(a.atty.data<float>(), a.lse.data<float>(), a.qkv.data<float>(), B, T,
                               C, NH);
  else
    K::attention_forward(a.atty.data<float>(), a.att.data<float>(), a.qkv.data<float>(), B, T, C,
                         NH);
}
}  // namespace

// Runs layer l on input x, allocating and filling every tensor of `a` (category activations;
// under mixed precision the tensors kept in 16 bits are fp32 temporaries until compact()).
void GPT2::layer_forward(size_t l, const Tensor& x, GPT2LayerActivations& a) {
  const Layer& w = layers_[l];
  const int64_t B = x.dim(0), T = x.dim(1), C = cfg_.n_embd, NH = cfg_.n_head, N = B * T;
  const bool real = !dev_->is_meta();
  const float eps = cfg_.layer_norm_epsilon;
  auto act = [&](const Shape& sh) {
    return Tensor::empty(sh, DType::f32, Category::activations, *dev_);
  };
  const Category half_cat = low_precision() ? Category::temporary : Category::activations;
  auto work = [&](const Shape& sh) { return Tensor::empty(sh, DType::f32, half_cat, *dev_); };
  // out(N,OC) = 16-bit-rounded GEMM of in(N,IC) with parameter wp, plus bias, plus the LoRA
  // bypass of Linear `slot` when it has one.
  auto linear = [&](const Tensor& out, const Tensor& in, const Parameter* wp, const Parameter* bp,
                    int64_t IC, int64_t OC, int slot) {
    {
      Tensor scratch;
      if (bf16_gemm(wp)) {
        const uint16_t* W = gemm_weight16(wp, scratch);
        const Tensor in16 = to_bf16(in);
        if (real)
          K::linear_forward_bf16(out.data<float>(), in16.data_u16(), W, VectorF32(bp).get(), N, IC,
                                 OC);
      } else {
        const float* W = gemm_weight(wp, scratch);
        if (real)
          K::linear_forward(out.data<float>(), in.data<float>(), W, VectorF32(bp).get(), N, IC, OC);
      }
    }
    if (const LoraAdapter* ad = lora_at(l, slot)) lora_forward(*ad, in, out, a);
    round_half(out);
  };
  a.ln1 = work({B, T, C});
  a.ln1_mean = act({B, T});
  a.ln1_rstd = act({B, T});
  a.qkv = work({B, T, 3 * C});
  const bool flash = attention_ == AttentionImpl::flash;
  if (flash)
    a.lse = act({B, NH, T});
  else
    a.att = work({B, NH, T, T});
  a.atty = work({B, T, C});
  if (real) layernorm(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1_w, w.ln1_b, eps);
  round_gemm_input(a.ln1);
  linear(a.qkv, a.ln1, w.qkv_w, w.qkv_b, C, 3 * C, 0);
  if (real) run_attention(a, attention_, NH);
  round_half(a.atty);
  round_half(a.att);
  a.res2 = act({B, T, C});
  linear(a.res2, a.atty, w.attproj_w, w.attproj_b, C, C, 1);
  if (real) K::add(a.res2.data<float>(), a.res2.data<float>(), x.data<float>(), N * C);
  a.ln2 = work({B, T, C});
  a.ln2_mean = act({B, T});
  a.ln2_rstd = act({B, T});
  a.fch = work({B, T, 4 * C});
  a.fch_gelu = work({B, T, 4 * C});
  a.out = act({B, T, C});
  if (real) layernorm(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w.ln2_w, w.ln2_b, eps);
  round_gemm_input(a.ln2);
  linear(a.fch, a.ln2, w.fc_w, w.fc_b, C, 4 * C, 2);
  if (real) K::gelu_forward(a.fch_gelu.data<float>(), a.fch.data<float>(), N * 4 * C);
  round_gemm_input(a.fch_gelu);
  linear(a.out, a.fch_gelu, w.fcproj_w, w.fcproj_b, 4 * C, C, 3);
  if (real) K::add(a.out.data<float>(), a.out.data<float>(), a.res2.data<float>(), N * C);
}

// Selective checkpointing: recompute the cheap tensors dropped after forward (the two
// LayerNorm outputs, the attention probabilities, GELU's output) from the kept GEMM outputs.
// Same kernels on the same inputs: bitwise the values forward computed. Expects the kept
// tensors in fp32 (widen() first under mixed precision).
void GPT2::recompute_selective(size_t l, const Tensor& x, GPT2LayerActivations& a) {
  const Layer& w = layers_[l];
  const int64_t B = x.dim(0), T = x.dim(1), C = cfg_.n_embd, NH = cfg_.n_head, N = B * T;
  const bool real = !dev_->is_meta();
  const float eps = cfg_.layer_norm_epsilon;
  const Category half_cat = low_precision() ? Category::temporary : Category::activations;
  auto work = [&](const Shape& sh) { return Tensor::empty(sh, DType::f32, half_cat, *dev_); };
  a.ln1 = work({B, T, C});
  const bool naive = attention_ == AttentionImpl::naive;
  if (naive) a.att = work({B, NH, T, T});
  a.ln2 = work({B, T, C});
  a.fch_gelu = work({B, T, 4 * C});
  if (!real) return;
  layernorm(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1_w, w.ln1_b, eps);
  round_gemm_input(a.ln1);
  // Naive attention's probabilities: the same call rewrites atty with identical values, so the
  // kept copy serves as its output. (Flash keeps only lse, which backward uses as it is.)
  if (naive) {
    run_attention(a, attention_, NH);
    round_half(a.att);
    round_half(a.atty);
  }
  layernorm(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w.ln2_w, w.ln2_b, eps);
  round_gemm_input(a.ln2);
  K::gelu_forward(a.fch_gelu.data<float>(), a.fch.data<float>(), N * 4 * C);
  round_gemm_input(a.fch_gelu);
}

namespace {
// Keeps only what selective checkpointing needs: GEMM outputs, the attention output, the
// residual stream and the LayerNorm statistics.
void drop_selective(GPT2LayerActivations& a) {
  a.ln1.reset();
  a.att.reset();
  a.ln2.reset();
  a.fch_gelu.reset();
}
void drop_all_but_out(GPT2LayerActivations& a) {
  Tensor out = std::move(a.out);
  a = {};
  a.out = std::move(out);
}
}  // namespace

bool GPT2::segment_end(size_t l) const {
  const size_t L = layers_.size();
  if (l + 1 == L) return true;
  const auto k = static_cast<size_t>(ckpt_.every_k);
  return (l + 1) % k == 0;
}

float GPT2::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                    bool for_backward, float loss_scale) {
  const int64_t V = cfg_.vocab_size, C = cfg_.n_embd, N = B * T;
  SNUG_CHECK(B > 0 && T > 0, "forward: batch ", B, " and sequence length ", T, " must be positive");
  SNUG_CHECK(T <= cfg_.n_positions, "forward: sequence length ", T, " exceeds the model's ",
             cfg_.n_positions, " positions (n_positions of ", cfg_.name, ")");
  saved_.reset();  // a new forward replaces whatever an earlier one kept
  training_forward_ = for_backward;
  if (for_backward) ++forward_count_;  // keys this forward's dropout masks and NEFTune noise
  MemoryPool& pool = dev_->pool();
  const bool real = !dev_->is_meta();
  const float eps = cfg_.layer_norm_epsilon;
  auto act = [&](const Shape& sh) {
    return Tensor::empty(sh, DType::f32, Category::activations, *dev_);
  };

  if (low_precision()) {
    pool.set_phase("forward cast weights");
    cast_compute_weights();  // as torch.autocast: fresh 16-bit copies of the weights per forward
  }
  auto s = std::make_unique<GPT2Saved>();
  s->B = B;
  s->T = T;
  s->has_targets = targets != nullptr;
  pool.set_phase("forward embeddings");
  s->tokens = Tensor::empty({B, T}, DType::i32, Category::input_data, *dev_);
  if (targets) s->targets = Tensor::empty({B, T}, DType::i32, Category::input_data, *dev_);
  if (real) {
    int32_t* tk = s->tokens.data<int32_t>();
    for (int64_t i = 0; i < N; ++i) {
      SNUG_CHECK(tokens[i] >= 0 && tokens[i] < V, "forward: token id ", tokens[i], " at position ",
                 i, " is outside the vocabulary [0, ", V, ")");
      tk[i] = tokens[i];
    }
    if (targets) {
      int32_t* tg = s->targets.data<int32_t>();
      for (int64_t i = 0; i < N; ++i) {
        SNUG_CHECK(targets[i] < V, "forward: target id ", targets[i], " at position ", i,
                   " is outside the vocabulary [0, ", V, ")");
        tg[i] = targets[i];
      }
    }
  }
  s->encoded = act({B, T, C});
  {
    Tensor wte_s, wpe_s;  // --bf16-full: the embeddings widened to fp32 (temporary)
    const float* wte = param_f32(wte_, wte_s);
    const float* wpe = param_f32(wpe_, wpe_s);
    if (real)
      K::embedding_forward(s->encoded.data<float>(), s->tokens.data<int32_t>(), wte, wpe, B, T, C);
  }
  if (real && for_backward && neftune_alpha_ > 0) add_neftune_noise(s->encoded);

  const bool segments = for_backward && (ckpt_.policy == CheckpointPolicy::every_layer ||
                                         ckpt_.policy == CheckpointPolicy::every_k);
  s->layers.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    GPT2LayerActivations& a = s->layers[l];
    const Tensor& x = l == 0 ? s->encoded : s->layers[l - 1].out;
    std::string phase = "forward h.";
    phase += std::to_string(l);
    pool.set_phase(phase);
    layer_forward(l, x, a);
    if (!for_backward) {
      // Inference: only the running residual stream has to survive the layer.
      drop_all_but_out(a);
      if (l > 0) s->layers[l - 1] = {};
    } else if (segments) {
      // Keep only the inputs of segments (outputs of segment ends); everything else is
      // recomputed segment by segment in backward.
      drop_all_but_out(a);
      if (l > 0 && !segment_end(l - 1)) s->layers[l - 1] = {};
    } else if (ckpt_.policy == CheckpointPolicy::selective) {
      drop_selective(a);
    }
    if (for_backward) compact(a);
  }

  pool.set_phase("forward lm_head");
  const Tensor& xL = s->layers.back().out;
  s->lnf = act({B, T, C});
  s->lnf_mean = act({B, T});
  s->lnf_rstd = act({B, T});
  if (real) layernorm(s->lnf, s->lnf_mean, s->lnf_rstd, xL, lnf_w_, lnf_b_, eps);
  round_half(s->lnf);  // the LM head GEMM's input
  if (!for_backward) s->layers.clear();

  valid_targets_ = 0;
  if (targets) {
    if (real) {
      const int32_t* tg = s->targets.data<int32_t>();
      for (int64_t i = 0; i < N; ++i) valid_targets_ += tg[i] >= 0 ? 1 : 0;
    } else {
      valid_targets_ = N;
    }
  }
  s->loss_scale = loss_scale;
  float loss = 0.0f;
  if (targets && logits_ == LogitsMode::chunked) {
    // Fused LM head + cross-entropy, chunk by chunk: the (B,T,V) logits never exist. When
    // training, the head's gradient is produced in the same pass (dlnf kept for backward, dwte
    // accumulated now), so no logits are recomputed; backward must use the same loss_scale.
    const int64_t chunk = K::lm_head_default_chunk(N, V);
    Tensor scratch = Tensor::empty({K::lm_head_scratch_floats(N, V, chunk)}, DType::f32,
                                   Category::temporary, *dev_);
    Tensor wte_scratch, lnf16;
    const bool head16 = bf16_gemm(wte_);
    const float* wte = head16 ? nullptr : gemm_weight(wte_, wte_scratch);
    const uint16_t* wte16 = head16 ? gemm_weight16(wte_, wte_scratch) : nullptr;
    if (head16) lnf16 = to_bf16(s->lnf);
    float* dwte = nullptr;
    // With a grad-ready hook, wte's head gradient is recomputed at the end of backward instead.
    const bool defer_wte = for_backward && grad_ready_ && wte_->requires_grad;
    if (for_backward) {
      s->dlnf = Tensor::empty({B, T, C}, DType::f32, Category::temporary, *dev_);
      if (wte_->requires_grad && !defer_wte) dwte = grad_buffer(wte_);
    }
    if (real) {
      const float scale =
          valid_targets_ > 0 ? loss_scale / static_cast<float>(valid_targets_) : 0.f;
      float* dlnf = for_backward ? s->dlnf.data<float>() : nullptr;
      if (!for_backward) dwte = nullptr;
      const double sum = head16 ? K::lm_head_xent_bf16(nullptr, dlnf, dwte, lnf16.data_u16(), wte16,
                                                       s->targets.data<int32_t>(), N, C, V, scale,
                                                       scratch.data<float>(), chunk)
                                : K::lm_head_xent(nullptr, dlnf, dwte, s->lnf.data<float>(), wte,
                                                  s->targets.data<int32_t>(), N, C, V, scale,
                                                  scratch.data<float>(), chunk);
      loss =
          valid_targets_ > 0 ? static_cast<float>(sum / static_cast<double>(valid_targets_)) : 0.0f;
    }
    flush_grads();  // --bf16-full: wte's head gradient into its bf16 gradient
    if (for_backward) round_half(s->dlnf);  // the head GEMM's input gradient, 16-bit
    // ln_f's backward needs its input and statistics, not its output; the deferred head
    // gradient needs the output at the end of backward.
    if (!defer_wte) s->lnf.reset();
  } else {
    s->probs = act({B, T, V});
    {
      // logits(N,V) = lnf(N,C) @ wte(V,C)^T (tied head); fp32 logits from a 16-bit GEMM output
      // under mixed precision (Hugging Face upcasts the logits for the loss).
      Tensor wte_scratch;
      if (bf16_gemm(wte_)) {
        const uint16_t* wte = gemm_weight16(wte_, wte_scratch);
        const Tensor lnf16 = to_bf16(s->lnf);
        if (real)
          K::gemm_bf16(false, true, N, V, C, 1.0f, lnf16.data_u16(), C, wte, C, 0.0f,
                       s->probs.data<float>(), V);
      } else {
        const float* wte = gemm_weight(wte_, wte_scratch);
        if (real)
          K::gemm_f32(false, true, N, V, C, 1.0f, s->lnf.data<float>(), C, wte, C, 0.0f,
                      s->probs.data<float>(), V);
      }
      round_half(s->probs);
    }
    if (targets) {
      s->losses = act({B, T});
      if (real) {
        const double sum =
            K::softmax_xent_forward(s->losses.data<float>(), s->probs.data<float>(),
                                    s->probs.data<float>(), s->targets.data<int32_t>(), N, V);
        loss = valid_targets_ > 0 ? static_cast<float>(sum / static_cast<double>(valid_targets_))
                                  : 0.0f;
      }
    }
  }
  if (!for_backward) free_compute_weights();
  pool.set_phase("forward done");
  saved_ = std::move(s);
  return loss;
}

void GPT2::backward(float loss_scale) {
  SNUG_CHECK(saved_ && saved_->has_targets && !saved_->layers.empty(),
             "backward: needs a forward pass with targets and for_backward=true before it");
  GPT2Saved& s = *saved_;
  const int64_t B = s.B, T = s.T, V = cfg_.vocab_size, C = cfg_.n_embd, NH = cfg_.n_head;
  const int64_t N = B * T;
  MemoryPool& pool = dev_->pool();
  const bool real = !dev_->is_meta();
  auto tmp = [&](const Shape& sh) {
    return Tensor::empty(sh, DType::f32, Category::temporary, *dev_);
  };
  // Gradient buffer of a parameter, or nullptr when it is frozen (its dW work is skipped).
  auto grad = [&](Parameter* p) -> float* {
    if (!p->requires_grad) return nullptr;
    float* g = grad_buffer(p);  // fp32: the gradient, or an accumulator under --bf16-full
    return real ? g : nullptr;
  };
  auto f = [&](const Tensor& t) { return real ? t.data<float>() : nullptr; };
  // The gradient a 16-bit GEMM receives for its output: g itself in fp32, else a 16-bit-rounded
  // copy (g goes on in fp32 along the residual stream).
  // On the bf16 GEMM path (and no LoRA bypass, which reads it in fp32) that copy is bf16.
  auto half_grad = [&](const Tensor& g, const Parameter* w, bool lora) {
    if (!low_precision()) return g;
    if (bf16_gemm(w) && !lora) return to_bf16(g);
    Tensor h = tmp(g.shape());
    if (real) std::copy_n(g.data<float>(), g.numel(), h.data<float>());
    round_half(h);
    return h;
  };
  // dinp = dout W^T, dW += in^T dout, db += column sums of dout for the Linear with weight wp,
  // on gemm_bf16 when bf16_gemm(wp) (dout and in as bf16, packed when they are fp32).
  auto linear_backward = [&](const Tensor& dinp, float* dw, float* db, const Tensor& dout,
                             const Tensor& in, const Parameter* wp, int64_t IC, int64_t OC) {
    Tensor ws;
    if (bf16_gemm(wp)) {
      const uint16_t* W = gemm_weight16(wp, ws);
      const Tensor dout16 = to_bf16(dout);
      const Tensor in16 = wp->requires_grad ? to_bf16(in) : Tensor();  // frozen: no dW
      if (real)
        K::linear_backward_bf16(f(dinp), dw, db, dout16.data_u16(), dw ? in16.data_u16() : nullptr,
                                W, N, IC, OC);
    } else {
      const float* W = gemm_weight(wp, ws);
      if (real) K::linear_backward(f(dinp), dw, db, f(dout), f(in), W, N, IC, OC);
    }
  };

  // Grad-ready hook (set_grad_ready_hook): hands over a parameter whose gradient is final.
  auto ready = [&](Parameter* p) {
    if (grad_ready_ && p->requires_grad && p->grad.defined()) grad_ready_(*p);
  };
  // Chunked head whose wte gradient forward left to the end of backward (it kept lnf).
  const bool head_deferred = s.dlnf.defined() && s.lnf.defined();

  pool.set_phase("backward lm_head");
  SNUG_CHECK(!s.dlnf.defined() || loss_scale == s.loss_scale, "backward: loss_scale ", loss_scale,
             " differs from the ", s.loss_scale,
             " given to forward (the chunked LM head computes its gradient in forward)");
  Tensor dres = tmp({B, T, C});  // gradient of the residual stream, reused layer to layer
  {
    Tensor dlnf;
    if (s.dlnf.defined()) {
      dlnf = std::move(s.dlnf);
    } else {
      // dlogits, in place of the probabilities.
      const float scale =
          valid_targets_ > 0 ? loss_scale / static_cast<float>(valid_targets_) : 0.f;
      if (real)
        K::softmax_xent_backward(f(s.probs), f(s.probs), s.targets.data<int32_t>(), scale, N, V);
      s.losses.reset();
      dlnf = tmp({B, T, C});
      float* dwte = grad(wte_);
      Tensor wte_scratch;
      // dlnf(N,C) = dlogits(N,V) @ wte(V,C);  dwte(V,C) += dlogits^T @ lnf
      if (bf16_gemm(wte_)) {
        const uint16_t* wte = gemm_weight16(wte_, wte_scratch);
        const Tensor dlogits16 = to_bf16(s.probs), lnf16 = to_bf16(s.lnf);
        if (real) {
          K::gemm_bf16(false, false, N, C, V, 1.0f, dlogits16.data_u16(), V, wte, C, 0.0f, f(dlnf),
                       C);
          if (dwte)
            K::gemm_bf16(true, false, V, C, N, 1.0f, dlogits16.data_u16(), V, lnf16.data_u16(), C,
                         1.0f, dwte, C);
        }
      } else {
        const float* wte = gemm_weight(wte_, wte_scratch);
        if (real) {
          K::gemm_f32(false, false, N, C, V, 1.0f, f(s.probs), V, wte, C, 0.0f, f(dlnf), C);
          if (dwte)
            K::gemm_f32(true, false, V, C, N, 1.0f, f(s.probs), V, f(s.lnf), C, 1.0f, dwte, C);
        }
      }
      s.probs.reset();
      round_half(dlnf);
    }
    if (real) {
      dres.zero_();
      K::layernorm_backward(f(dres), grad(lnf_w_), grad(lnf_b_), f(dlnf), f(s.layers.back().out),
                            VectorF32(lnf_w_).get(), f(s.lnf_mean), f(s.lnf_rstd), N, C);
    } else {
      grad(lnf_w_);
      grad(lnf_b_);
    }
    if (!head_deferred) s.lnf.reset();
    s.lnf_mean.reset();
    s.lnf_rstd.reset();
  }
  flush_grads();  // --bf16-full: fp32 accumulators into the bf16 gradients (no-op otherwise)
  ready(lnf_w_);
  ready(lnf_b_);

  for (size_t li = layers_.size(); li-- > 0;) {
    const Layer& w = layers_[li];
    GPT2LayerActivations& a = s.layers[li];
    const Tensor& x = li == 0 ? s.encoded : s.layers[li - 1].out;
    if (!a.qkv.defined()) {
      // Segment checkpointing: recompute this layer's segment from its saved input.
      std::string rphase = "recompute h.";
      rphase += std::to_string(li);
      pool.set_phase(rphase);
      const size_t k = static_cast<size_t>(ckpt_.every_k);
      a.out.reset();  // consumed already; recomputing the segment reallocates it
      for (size_t j = li - li % k; j <= li; ++j)
        layer_forward(j, j == 0 ? s.encoded : s.layers[j - 1].out, s.layers[j]);
      // The segment's earlier layers wait for their own backward in 16 bits, as forward kept them.
      for (size_t j = li - li % k; j < li; ++j) compact(s.layers[j]);
    } else {
      widen(a);  // 16-bit saved tensors back to fp32 temporaries (no-op in fp32)
      if (!a.ln1.defined()) {
        std::string rphase = "recompute h.";
        rphase += std::to_string(li);
        pool.set_phase(rphase);
        recompute_selective(li, x, a);
      }
    }
    std::string phase = "backward h.";
    phase += std::to_string(li);
    pool.set_phase(phase);
    a.out.reset();  // its gradient is dres; the value itself is no longer needed
    {
      // MLP: out = res2 + fcproj(gelu(fc(ln2(res2))))
      Tensor dfch = tmp({B, T, 4 * C});
      float* dw = grad(w.fcproj_w);
      float* db = grad(w.fcproj_b);
      {
        const LoraAdapter* ad = lora_at(li, 3);
        const Tensor dout = half_grad(dres, w.fcproj_w, ad != nullptr);
        linear_backward(dfch, dw, db, dout, a.fch_gelu, w.fcproj_w, 4 * C, C);
        if (ad) lora_backward(*ad, dout, a.fch_gelu, dfch, a, grad(ad->A), grad(ad->B));
      }
      a.fch_gelu.reset();
      if (real) K::gelu_backward(f(dfch), f(a.fch), f(dfch), N * 4 * C);
      round_half(dfch);
      a.fch.reset();
      Tensor dln2 = tmp({B, T, C});
      dw = grad(w.fc_w);
      db = grad(w.fc_b);
      {
        linear_backward(dln2, dw, db, dfch, a.ln2, w.fc_w, C, 4 * C);
        if (const LoraAdapter* ad = lora_at(li, 2))
          lora_backward(*ad, dfch, a.ln2, dln2, a, grad(ad->A), grad(ad->B));
      }
      round_half(dln2);
      dfch.reset();
      a.ln2.reset();
      dw = grad(w.ln2_w);
      db = grad(w.ln2_b);
      if (real)
        K::layernorm_backward(f(dres), dw, db, f(dln2), f(a.res2), VectorF32(w.ln2_w).get(),
                              f(a.ln2_mean), f(a.ln2_rstd), N, C);
      a.res2.reset();
      a.ln2_mean.reset();
      a.ln2_rstd.reset();
    }
    {
      // Attention: res2 = x + c_proj(attn(c_attn(ln1(x))))
      Tensor datty = tmp({B, T, C});
      float* dw = grad(w.attproj_w);
      float* db = grad(w.attproj_b);
      {
        const LoraAdapter* ad = lora_at(li, 1);
        const Tensor dout = half_grad(dres, w.attproj_w, ad != nullptr);
        linear_backward(datty, dw, db, dout, a.atty, w.attproj_w, C, C);
        if (ad) lora_backward(*ad, dout, a.atty, datty, a, grad(ad->A), grad(ad->B));
      }
      round_half(datty);
      Tensor dqkv = tmp({B, T, 3 * C});
      if (real) {
        if (attention_ == AttentionImpl::flash)
          K::flash_attention_backward(f(dqkv), f(datty), f(a.qkv), f(a.atty), f(a.lse), B, T, C,
                                      NH);
        else
          K::attention_backward(f(dqkv), f(datty), f(a.qkv), f(a.att), B, T, C, NH);
      }
      a.atty.reset();
      a.att.reset();
      a.lse.reset();
      datty.reset();
      round_half(dqkv);
      Tensor dln1 = tmp({B, T, C});
      dw = grad(w.qkv_w);
      db = grad(w.qkv_b);
      {
        linear_backward(dln1, dw, db, dqkv, a.ln1, w.qkv_w, C, 3 * C);
        if (const LoraAdapter* ad = lora_at(li, 0))
          lora_backward(*ad, dqkv, a.ln1, dln1, a, grad(ad->A), grad(ad->B));
      }
      round_half(dln1);
      dqkv.reset();
      a.qkv.reset();
      a.ln1.reset();
      dw = grad(w.ln1_w);
      db = grad(w.ln1_b);
      if (real)
        K::layernorm_backward(f(dres), dw, db, f(dln1), f(x), VectorF32(w.ln1_w).get(),
                              f(a.ln1_mean), f(a.ln1_rstd), N, C);
      a.ln1_mean.reset();
      a.ln1_rstd.reset();
    }
    flush_grads();
    for (Parameter* p : {w.ln1_w, w.ln1_b, w.qkv_w, w.qkv_b, w.attproj_w, w.attproj_b, w.ln2_w,
                         w.ln2_b, w.fc_w, w.fc_b, w.fcproj_w, w.fcproj_b})
      ready(p);
    for (int slot = 0; slot < 4; ++slot)
      if (const LoraAdapter* ad = lora_at(li, slot)) {
        ready(ad->A);
        ready(ad->B);
      }
  }

  if (head_deferred) {
    // wte's LM-head gradient, dwte(V,C) += dlogits^T @ lnf, from logits recomputed chunk by
    // chunk (the same kernel and inputs as forward: the same values forward would have added).
    pool.set_phase("backward lm_head deferred");
    const int64_t chunk = K::lm_head_default_chunk(N, V);
    Tensor scratch = Tensor::empty({K::lm_head_scratch_floats(N, V, chunk)}, DType::f32,
                                   Category::temporary, *dev_);
    Tensor wte_scratch, lnf16;
    const bool head16 = bf16_gemm(wte_);
    const float* wte = head16 ? nullptr : gemm_weight(wte_, wte_scratch);
    const uint16_t* wte16 = head16 ? gemm_weight16(wte_, wte_scratch) : nullptr;
    if (head16) lnf16 = to_bf16(s.lnf);
    float* dwte = grad(wte_);
    if (real) {
      const float scale =
          valid_targets_ > 0 ? s.loss_scale / static_cast<float>(valid_targets_) : 0.f;
      if (head16)
        K::lm_head_xent_bf16(nullptr, nullptr, dwte, lnf16.data_u16(), wte16,
                             s.targets.data<int32_t>(), N, C, V, scale, scratch.data<float>(),
                             chunk);
      else
        K::lm_head_xent(nullptr, nullptr, dwte, f(s.lnf), wte, s.targets.data<int32_t>(), N, C, V,
                        scale, scratch.data<float>(), chunk);
    }
    s.lnf.reset();
    flush_grads();
  }

  pool.set_phase("backward embeddings");
  {
    float* dwte = grad(wte_);
    float* dwpe = grad(wpe_);
    if (real && (dwte || dwpe))
      K::embedding_backward(dwte, dwpe, f(dres), s.tokens.data<int32_t>(), B, T, C);
  }
  flush_grads();
  ready(wpe_);
  ready(wte_);
  dres.reset();
  saved_.reset();
  free_compute_weights();
  pool.set_phase("backward done");
}

}  // namespace snug
