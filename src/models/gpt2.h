// GPT-2 (OpenAI's decoder-only transformer, Hugging Face GPT2LMHeadModel layout) with a
// hand-written backward pass, on any Device.
//
// Why hand-written and not autograd: every byte the forward pass keeps for backward is a named
// Tensor in the `activations` category, and every gradient of an activation lives in `temporary`
// only while it is needed. That makes the memory report exact, and it lets the same code replay
// on the meta device (shapes only, kernels skipped) to predict a run to the byte.
//
// Parameter names are the Hugging Face state_dict keys of GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight", ...). Linear weights use HF's Conv1D layout (in, out).
// The LM head is tied to transformer.wte.weight, as in GPT-2.
//
// Lifecycle of one training micro-step:
//   float loss = model.forward(tokens, targets, B, T);  // saves activations
//   model.backward(scale);   // accumulates scale * dLoss/dparam into each Parameter::grad
//                            // (lazily allocated), frees activations as they are consumed
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/gemm_path.h"
#include "models/causal_lm.h"
#include "models/gpt2_config.h"
#include "nn/lora.h"
#include "nn/parameter.h"
#include "nn/run_options.h"
#include "quant/weight_quant.h"

namespace snug {

struct GPT2Saved;
struct GPT2LayerActivations;

class GPT2 final : public CausalLM {
 public:
  // Allocates every parameter (category weights) on `dev`, uninitialized; call init_weights()
  // or load values by name. param_dtype f32, or bf16 for --bf16-full (below).
  // With `quant` (--load-in-8bit/--load-in-4bit), the blocks' four Linear weights are stored
  // quantized (Parameter::quant: codes in weights, state in quant_state), frozen, and filled by
  // init_weights / load_gpt2_weights; every GEMM dequantizes its weight into a `temporary`.
  GPT2(const GPT2Config& cfg, Device& dev, DType param_dtype = DType::f32,
       const std::optional<WeightQuantConfig>& quant = std::nullopt);
  // The same from a resolved gpt2 ModelConfig (models/registry.h).
  GPT2(const ModelConfig& cfg, Device& dev, DType param_dtype = DType::f32,
       const std::optional<WeightQuantConfig>& quant = std::nullopt)
      : GPT2(gpt2_config(cfg), dev, param_dtype, quant) {}
  ~GPT2();
  GPT2(const GPT2&) = delete;
  GPT2& operator=(const GPT2&) = delete;

  const GPT2Config& config() const { return cfg_; }
  ModelSummary summary() const override;
  // gpt2_weights_metadata(config()) (models/gpt2_weights.h).
  std::map<std::string, std::string> weights_metadata() const override;
  Device& device() const override { return *dev_; }

  // Every parameter in Hugging Face named_parameters() order.
  const ParameterList& parameters() const override { return params_; }
  // nullptr when no parameter has that name.
  Parameter* find(const std::string& name) const override;

  // GPT-2's initialization as in Hugging Face (_init_weights): normal(0, 0.02) for embeddings and
  // linear weights, c_proj weights scaled by 1/sqrt(2 * n_layer), biases 0, LayerNorm 1/0.
  // Deterministic for a seed on every platform. No-op on meta.
  void init_weights(uint64_t seed) override;

  // tokens, targets: (B,T) host arrays; targets < 0 are ignored (HF's -100). T <= n_positions.
  // Returns the mean cross-entropy over the valid targets (0 on meta, NaN never hidden).
  // With targets == nullptr only the logits are computed and kept (see logits()).
  // Saves what backward needs unless `for_backward` is false. `loss_scale` must be the value
  // the following backward() gets: with chunked logits the LM head's gradient (including
  // wte's) is computed during forward.
  float forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                bool for_backward = true, float loss_scale = 1.0f) override;
  // Number of valid (non-ignored) targets in the last forward.
  int64_t last_valid_targets() const override { return valid_targets_; }
  // (B,T,V) logits of the last forward without targets (probabilities when targets were given).
  const Tensor& logits() const override;

  // Accumulates loss_scale * d(mean loss)/d(param) into the gradients of parameters with
  // requires_grad (gradient accumulation divides by the number of micro-steps through
  // loss_scale). Frees the saved activations. Requires a preceding forward with for_backward.
  void backward(float loss_scale = 1.0f) override;

  // Drops every saved activation (e.g. after an evaluation forward).
  void free_activations() override;

  // Frees every parameter gradient (zero_grad(set_to_none=True)).
  void zero_grad() override;

