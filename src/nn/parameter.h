// A named trainable tensor. Names follow Hugging Face state_dict keys so that reports,
// checkpoints, freezing patterns and optimizer state all address parameters the same way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace snug {

struct QuantizedWeight;  // quant/weight_quant.h

struct Parameter {
  std::string name;
  Tensor value;               // category weights
  Tensor grad;                // category grad_category; undefined until backward first touches it
  bool requires_grad = true;  // frozen parameters get no gradient buffer
  bool decay = true;          // weight decay applies (false for biases and norm weights)
  // --load-in-8bit/--load-in-4bit: the frozen value lives quantized here (codes in weights,
  // state in quant_state) and `value` is undefined; the model dequantizes it per use.
  std::shared_ptr<QuantizedWeight> quant;
  // The category backward allocates `grad` under: gradients, or temporary at ZeRO stage 2, where
  // the full-size gradient lives only until it is handed to the reduction and the rank keeps
  // the slice it owns (train/zero_optimizer.h).
  Category grad_category = Category::gradients;
  // ZeRO stage 3 (train/zero3_params.h): the value is whole only while its block runs (gathered
  // from the ranks' slices); in between `value` is undefined and its shape is this.
  std::shared_ptr<const Shape> partitioned;
  // A partitioned parameter's slice on this rank: elements [shard_begin, shard_begin +
  // shard.numel()) of the flattened parameter (those past numel() are padding, zeros), a view
  // into the rank's shards. Initialization (nn/param_fill.h) and loading (models/hf_weights.h,
  // a checkpoint's resume) write it directly while `value` is undefined; set from construction
  // (nn/construction_partition.h, DeepSpeed's zero.Init) or when the Trainer partitions. Undefined
  // for a parameter that is whole.
  Tensor shard{};
  int64_t shard_begin = 0;
  // Where --bf16-full's stochastic rounding (kernels/stochastic_round.h) places this parameter's
  // elements among the counter-based draws: tensor `rounding_tensor` (-1: its position among the
  // optimizer's parameters) from element `rounding_offset`. A ZeRO rank's piece names its
  // source's, so a sharded update rounds with the bits the whole tensor's update does.
  int64_t rounding_tensor = -1;
  int64_t rounding_offset = 0;

  bool quantized() const { return quant != nullptr; }
  // Logical element count and shape, quantized, partitioned or not.
  int64_t numel() const;
  const Shape& shape() const;
  // Only this rank's slice is here now (partitioned, outside a gather): `shard` holds it.
  bool sliced() const { return !value.defined() && shard.defined(); }
  // The stored dtype: the value's, or the slice's while sliced() (f32 for a quantized parameter,
  // whose codes are not a float dtype).
  DType dtype() const;

  // Returns the gradient buffer, allocating it zero-filled on first use (as PyTorch does when
  // backward first produces a parameter's gradient).
  float* grad_for_accumulation();
  // Frees the gradient (PyTorch's zero_grad(set_to_none=True), the Trainer's default).
  void free_grad() { grad.reset(); }
};

using ParameterList = std::vector<Parameter*>;

int64_t count_params(const ParameterList& params, bool trainable_only = false);

}  // namespace snug
