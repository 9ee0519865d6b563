// ZeRO stage 3 (issue 30; docs/distributed.md): DeepSpeed's partitioning of the trainable
// parameters themselves (partition_parameters.py). Each trainable, unquantized parameter (fp32,
// or bf16 under --bf16-full and --precision-layout deepspeed: shards and gathers 16-bit) is padded
// on its own to a multiple of N elements and cut into N equal slices; rank r keeps slice r of every
// one, back to back in one buffer of category weights (its "shards"):
//
//   padded_i = ceil(numel_i / N) * N       s_i = padded_i / N
//   rank r keeps elements [r*s_i, (r+1)*s_i) of parameter i (the padding, zeros, past numel_i)
//   shards: S = sum_i s_i elements (fp32 or bf16), parameter i's slice at o_i = sum_{j<i} s_j
//
// so a rank's weights outside a gathered block are exactly 4 (bf16: 2) * sum_i padded_i / N bytes
// (plus the frozen and quantized parameters, which stay whole on every rank: a LoRA or QLoRA base).
// Outside a block a partitioned parameter's `value` is undefined (Parameter::partitioned keeps
// its shape). acquire() (models/param_gather.h) all-gathers it into a fresh tensor of padded_i
// elements (category weights: the gathered block is weights while it lives), its value viewing
// the first numel_i; the last release() frees it. Nothing writes a gathered value back: the
// optimizer updates the shards (its pieces view them, train/zero_optimizer.h), and the next
// gather brings the update.
//
// Each partitioned parameter keeps a view of its slice (Parameter::shard, from element
// Parameter::shard_begin): a checkpoint's load writes it there (train/checkpoint.h), each rank its
// own, so a resume never holds the model whole; a checkpoint's save gathers one parameter at a
// time, and an evaluation gathers block by block as training does (train/evaluate.h,
// EvalOptions::same_forwards). The views keep the shards' memory after this object is gone (the
// model stays partitioned).
//
// --offload-param cpu (train/offload.h): the shards live in the host pool (`home`, the device's
// host); a gather uploads the rank's slice from there (world of one) or all-gathers from host
// memory into the gathered block on the device. On cpu both pools share the RAM: the values are
// those of the run without offload bit for bit.
//
// A dry run on meta allocates and frees what a real run does and moves nothing, so the plan
// counts the shards and every gathered block to the byte.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "dist/communicator.h"
#include "models/param_gather.h"
#include "nn/parameter.h"

namespace snug {

// padded_i above.
int64_t zero3_padded_numel(int64_t numel, int world);

// One partitioned parameter.
struct Zero3Entry {
  Parameter* p = nullptr;
  Shape shape;
  int64_t numel = 0, padded = 0, shard = 0;  // shard = padded / N
  int64_t offset = 0;                        // its slice's place in the rank's shards
};

// The partition of `params` over `world` ranks: an entry for each trainable, unquantized one, in
// order, each slice's offset in the shards after the previous ones'. Throws snug::Error naming a
// trainable parameter that is not fp32 or bf16, dtypes that differ, or none that trains.
std::vector<Zero3Entry> zero3_layout(const ParameterList& params, int world);

class Zero3Parameters final : public ParameterGatherer {
 public:
  // Partitions the trainable, unquantized parameters of `params` (zero3_layout; their values must
  // be whole and the same on every rank; each rank keeps its slices and frees the rest). The
  // shards go to `home` (--offload-param cpu: dev's host pool, one dev addresses), else to `dev`;
  // the gathered blocks to `dev`. A model built inside a nn::ConstructionPartition (zero.Init,
  // train/zero3_init.h) has its parameters partitioned already: its shards are taken over (the
  // parameters made whole after it, LoRA adapters, copy their slices in).
  Zero3Parameters(const ParameterList& params, dist::Communicator& comm, Device& dev,
                  Device* home = nullptr);
  ~Zero3Parameters() override;
  Zero3Parameters(const Zero3Parameters&) = delete;
  Zero3Parameters& operator=(const Zero3Parameters&) = delete;

  const std::vector<Zero3Entry>& entries() const { return entries_; }
  const Zero3Entry* entry(const Parameter& p) const;
  int64_t numel() const { return numel_; }    // trainable elements
  int64_t padded() const { return padded_; }  // sum of padded_i
  int64_t shard() const { return shard_; }    // S = padded / N
  int world() const { return world_; }
  // Every partitioned parameter's dtype: fp32, or bf16 (--precision-layout deepspeed, --bf16-full).
  DType dtype() const { return dtype_; }
  // The rank's S elements of dtype() (category weights), on the device or in its host pool.
  const Tensor& shards() const { return shards_; }
  bool offloaded() const { return &home_ != &dev_; }

  void acquire(Parameter& p) override;
  // A block's parameters: those not gathered yet are all-gathered in one collective (one meeting
  // of the ranks per block, not per parameter), their whole tensors allocated in the order
  // acquire() of each would allocate them, so the plan is the same.
  void acquire(const std::vector<Parameter*>& ps) override;
  void release(Parameter& p) override;
  // Seconds spent in the gathers since the last call.
  double take_communication_s() { return std::exchange(gather_s_, 0.0); }

 private:
  // Each of `es` whole, from the ranks' shards.
  void gather(const std::vector<const Zero3Entry*>& es);

  dist::Communicator& comm_;
  Device& dev_;
  Device& home_;  // where the shards are: dev_, or its host pool (--offload-param cpu)
  int world_ = 1;
  DType dtype_ = DType::f32;
  std::vector<Zero3Entry> entries_;
  std::unordered_map<const Parameter*, size_t> index_;
  std::vector<int> count_;  // acquisitions outstanding, per entry
  int64_t numel_ = 0, padded_ = 0, shard_ = 0;
  Tensor shards_;
  double gather_s_ = 0.0;
};

}  // namespace snug
