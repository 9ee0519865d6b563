// A transformer layer: the residual wiring of two norms, an Attention and an MLP, pre-norm.
//   sequential  h = x + attn(norm1(x));  out = h + mlp(norm2(h))          GPT-2, Llama
//   parallel    out = x + attn(norm1(x)) + mlp(norm2(x))                  GPT-NeoX
//
// Saved, for N = B*T rows and C hidden:
//   n1, n2       NormSaved: the norms' inputs (x; h or x) and statistics
//   n1/n2 outputs (N,C) live in the Attention/MLP Saveds as their projections' input (16-bit
//                under mixed precision, like every tensor a 16-bit op produces)
//   attn, mlp    the blocks' own Saveds
//   h (N,C)      sequential: the residual stream between the blocks (norm2's input, in n2)
// The layer's output is not kept here: the next layer (or the final norm) keeps it as its input.
//
// Backward works on the residual stream's gradient in place (dres: d/d(out) in, d/dx out), as
// GPT-2 does, so one (B,T,C) temporary serves all layers.
// Later steps (docs/design.md): hidden dropout (post-norm with dropout is nn/encoder_layer.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/norm.h"

namespace snug::nn {

// The order in which a layer's parameters are registered (= HF named_parameters order).
enum class LayerParamOrder {
  interleaved,   // norm1, attn, norm2, mlp    (GPT-2)
  norms_first,   // norm1, norm2, attn, mlp    (GPT-NeoX)
  blocks_first,  // attn, mlp, norm1, norm2    (Llama, Mistral, Qwen2)
};

struct DecoderLayerConfig {
  NormKind norm = NormKind::rms;
  float norm_eps = 1e-6f;
  bool parallel_residual = false;
  AttentionConfig attn;
  MLPConfig mlp;
  LayerParamOrder order = LayerParamOrder::blocks_first;
  std::string norm1_name = "input_layernorm", norm2_name = "post_attention_layernorm";
  std::string attn_name = "self_attn", mlp_name = "mlp";
};

class DecoderLayer {
 public:
  struct Saved {
    NormSaved n1, n2;
    Attention::Saved attn;
    MLP::Saved mlp;
  };

  // prefix: e.g. "model.layers.0".
  DecoderLayer(ParameterStore& ps, const std::string& prefix, const DecoderLayerConfig& cfg);

  // Returns out (B,T,C), category activations, from x (B,T,C). With `kv` (generation), attention
  // reads and extends the KV cache (Attention::forward_cached) and keeps nothing in s.attn.
  Tensor forward(const Tensor& x, Saved& s, const KVSlot* kv = nullptr) const;
  // dres (B,T,C): d/d(out) on entry, d/dx on return. Releases s.
  void backward(const Tensor& dres, Saved& s) const;

  // Mixed precision (nn/run_context.h): after forward the saved 16-bit tensors become 16-bit
  // activations; before backward, fp32 temporaries again.
  void compact(Saved& s) const;
  void widen(Saved& s) const;
  // Selective checkpointing: forward drops the cheap tensors (the norms' outputs, naive
  // attention's probabilities, the MLP activation's output) and backward recomputes them from
  // the kept inputs and statistics (after widen()): the same kernels on the same inputs, so
  // bitwise the values forward computed.
  void drop_selective(Saved& s) const;
  void recompute_selective(Saved& s) const;
  void set_attention(AttentionImpl k) { attn_->set_kernel(k); }
  // The layer's Linears in registration order: attention's, then the MLP's (LoRA slots).
  std::vector<Linear*> linears();

 private:
  void attention(const Tensor& n1, const Tensor& out, Saved& s, const KVSlot* kv) const;

  RunContext* ctx_;
  DecoderLayerConfig cfg_;
  std::optional<Norm> norm1_, norm2_;
  std::optional<Attention> attn_;
  std::optional<MLP> mlp_;
};

}  // namespace snug::nn
