// ZeRO stages 1 and 2 (issue 30; docs/distributed.md): DeepSpeed's flat layout of the trainable
// parameters. The trainable, unquantized parameters, in the model's order, lie back to back in
// one contiguous buffer (category weights), whose length is padded with zeros up to a multiple
// of 2*N elements (N ranks; DeepSpeed's nccl_start_alignment_factor 2 times N), and that buffer
// is cut into N equal contiguous slices: rank r owns [r*S, (r+1)*S), S = padded/N. A parameter
// may straddle two (or more) ranks; the padding is at the end of the last slice(s).
//
//   padded(P, N) = ceil(P / 2N) * 2N        P = trainable elements
//   S            = padded / N
//
// FlatParameters makes the layout real: the parameters' `value` tensors become views into the
// buffer (same shapes, same values), so that after a sharded update one all-gather in the flat
// layout (Communicator::all_gather) gives every rank every weight. The values are staged through
// host memory while the buffer is made, so the tracked weights never hold them twice; a dry run
// on meta allocates and frees what a real run does, so the plan counts the buffer to the byte.
// A run without a ZeRO stage never builds one: its parameters stay per-tensor allocations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "nn/parameter.h"

namespace snug {

// DeepSpeed's stage 1/2 alignment: the flat buffer is a multiple of this many elements times N.
inline constexpr int64_t kZeroAlignmentFactor = 2;

// padded(P, N) above.
int64_t zero_padded_numel(int64_t numel, int world);

// Where each trainable parameter lies in the flat space (computed, nothing allocated).
struct FlatLayout {
  struct Entry {
    Parameter* p;
    int64_t offset;  // first element in the flat space
  };
  std::vector<Entry> entries;  // the trainable, unquantized parameters, in the model's order
  int64_t numel = 0;           // their elements
  int64_t padded = 0;          // zero_padded_numel(numel, world)
  int64_t shard = 0;           // padded / world
  int world = 1;
  // Every entry's: fp32, or bf16 (--bf16-full, --precision-layout deepspeed).
  DType dtype = DType::f32;
  // The element range [begin, end) of the flat space rank r owns.
  int64_t begin(int r) const { return shard * r; }
  int64_t end(int r) const { return shard * (r + 1); }
};

// The layout of `params` over `world` ranks. Throws snug::Error when a trainable parameter is not
// fp32 or bf16, or when they mix (one flat buffer holds one dtype), naming it and the stage.
FlatLayout flat_layout(const ParameterList& params, int world, int stage);

// The buffer and the views (see above). Keeps the parameters' values; destroying it leaves the
// parameters viewing the buffer (the views share its storage).
class FlatParameters {
 public:
  FlatParameters(const ParameterList& params, int world, int stage, Device& dev);
  const FlatLayout& layout() const { return layout_; }
  // (padded) elements of layout().dtype, category weights.
  const Tensor& buffer() const { return buffer_; }

 private:
  FlatLayout layout_;
  Tensor buffer_;
};

}  // namespace snug
