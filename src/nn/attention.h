// Attention block: projections, optional rotary embedding, the attention kernel, output projection.
//   q = x Wq (+bq), k = x Wk (+bk), v = x Wv (+bv)   separate projections (Llama layout), or
//   [q|k|v] = x Wqkv (+b)                            one fused projection (GPT-2's c_attn),
//   [q_h|k_h|v_h per head] = x Wqkv (+b)             or GPT-NeoX's per-head interleaved one;
//   q, k rotated in place (rotary_dim > 0: HF rotate_half on the first rotary_dim dims of a head);
//   y = softmax(q k^T / sqrt(hs) [causal mask]) v    NH query heads over NKV kv heads (GQA/MQA);
//   out = y Wo (+bo).
//
// GQA without copies: the kernels index kv head h / (NH/NKV) in place (kernels/ops.inc,
// attention_forward_gqa), so k and v are kept at their own NKV-head size and the backward sums
// the query heads' contributions into dk, dv directly: the memory report shows GQA's real
// saving, with no expanded (B,T,NH*hs) k/v temporaries.
//
// Saved, for B batch, T length, Q = NH*hs, KV = NKV*hs:
//   x    (B,T,C)      the projections' input (in the Linear Saveds, one shared tensor)
//   q    (B,T,Q)      rotated queries      } or qkv (B,T,Q+2KV) for a [q|k|v] projection
//   k, v (B,T,KV)     rotated keys, values }
//   y    (B,T,Q)      attention output (o_proj's input, in o_lin; flash's backward reads it)
//   lse  (B,NH,T)     flash: per-row log-sum-exp     | att (B,NH,T,T) naive: probabilities
//   with probability dropout, naive only (what eager attention keeps; flash regenerates the mask
//   from its counter in backward and keeps nothing T x T):
//   drop_mask   (B,NH,T,T) uint8   the mask
//   att_dropped (B,NH,T,T)         the dropped probabilities that multiplied v
//   pos  (B,T) int32  the batch's position ids (RunContext::position_ids), when it has them
//
// Packed sequences: with position ids (restarting at 0 where each document starts) rotary
// rotates row t by its position id and a query attends only to the earlier keys of its own
// document (kernels/attention_dims.h): a packed batch computes what its documents would alone.
//
// The per-head interleaved projection (GPT-NeoX's query_key_value, output viewed (B,T,NH,3,hs))
// is split by an op into separate q, k, v (the saved tensors, as for separate projections); its
// (B,T,3Q) output is a temporary freed right after the split, and backward interleaves dq, dk,
// dv back into one (B,T,3Q) temporary for the projection's backward.
//
// A sliding window (sliding_window W > 0) limits query t to the keys [t - W + 1, t]
// (kernels/attention_dims.h), in every attention kernel.
//
// Generation (forward_cached): the same projections and rotary, keys and values appended to a
// KVCache, attention of the new rows over every cached one (kernels/kv_cache_ops.inc), within
// the window.
//
// Later steps (docs/design.md): padding masks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/attention_dims.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/parameter_store.h"
#include "nn/run_options.h"

namespace snug::nn {

// How a fused projection's output columns are laid out.
enum class FusedQKVLayout {
  blocks,                // [q | k | v]: all query heads, then the keys', then the values' (GPT-2)
  per_head_interleaved,  // per head h: [q_h | k_h | v_h] (GPT-NeoX); needs num_kv_heads == heads
};

struct AttentionConfig {
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // 0: = num_heads
  int64_t head_dim = 0;      // 0: hidden / num_heads
  bool causal = true;
  int64_t sliding_window = 0;  // causal: query t sees the keys > t - sliding_window; 0: all
  bool qkv_bias = false;
  bool o_bias = false;
  int64_t rotary_dim = 0;  // 0: no rotary embedding; else even and <= head_dim
  float rope_theta = 10000.0f;
  // A scaled rope's rotary_dim / 2 inverse frequencies (config.json's rope_scaling, computed by
  // the family); empty: 1 / rope_theta^(2j / rotary_dim).
  std::vector<float> rope_inv_freq = {};
  AttentionImpl kernel = AttentionImpl::flash;
  LinearLayout layout = LinearLayout::linear;
  // Module names under the block's prefix. A non-empty fused_qkv_name makes one projection
  // laid out as fused_qkv_layout says (and q/k/v names unused).
  std::string q_name = "q_proj", k_name = "k_proj", v_name = "v_proj", o_name = "o_proj";
  std::string fused_qkv_name;
  FusedQKVLayout fused_qkv_layout = FusedQKVLayout::blocks;
  // Dropout on the probabilities in training forwards (BERT's attention_probs_dropout_prob),
  // keyed by RunContext::dropout_key(dropout_layer, kAttentionDropoutSite).
  double probs_dropout = 0.0;
  int64_t dropout_layer = 0;
};

// The dropout site number of the attention probabilities (RunContext::dropout_key).
inline constexpr int kAttentionDropoutSite = 2;

class Attention {
 public:
  struct Saved {
    Linear::Saved q_lin, k_lin, v_lin, o_lin;  // q_lin only for a fused projection; o_lin.in = y
    Tensor q, k, v;  // [q|k|v] fused (one_qkv_tensor()): q holds [q|k|v], k and v undefined
    Tensor lse, att;
    Tensor drop_mask, att_dropped;  // naive attention with probability dropout
    bool dropout = false;           // this forward dropped probabilities (key below)
    uint64_t dropout_key = 0;
    Tensor pos;  // the position ids, shared with the model (undefined: positions 0..T-1)
  };

