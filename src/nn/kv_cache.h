// The KV cache of generation: for every layer, the keys and values of every position so far, so
// that each new token costs one row of attention instead of recomputing the whole prefix.
//
// Per layer k and v are (B, Tmax, NKV*hs) tensors of category kv_cache in the dtype the model
// computes in (fp32; bf16 or f16 for a model computing in 16 bits, as transformers' cache holds
// the model's dtype), allocated once for the whole generation (prompt + max new tokens), rows
// [0, len) valid. Its size is seed 004's formula exactly: 2 x batch x layers x kv heads x
// head_dim x context x bytes (4, or 2 for a 16-bit cache; kv heads = heads without GQA). Beam
// search reorders it per layer as transformers' index_select does: a new tensor gathered from the
// old one, then the old one freed.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace snug::nn {

// The cache a model needs: its layers and one position's key (or value) width.
struct KVCacheShape {
  int64_t layers = 0;
  int64_t width = 0;          // NKV * head_dim
  int64_t max_positions = 0;  // the model's context: len may not pass it
  int64_t kv_heads = 0;       // NKV (the formula's factors, for plan --inference's line)
  int64_t head_dim = 0;
  DType dtype = DType::f32;  // f32, bf16 or f16: the model's compute dtype
};

// One layer's cache as its attention reads and appends to it.
struct KVSlot {
  Tensor k, v;       // (B, Tmax, width)
  int64_t past = 0;  // valid rows before this forward's
};

class KVCache {
 public:
  // Allocates (category kv_cache) on `dev`; Tmax <= shape.max_positions.
  KVCache(Device& dev, const KVCacheShape& shape, int64_t batch, int64_t max_len);

  int64_t batch() const { return batch_; }
  int64_t max_len() const { return max_len_; }
  int64_t len() const { return len_; }
  const KVCacheShape& shape() const { return shape_; }
  // 2 x batch x layers x width x max_len x dtype_size(shape().dtype).
  int64_t bytes() const;
  // What layer l's attention reads and writes in a forward of rows [len, len + T).
  KVSlot slot(int64_t l) const {
    return {k_[static_cast<size_t>(l)], v_[static_cast<size_t>(l)], len_};
  }
  // After a forward of T rows: they are valid now.
  void advance(int64_t T) { len_ += T; }
  // Beam search: row b becomes the old row from[b] (from has batch() entries in [0, batch())).
  void reorder(const std::vector<int32_t>& from);

 private:
  Device* dev_;
  KVCacheShape shape_;
  int64_t batch_, max_len_, len_ = 0;
  std::vector<Tensor> k_, v_;
};

}  // namespace snug::nn
