// A post-norm transformer encoder layer (BERT's BertLayer): bidirectional attention, residual
// adds before the norms, hidden dropout after the attention output and after the MLP:
//   h1  = x + dropout(attn(x));    n1  = norm1(h1)
//   h2  = n1 + dropout(mlp(n1));   out = norm2(h2)
// Hugging Face names under the layer prefix (BERT): attention.self.{query,key,value},
// attention.output.dense, attention.output.LayerNorm, intermediate.dense, output.dense,
// output.LayerNorm; registered in that order (attention, norm1, MLP, norm2).
//
// Saved, for N = B*T rows, C hidden, I intermediate:
//   attn          Attention::Saved (its input x (N,C) is the previous layer's output, shared)
//   mask1, mask2  (N,C) uint8  the hidden dropout masks, with hidden_dropout > 0 in training
//                 (what PyTorch's dropout keeps; regenerated identically by a recomputation)
//   n1            NormSaved: in = h1 (N,C), mean, rstd; n1's output is the MLP's input (in the
//                 MLP Saved, 16-bit under mixed precision)
//   mlp           MLP::Saved
//   n2            NormSaved: in = h2 (N,C), mean, rstd
// The layer's output is not kept here: the next layer (or the head) keeps it as its input.
//
// Backward takes d/d(out) in dres and leaves d/dx there (one (B,T,C) temporary for all layers,
// plus one (B,T,C) temporary for d/dh2 inside the layer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/norm.h"

namespace snug::nn {

struct EncoderLayerConfig {
  float norm_eps = 1e-12f;
  AttentionConfig attn;  // causal = false for an encoder
  MLPConfig mlp;
  double hidden_dropout = 0.0;  // after the attention output and after the MLP (training only)
  int64_t index = 0;            // the layer's number: keys its dropout masks
  std::string attn_name = "attention", norm1_name = "attention.output.LayerNorm";
  std::string norm2_name = "output.LayerNorm";
};

// Dropout site numbers of a layer (RunContext::dropout_key); 2 is the attention probabilities.
inline constexpr int kAttentionOutputDropoutSite = 0, kMLPOutputDropoutSite = 1;

class EncoderLayer {
 public:
  struct Saved {
    Attention::Saved attn;
    NormSaved n1, n2;
    MLP::Saved mlp;
    Tensor mask1, mask2;  // (N,C) uint8, hidden dropout in training
  };

  // prefix: e.g. "bert.encoder.layer.0"; the MLP's names are under it (MLPConfig).
  EncoderLayer(ParameterStore& ps, const std::string& prefix, const EncoderLayerConfig& cfg);

  // Returns out (B,T,C), category activations, from x (B,T,C).
  Tensor forward(const Tensor& x, Saved& s) const;
  // dres (B,T,C): d/d(out) on entry, d/dx on return. Releases s.
  void backward(const Tensor& dres, Saved& s) const;

  // Mixed precision (nn/run_context.h).
  void compact(Saved& s) const;
  void widen(Saved& s) const;
  // Selective checkpointing (Korthikanti et al. 2022: keep the GEMM outputs, recompute the cheap
  // ops): forward drops norm1's output (the MLP's input; its input h1 and statistics stay in n1),
  // naive attention's probabilities, mask and dropped probabilities, and the GELU's output;
  // backward recomputes them (after widen()) with the same kernels, inputs and dropout keys, so
  // bitwise the values forward computed. The layer's input x stays: it is the residual stream
  // (the previous layer's output) and the projections' input.
  void drop_selective(Saved& s) const;
  void recompute_selective(Saved& s) const;
  void set_attention(AttentionImpl k) { attn_->set_kernel(k); }
  // Attention's Linears, then the MLP's (LoRA slots).
  std::vector<Linear*> linears();

 private:
  // x (B,T,C) = dropout(x) in place, the mask into `mask` (training with hidden_dropout > 0).
  void dropout(const Tensor& x, Tensor& mask, int site) const;
  bool drops() const;

  RunContext* ctx_;
  EncoderLayerConfig cfg_;
  std::optional<Attention> attn_;
  std::optional<Norm> norm1_, norm2_;
  std::optional<MLP> mlp_;
};

}  // namespace snug::nn
