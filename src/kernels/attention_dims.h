// Shape of one general attention call (attention_forward_gqa and flash_attention_forward_gqa):
// which heads, how the operands are laid out, which mask.
//
// Packed sequences: with position ids pos (B,T) that restart at 0 where a document starts and
// count up by one inside it, query row t sees keys [t - pos[t], t] only: its own document,
// causally (what HF's flash-attention path does with position_ids: varlen attention over the
// documents). pos == nullptr is the plain causal mask, keys [0, t], bit for bit as before.
//
// Sliding window (a config.json's sliding_window W): query row t sees keys [t - W + 1, t] only,
// the W latest including itself (transformers' sliding mask keeps key s iff t - W < s <= t),
// within its document with position ids. window == 0: no window.
#pragma once

#include <cstdint>

namespace snug {

struct AttentionDims {
  int64_t B = 0, T = 0;  // batch, sequence length (queries = keys = T: no KV cache yet)
  int64_t NH = 0;        // query heads
  int64_t NKV = 0;       // key/value heads; NH % NKV == 0 (NKV == NH: multi-head, 1: MQA)
  int64_t hs = 0;        // head size
  // Row strides in floats: row (b,t) of q starts at q + (b*T + t)*ldq, head h at + h*hs.
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;
  bool causal = true;            // key s visible to query t iff s <= t; else every key is visible
  const int32_t* pos = nullptr;  // (B,T) position ids per document (causal only), or nullptr
  int64_t window = 0;            // sliding window W (causal only): keys > t - W; 0: none
  // Dropout on the attention probabilities (training, BERT's attention_probs_dropout_prob): with
  // dropout_p > 0, probability (b,h,t,s) is kept, scaled by 1/(1-p), iff
  // dropout_keep(dropout_key, dropout_index(d, b, h, t, s), p) (kernels/dropout_mask.h); the
  // softmax statistics (lse) are those of the undropped probabilities, as in PyTorch.
  double dropout_p = 0.0;
  uint64_t dropout_key = 0;
  // Naive kernels with dropout: what eager attention keeps, written by forward, read by backward:
  // the mask (B,NH,T,T) uint8 and the dropped probabilities (B,NH,T,T) fp32 that multiply v.
  // The flash kernels regenerate the mask from the key instead and store nothing T x T.
  uint8_t* drop_mask = nullptr;
  float* att_dropped = nullptr;
  // The run computes in bf16 (--bf16, --bf16-full): q, k, v and dout hold bf16 values. A backend
  // may then multiply on bf16 matrix units with fp32 accumulation, rounding the probabilities to
  // bf16 before their products with v and dout, as PyTorch's SDPA does under autocast (the CUDA
  // backend's cuDNN attention, kernels/cuda/cudnn_attention.h). The CPU kernels ignore it.
  bool bf16_operands = false;
};

// The counter of score (b, h, t, s) in the dropout draws: its index in a (B,NH,T,T) tensor, so
// that naive and flash attention drop the same probabilities.
inline int64_t dropout_index(const AttentionDims& d, int64_t b, int64_t h, int64_t t, int64_t s) {
  return ((b * d.NH + h) * d.T + t) * d.T + s;
}

// The first key visible to query row t of batch b: its document's start with position ids (else
// 0), or the window's first key when that is later. Non-decreasing in t (documents start in
// order), so a block of rows starting at t0 sees no key before first_key(t0).
inline int64_t first_key(const AttentionDims& d, int64_t b, int64_t t) {
  const int64_t doc = d.pos ? t - d.pos[b * d.T + t] : 0;
  return d.window > 0 && t - d.window + 1 > doc ? t - d.window + 1 : doc;
}

// Throws snug::Error naming `what` unless d describes a valid call (positive sizes, NH a multiple
// of NKV, strides that hold every head; position ids only with the causal mask, each row's 0 or
// the previous row's + 1).
void check_attention_dims(const AttentionDims& d, const char* what);
// Throws snug::Error naming `what` unless every position id of pos (B,T) is 0 (a document starts)
// or the previous row's + 1: what models check on their host input before any op runs.
void check_position_ids(const int32_t* pos, int64_t B, int64_t T, const char* what);

// The fused projection qkv(B,T,3C) laid out [q|k|v], NH heads of C/NH each, causal: q = qkv,
// k = qkv + C, v = qkv + 2C, all at row stride 3C; out (B,T,C). (C % NH == 0: the caller checks.)
inline AttentionDims fused_qkv_dims(int64_t B, int64_t T, int64_t C, int64_t NH) {
  AttentionDims d;
  d.B = B;
  d.T = T;
  d.NH = NH;
  d.NKV = NH;
  d.hs = C / NH;
  d.ldq = d.ldk = d.ldv = 3 * C;
  d.ldo = C;
  d.causal = true;
  return d;
}

}  // namespace snug
