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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "models/gpt2_config.h"
#include "nn/parameter.h"

namespace snug {

// Gradient checkpointing (activation recomputation), as torch.utils.checkpoint applies it:
//   every_layer  keep each layer's input only, recompute the layer in backward (HF's default);
//   every_k      keep the input of every k-th layer, recompute k layers at a time ("sqrt" picks
//                k = ceil(sqrt(L)), about sqrt(L) checkpoints);
//   selective    keep the GEMM outputs and recompute the cheap ops (LayerNorms, attention
//                softmax, GELU) - Korthikanti et al. 2022.
// Results are bitwise identical to no checkpointing: the same kernels recompute the same values.
enum class CheckpointPolicy { none, every_layer, every_k, selective };
struct CheckpointConfig {
  CheckpointPolicy policy = CheckpointPolicy::none;
  int64_t every_k = 1;  // segment length in layers (every_layer: 1)
};
// "every-layer", "every-k:K", "sqrt", "selective" (and "none"); throws naming --checkpoint-policy.
CheckpointConfig parse_checkpoint_policy(const std::string& text, int64_t n_layer);

// Attention implementation. flash: tiled with an online softmax, saving only a per-row
// log-sum-exp (memory linear in T; docs/attention.md). naive: materializes the (B,NH,T,T)
// probabilities, the reference.
enum class AttentionImpl { flash, naive };
AttentionImpl parse_attention_impl(const std::string& text);  // "flash" | "naive"

// LM head + cross-entropy. chunked: logits computed and consumed a chunk of rows at a time
// (about 32 MiB of scratch), the head's gradient produced in the same pass; the (B,T,V) logits
// never exist. full: materialize the logits (needed to read them, e.g. for generation).
enum class LogitsMode { chunked, full };
LogitsMode parse_logits_mode(const std::string& text);  // "chunked" | "full"

struct GPT2Saved;
struct GPT2LayerActivations;

class GPT2 {
 public:
  // Allocates every parameter (category weights) on `dev`, uninitialized; call init_weights()
  // or load values by name.
  GPT2(const GPT2Config& cfg, Device& dev);
  ~GPT2();
  GPT2(const GPT2&) = delete;
  GPT2& operator=(const GPT2&) = delete;

  const GPT2Config& config() const { return cfg_; }
  Device& device() const { return *dev_; }

  // Every parameter in Hugging Face named_parameters() order.
  const ParameterList& parameters() const { return params_; }
  // nullptr when no parameter has that name.
  Parameter* find(const std::string& name) const;

  // GPT-2's initialization as in Hugging Face (_init_weights): normal(0, 0.02) for embeddings and
  // linear weights, c_proj weights scaled by 1/sqrt(2 * n_layer), biases 0, LayerNorm 1/0.
  // Deterministic for a seed on every platform. No-op on meta.
  void init_weights(uint64_t seed);

  // tokens, targets: (B,T) host arrays; targets < 0 are ignored (HF's -100). T <= n_positions.
  // Returns the mean cross-entropy over the valid targets (0 on meta, NaN never hidden).
  // With targets == nullptr only the logits are computed and kept (see logits()).
  // Saves what backward needs unless `for_backward` is false. `loss_scale` must be the value
  // the following backward() gets: with chunked logits the LM head's gradient (including
  // wte's) is computed during forward.
  float forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                bool for_backward = true, float loss_scale = 1.0f);
  // Number of valid (non-ignored) targets in the last forward.
  int64_t last_valid_targets() const { return valid_targets_; }
  // (B,T,V) logits of the last forward without targets (probabilities when targets were given).
  const Tensor& logits() const;

  // Accumulates loss_scale * d(mean loss)/d(param) into the gradients of parameters with
  // requires_grad (gradient accumulation divides by the number of micro-steps through
  // loss_scale). Frees the saved activations. Requires a preceding forward with for_backward.
  void backward(float loss_scale = 1.0f);

  // Drops every saved activation (e.g. after an evaluation forward).
  void free_activations();

  // Frees every parameter gradient (zero_grad(set_to_none=True)).
  void zero_grad();

  void set_attention(AttentionImpl a) { attention_ = a; }
  void set_logits_mode(LogitsMode m) { logits_ = m; }
  LogitsMode logits_mode() const { return logits_; }
  AttentionImpl attention() const { return attention_; }
  void set_checkpointing(const CheckpointConfig& c);
  const CheckpointConfig& checkpointing() const { return ckpt_; }

 private:
  struct Layer;
  void add_param(const std::string& name, const Shape& shape, bool decay);
  void layer_forward(size_t l, const Tensor& x, GPT2LayerActivations& a);
  void recompute_selective(size_t l, const Tensor& x, GPT2LayerActivations& a);
  bool segment_end(size_t l) const;

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
  int64_t valid_targets_ = 0;
};

}  // namespace snug
