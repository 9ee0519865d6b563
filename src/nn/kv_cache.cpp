#include "nn/kv_cache.h"

#include "core/error.h"
#include "kernels/op_table.h"

namespace snug::nn {

KVCache::KVCache(Device& dev, const KVCacheShape& shape, int64_t batch, int64_t max_len)
    : dev_(&dev), shape_(shape), batch_(batch), max_len_(max_len) {
  SNUG_CHECK(batch > 0 && max_len > 0, "KV cache: batch ", batch, " and length ", max_len,
             " must be positive");
  SNUG_CHECK(max_len <= shape.max_positions, "KV cache: ", max_len,
             " positions (prompt + new tokens) exceed the model's context of ",
             shape.max_positions);
  SNUG_CHECK(shape.dtype == DType::f32 || shape.dtype == DType::bf16 || shape.dtype == DType::f16,
             "KV cache: dtype ", dtype_name(shape.dtype), " (f32, bf16 or f16)");
  for (int64_t l = 0; l < shape.layers; ++l) {
    k_.push_back(
        Tensor::empty({batch, max_len, shape.width}, shape.dtype, Category::kv_cache, dev));
    v_.push_back(
        Tensor::empty({batch, max_len, shape.width}, shape.dtype, Category::kv_cache, dev));
  }
}

int64_t KVCache::bytes() const {
  return 2 * batch_ * shape_.layers * shape_.width * max_len_ *
         static_cast<int64_t>(dtype_size(shape_.dtype));
}

void KVCache::reorder(const std::vector<int32_t>& from) {
  SNUG_CHECK(static_cast<int64_t>(from.size()) == batch_, "KV cache reorder: ", from.size(),
             " rows for a batch of ", batch_);
  for (const int32_t f : from)
    SNUG_CHECK(f >= 0 && f < batch_, "KV cache reorder: row ", f, " outside [0, ", batch_, ")");
  const OpTable& ops = dev_->ops();
  Tensor idx = Tensor::empty({batch_}, DType::i32, Category::temporary, *dev_);
  dev_->upload(idx.data<int32_t>(), from.data(), batch_);
  for (std::vector<Tensor>* kv : {&k_, &v_})
    for (Tensor& t : *kv) {
      Tensor fresh = Tensor::empty(t.shape(), t.dtype(), Category::kv_cache, *dev_);
      if (t.dtype() == DType::f32)
        ops.kv_cache_gather(fresh.data<float>(), t.data<float>(), idx.data<int32_t>(), batch_,
                            max_len_, len_, shape_.width);
      else
        ops.kv_cache_gather_half(fresh.data_u16(), t.data_u16(), idx.data<int32_t>(), batch_,
                                 max_len_, len_, shape_.width);
      t = fresh;  // the old one is freed here
    }
}

}  // namespace snug::nn
