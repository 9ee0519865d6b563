// GPT2's internal structures, shared by gpt2.cpp and gpt2_precision.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/gpt2.h"

namespace snug {

struct GPT2::Layer {
  Parameter *ln1_w, *ln1_b, *qkv_w, *qkv_b, *attproj_w, *attproj_b;
  Parameter *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
};

// What forward keeps for backward. Per layer l (input x_l = out of layer l-1, x_0 = embeddings):
//   ln1 (B,T,C) + mean/rstd (B,T); qkv (B,T,3C); atty (B,T,C); and for attention either
//   att (B,NH,T,T) probabilities (naive) or lse (B,NH,T) row log-sum-exps (flash);
//   res2 (B,T,C) = x_l + attn; ln2 (B,T,C) + mean/rstd; fch (B,T,4C) pre-GELU; fch_gelu (B,T,4C);
//   out (B,T,C) = res2 + mlp = x_{l+1}.
// Top: lnf (B,T,C) + mean/rstd; probs (B,T,V) (the logits, overwritten by softmax); tokens and
// targets (B,T) int32.
// Under --fp16/--bf16 the tensors for_each_half() visits are kept as 16-bit tensors (the values
// 16-bit GEMMs, attention and GELU would produce); the statistics, lse, res2 and out stay fp32.
struct GPT2LayerActivations {
  Tensor ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu, out;
  Tensor lse;  // (B,NH,T) flash attention's softmax statistic, in place of att
  // LoRA, per Linear slot (0 c_attn, 1 attn.c_proj, 2 c_fc, 3 mlp.c_proj) that has an adapter:
  // u = dropout(in) A^T (B,T,r), and with dropout the dropped-out input (B,T,in) A's gradient
  // reads (without dropout it reads the Linear's own saved input).
  Tensor lora_u[4], lora_in[4];
};

template <typename F>
void for_each_half(GPT2LayerActivations& a, F&& f) {
  for (Tensor* t : {&a.ln1, &a.qkv, &a.att, &a.atty, &a.ln2, &a.fch, &a.fch_gelu}) f(*t);
}

struct GPT2Saved {
  int64_t B = 0, T = 0;
  bool has_targets = false;
  Tensor tokens, targets, encoded;
  std::vector<GPT2LayerActivations> layers;
  Tensor lnf, lnf_mean, lnf_rstd, probs, losses;
  Tensor dlnf;  // (B,T,C) chunked LM head: gradient produced in forward, consumed by backward
  float loss_scale = 1.0f;
};

}  // namespace snug
