#include "nn/construction_partition.h"

#include <memory>
#include <utility>

#include "core/error.h"
#include "nn/parameter.h"

namespace snug::nn {

namespace {
thread_local const ConstructionPartition* g_current = nullptr;
}  // namespace

ConstructionPartition::ConstructionPartition(Tensor shards,
                                             std::unordered_map<std::string, PartitionSlot> slots)
    : shards_(std::move(shards)), slots_(std::move(slots)) {
  SNUG_ASSERT(g_current == nullptr, "a ConstructionPartition is alive on this thread already");
  SNUG_ASSERT(shards_.defined() && shards_.ndim() == 1, "ConstructionPartition: 1-D shards");
  for (const auto& [name, s] : slots_)
    SNUG_ASSERT(s.offset >= 0 && s.shard >= 0 && s.offset + s.shard <= shards_.numel(),
                "ConstructionPartition: the slot of ", name, " is outside the shards");
  g_current = this;
}

ConstructionPartition::~ConstructionPartition() {
  g_current = nullptr;
}

const ConstructionPartition* ConstructionPartition::current() {
  return g_current;
}

const PartitionSlot* ConstructionPartition::find(const std::string& name) const {
  const auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : &it->second;
}

bool ConstructionPartition::place(Parameter& p, const Shape& shape, DType dtype) const {
  const PartitionSlot* found = find(p.name);
  if (found == nullptr) return false;
  const PartitionSlot& slot = *found;
  SNUG_CHECK(shape_numel(shape) == slot.numel, "parameter '", p.name, "' has shape ",
             shape_str(shape), " but its ZeRO-3 slot was made for ", slot.numel, " elements");
  SNUG_CHECK(shards_.dtype() == dtype, "parameter '", p.name, "' is ", dtype_name(dtype),
             " but the ZeRO-3 shards it is built into are ", dtype_name(shards_.dtype()));
  p.partitioned = std::make_shared<const Shape>(shape);
  p.shard = shards_.slice_rows(slot.offset, slot.offset + slot.shard);
  p.shard_begin = slot.begin;
  return true;
}

}  // namespace snug::nn