  // Checks the configuration (heads divide, rotary dims fit) naming `prefix`.
  Attention(ParameterStore& ps, const std::string& prefix, const AttentionConfig& cfg);

  // out (B,T,C) from x (B,T,C); out is the caller's.
  void forward(const Tensor& x, const Tensor& out, Saved& s) const;
  // Generation: out (B,T,C) for T new rows x (B,T,C) at positions slot.past .. past+T-1, their
  // keys and values appended to the cache (nn/kv_cache.h), attending over every cached row
  // (causal). Keeps nothing: an inference forward. Needs causal attention.
  void forward_cached(const Tensor& x, const Tensor& out, const KVSlot& slot) const;
  // Returns dx (B,T,C) = d/dx (temporary); parameter gradients accumulate. Releases s. Under
  // mixed precision dout is the residual stream's fp32 gradient (rounded here for o's GEMM) and
  // dx comes back rounded.
  Tensor backward(const Tensor& dout, Saved& s) const;

  // Mixed precision (nn/run_context.h): the 16-bit saved tensors to and from fp32.
  void compact(Saved& s) const;
  void widen(Saved& s) const;
  // Selective checkpointing: drop what recompute() rebuilds cheaply (naive attention's
  // probabilities), and rebuild it from the kept q, k, v (after widen()).
  void drop_selective(Saved& s) const {
    s.att.reset();
    s.drop_mask.reset();
    s.att_dropped.reset();
  }
  // The block's input (the projections' saved input): dropped and set again when the layer
  // recomputes it (selective checkpointing of the norm before the block).
  void drop_input(Saved& s) const { s.q_lin.in = s.k_lin.in = s.v_lin.in = Tensor(); }
  void set_input(Saved& s, const Tensor& x) const;
  void recompute(Saved& s) const;
  // The block's Linears in registration order (LoRA targets).
  std::vector<Linear*> linears();

  const AttentionConfig& config() const { return cfg_; }
  void set_kernel(AttentionImpl k) { cfg_.kernel = k; }

 private:
  AttentionDims dims(int64_t B, int64_t T, const Tensor& pos) const;
  // q, k, v of x into s.q (s.k, s.v), allocated by the caller, rotated by d.pos (nullptr: rows
  // 0..T-1) when the block has rotary dims.
  void project(const Tensor& x, Saved& s, const AttentionDims& d) const;
  // dims() with the Saved's dropout (and, naive, its mask and dropped probabilities).
  AttentionDims dims(int64_t B, int64_t T, const Saved& s) const;
  // Naive attention with dropout: allocates the mask and the dropped probabilities.
  void alloc_dropout(int64_t B, int64_t T, Saved& s) const;
  const float* inv_freq() const {
    return cfg_.rope_inv_freq.empty() ? nullptr : cfg_.rope_inv_freq.data();
  }
  // q, k and v inside one saved [q|k|v] tensor (rather than three tensors).
  bool one_qkv_tensor() const { return fused_ && cfg_.fused_qkv_layout == FusedQKVLayout::blocks; }
  // The saved q, k, v (or their gradients) as the kernels read them: columns of q when
  // one_qkv_tensor().
  struct QKV {
    float *q, *k, *v;
  };
  QKV qkv_of(const Tensor& q, const Tensor& k, const Tensor& v) const;

  RunContext* ctx_;
  std::string prefix_;
  AttentionConfig cfg_;
  int64_t hs_, q_width_, kv_width_;
  // Registered in this order (HF's q, k, v, o); fused: q_ is the [q|k|v] projection, no k_, v_.
  std::optional<Linear> q_, k_, v_, o_;
  bool fused_;
};

}  // namespace snug::nn
