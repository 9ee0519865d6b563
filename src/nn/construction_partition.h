// Parameters partitioned from birth: snug's form of DeepSpeed's `with deepspeed.zero.Init():`
// (ZeRO stage 3; train/zero3_init.h sets one up for a run). While a ConstructionPartition is alive
// on this thread, ParameterStore::add gives each parameter it has a slot for no whole value: the
// parameter is partitioned at once (Parameter::partitioned keeps its shape) and its rank's slice is
// a view into `shards` (Parameter::shard, from element Parameter::shard_begin), which
// initialization (nn/param_fill.h) and loading (models/hf_weights.h) write directly. So a rank's
// tracked weights never hold the whole model, only its shards (allocated zeroed, before the model,
// so the padding past a parameter's end is zeros) and the parameters that stay whole (frozen,
// quantized, or added outside the scope, e.g. LoRA adapters). ZeRO stage 3's parameters
// (train/zero3_params.h) then take the shards over.
//
// One per thread at a time (nested scopes are refused): a model is built inside one.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace snug::nn {

// Where one parameter's slice lives: elements [begin, begin + shard) of the parameter (`numel`
// elements in all) at element `offset` of the shards.
struct PartitionSlot {
  int64_t numel = 0, shard = 0, begin = 0, offset = 0;
};

class ConstructionPartition {
 public:
  // `shards`: the rank's buffer (1-D, every slot inside it); `slots` by parameter name.
  ConstructionPartition(Tensor shards, std::unordered_map<std::string, PartitionSlot> slots);
  ~ConstructionPartition();
  ConstructionPartition(const ConstructionPartition&) = delete;
  ConstructionPartition& operator=(const ConstructionPartition&) = delete;

  // The scope alive on this thread, or nullptr.
  static const ConstructionPartition* current();

  const Tensor& shards() const { return shards_; }
  // Partitions the freshly made `p` (named, no value yet; `shape`, stored in `dtype`) into its
  // slot, the slice viewed; false when it has none (it stays whole). Throws snug::Error when the
  // shape or the dtype is not the one the slot was made for.
  bool place(Parameter& p, const Shape& shape, DType dtype) const;

 private:
  // nullptr when the parameter stays whole.
  const PartitionSlot* find(const std::string& name) const;

  Tensor shards_;
  std::unordered_map<std::string, PartitionSlot> slots_;
};

}  // namespace snug::nn