  void set_attention(AttentionImpl a) override { attention_ = a; }
  void set_logits_mode(LogitsMode m) override { logits_ = m; }
  LogitsMode logits_mode() const override { return logits_; }
  AttentionImpl attention() const override { return attention_; }
  void set_checkpointing(const CheckpointConfig& c) override;
  const CheckpointConfig& checkpointing() const override { return ckpt_; }
  // Optimizer-in-backward (LOMO, AdaLOMO; optim/lomo.h): when set, backward calls the hook with
  // each parameter whose gradient is final for this backward, as soon as it is: a layer's twelve
  // after that layer's backward, ln_f's after its backward, wpe's and then the tied wte's at the
  // very end. The hook may update the parameter and free its gradient; nothing later in this
  // backward reads either. With chunked logits and a hook, forward does not produce wte's
  // LM-head gradient: forward keeps ln_f's output (B,T,C activations) and backward recomputes
  // the head's logits chunk by chunk at the end (one more N x V x C GEMM), so wte's gradient
  // exists only at the end instead of through the whole backward. Set before forward.
  void set_grad_ready_hook(std::function<void(Parameter&)> hook) override {
    grad_ready_ = std::move(hook);
  }
  void set_compute_dtype(ComputeDType d) override { compute_ = d; }
  ComputeDType compute_dtype() const override { return compute_; }
  // Which GEMM runs the bf16 products (kernels/gemm_path.h). widen (the default): bf16 operands
  // widened into fp32 temporaries for gemm_f32. onednn_bf16: gemm_bf16 reads the bf16 compute
  // copies (or --bf16-full parameters) directly and the fp32 GEMM inputs are packed into bf16
  // temporaries; applies to --bf16/--bf16-full and to a quantized base with bf16 compute dtype
  // (whose GEMM input is then rounded to bf16, as bitsandbytes casts it). --fp16 always widens.
  void set_gemm_path(kernels::GemmPath p) override { gemm_path_ = p; }
  kernels::GemmPath gemm_path() const override { return gemm_path_; }
  // Number of parameters that get a 16-bit compute copy under --fp16/--bf16 (0 with bf16
  // parameters: the values are the compute copies).
  int64_t num_compute_copy_params() const override;

  // --bf16-full (docs/mixed-precision.md): parameters stored in bf16 (2 B/param, category
  // weights; no fp32 master and no compute copies). Kernels read them widened into fp32
  // `temporary` scratch (GEMM weights, embeddings; vectors into a small untracked buffer, see
  // gpt2_bf16_full.cpp). Gradients are bf16 too (2 B/param, category gradients): during backward
  // each parameter's gradient accumulates into an fp32 `temporary` (widened from the bf16
  // gradient of earlier micro-steps), rounded to nearest into the bf16 gradient after the layer
  // (or the head, or the embeddings) that produced it. Combine with set_compute_dtype(bf16).
  DType param_dtype() const override { return param_dtype_; }

  // LoRA (nn/lora.h): adds a trainable adapter pair to every Linear of the blocks that `cfg`
  // targets and freezes every other parameter (PEFT's get_peft_model with bias="none"). The
  // adapters join parameters() after the base ones. A from `seed`, B zero. Call once, after the
  // base weights are loaded. Throws naming --target-modules when a key matches no module.
  void add_lora(const LoraConfig& cfg, uint64_t seed) override;
  // base: the frozen Conv1D weight (in, out); slot 0 attn.c_attn, 1 attn.c_proj, 2 mlp.c_fc,
  // 3 mlp.c_proj.
  using LoraAdapter = snug::LoraAdapter;
  const std::vector<LoraAdapter>& lora_adapters() const override { return lora_; }
  const LoraConfig& lora_config() const override { return lora_cfg_; }
  // out (in, out) = base + scaling * A^T B^T: the weight PEFT's merge_and_unload writes, in
  // GPT-2's Conv1D layout. Host memory; cpu device only.
  std::vector<float> merged_weight(const LoraAdapter& a) const override;

  // Quantized base weights: dequantized values are rounded to bf16 (bnb_4bit_compute_dtype
  // bf16) before the GEMM uses them. Under --bf16/--fp16 they are rounded to that type anyway.
  void set_dequant_bf16(bool on) override { dequant_bf16_ = on; }
  // fp32 values of any parameter (dequantized when quantized, widened when bf16), into `out`
  // (p->numel() floats, host memory). cpu device only.
  void read_values(const Parameter& p, float* out) const override;

  // NEFTune (Jain et al. 2023): while training, adds U(-m, m) noise with m = alpha/sqrt(T*C) to
  // the token embeddings (Hugging Face's neftune_noise_alpha). 0 = off. Evaluation forwards are
  // untouched.
  void set_neftune_noise_alpha(double alpha) override { neftune_alpha_ = alpha; }
  // Training forwards so far; each one increments it and keys its random draws (dropout masks,
  // NEFTune noise) by it. The Trainer sets it from the step so a resumed run draws the same.
  void set_forward_count(uint64_t n) override { forward_count_ = n; }

 private:
  struct Layer;
  void add_param(const std::string& name, const Shape& shape, bool decay,
                 const std::optional<WeightQuantConfig>& quant = std::nullopt);
  void layer_forward(size_t l, const Tensor& x, GPT2LayerActivations& a);
  void recompute_selective(size_t l, const Tensor& x, GPT2LayerActivations& a);
  bool segment_end(size_t l) const;
  bool low_precision() const { return compute_ != ComputeDType::f32; }
  // x = its 16-bit value, in place (no-op in fp32 or on meta).
  void round_half(const Tensor& t) const;
  // Under the bf16 GEMM path without LoRA, the inputs of the Linear GEMMs (ln1, ln2, fch_gelu)
  // are read only by gemm_bf16 (packed, rounding to nearest even) and by compact() (the same
  // rounding): they need no rounding pass of their own, and backward keeps them in bf16.
  bool gemm_inputs_stay_bf16() const;
  void round_gemm_input(const Tensor& t) const {
    if (!gemm_inputs_stay_bf16()) round_half(t);
  }
  // Mixed precision storage of a layer's saved tensors: compact() turns the fp32 working copies
  // into 16-bit activations, widen() turns them back into fp32 temporaries for backward.
  void compact(GPT2LayerActivations& a) const;
  void widen(GPT2LayerActivations& a) const;
  // LoRA bypass of Linear `slot` of layer l: out += scaling * dropout(in) A^T B^T, keeping what
  // backward needs in `a`; and its backward, adding into din and the adapters' gradients
  // (dA/dB null when frozen or on meta).
  const LoraAdapter* lora_at(size_t l, int slot) const;
  void lora_forward(const LoraAdapter& ad, const Tensor& in, const Tensor& out,
                    GPT2LayerActivations& a);
  void lora_backward(const LoraAdapter& ad, const Tensor& dout, const Tensor& in, const Tensor& din,
                     GPT2LayerActivations& a, float* dA, float* dB);
  // NEFTune: encoded (B,T,C) += U(-m, m), m = alpha/sqrt(T*C), keyed by forward_count_.
  void add_neftune_noise(const Tensor& encoded) const;
  // Casts the GEMM weights to their 16-bit compute copies (category weights); drop with
  // free_compute_weights().
  void cast_compute_weights();
  void free_compute_weights();
  // fp32 values of a GEMM weight as the compute precision sees them: the parameter itself in
  // fp32, else its compute copy widened into `scratch` (temporary). nullptr on meta.
  const float* gemm_weight(const Parameter* p, Tensor& scratch) const;
  // Whether the GEMMs with weight p run on gemm_bf16 (see set_gemm_path).
  bool bf16_gemm(const Parameter* p) const;
  // bf16 values of GEMM weight p for gemm_bf16: the compute copy or the bf16 parameter itself,
  // or for a quantized weight its dequantized values packed into `scratch` (temporary). nullptr
  // on meta.
  const uint16_t* gemm_weight16(const Parameter* p, Tensor& scratch) const;
  // A bf16 temporary holding t's values rounded to nearest even (t's own dtype if already bf16:
  // then t itself is returned); nothing is computed on meta.
  Tensor to_bf16(const Tensor& t) const;
  // fp32 values of any parameter: the value itself when fp32 (nullptr on meta), else (bf16) its
  // values widened into `scratch`, an fp32 temporary allocated on meta too.
  const float* param_f32(const Parameter* p, Tensor& scratch) const;
  // Where backward accumulates p's gradient in fp32: p's own gradient (fp32 parameters), else a
  // temporary accumulator that flush_grads() rounds into p's bf16 gradient and frees.
  float* grad_buffer(Parameter* p);
  void flush_grads();

  GPT2Config cfg_;
  Device* dev_;
  std::vector<std::unique_ptr<Parameter>> owned_;
  ParameterList params_;
  std::vector<Layer> layers_;
  Parameter* wte_ = nullptr;
  Parameter* wpe_ = nullptr;
  Parameter* lnf_w_ = nullptr;
  Parameter* lnf_b_ = nullptr;
  std::unique_ptr<GPT2Saved> saved_;
  CheckpointConfig ckpt_;
  AttentionImpl attention_ = AttentionImpl::flash;
  LogitsMode logits_ = LogitsMode::chunked;
  ComputeDType compute_ = ComputeDType::f32;
  kernels::GemmPath gemm_path_ = kernels::GemmPath::widen;
  std::vector<std::pair<const Parameter*, Tensor>> compute_weights_;
  LoraConfig lora_cfg_;
  std::vector<LoraAdapter> lora_;
  std::vector<std::array<int, 4>> lora_slot_;  // per layer: index into lora_ or -1
  uint64_t lora_seed_ = 0;
  uint64_t forward_count_ = 0;  // training forwards so far: keys dropout masks and NEFTune noise
  bool training_forward_ = false;
  double neftune_alpha_ = 0.0;
  bool dequant_bf16_ = false;
  int64_t valid_targets_ = 0;
  std::function<void(Parameter&)> grad_ready_;
  DType param_dtype_ = DType::f32;
  std::vector<std::pair<Parameter*, Tensor>> grad_acc_;  // bf16 parameters: fp32 accumulators
};

}  // namespace snug
