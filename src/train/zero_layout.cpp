#include "train/zero_layout.h"

#include <vector>

#include "core/error.h"

namespace snug {

int64_t zero_padded_numel(int64_t numel, int world) {
  const int64_t align = kZeroAlignmentFactor * world;
  return (numel + align - 1) / align * align;
}

FlatLayout flat_layout(const ParameterList& params, int world, int stage) {
  SNUG_CHECK(world >= 1, "ZeRO: world size ", world, " must be at least 1");
  FlatLayout l;
  l.world = world;
  for (Parameter* p : params) {
    if (!p->requires_grad || p->quantized()) continue;
    const DType dt = p->value.dtype();
    SNUG_CHECK(dt == DType::f32 || dt == DType::bf16, "--zero-stage ", stage, ": parameter ",
               p->name, " is ", dtype_name(dt),
               "; the ZeRO stages shard fp32 or bf16 trainable parameters only");
    if (l.entries.empty()) l.dtype = dt;
    SNUG_CHECK(dt == l.dtype, "--zero-stage ", stage, ": parameter ", p->name, " is ",
               dtype_name(dt), " and ", l.entries.front().p->name, " is ", dtype_name(l.dtype),
               "; the flat layout holds one dtype");
    l.entries.push_back({p, l.numel});
    l.numel += p->numel();
  }
  SNUG_CHECK(l.numel > 0, "--zero-stage ", stage, ": no parameter trains");
  l.padded = zero_padded_numel(l.numel, world);
  l.shard = l.padded / world;
  return l;
}

FlatParameters::FlatParameters(const ParameterList& params, int world, int stage, Device& dev)
    : layout_(flat_layout(params, world, stage)) {
  // Stage the values in host memory and free them before the buffer exists, so the tracked
  // weights never hold both (on meta there is nothing to stage).
  const bool real = !dev.is_meta();
  const auto es = static_cast<int64_t>(dtype_size(layout_.dtype));
  std::vector<std::vector<unsigned char>> staged(layout_.entries.size());
  for (size_t i = 0; i < layout_.entries.size(); ++i) {
    Parameter* p = layout_.entries[i].p;
    if (real) {
      staged[i].resize(static_cast<size_t>(p->numel() * es));
      dev.download(staged[i].data(), static_cast<const unsigned char*>(p->value.raw()),
                   p->numel() * es);
    }
  }
  std::vector<Shape> shapes;
  for (const FlatLayout::Entry& e : layout_.entries) {
    shapes.push_back(e.p->value.shape());
    e.p->value.reset();
  }
  buffer_ = Tensor::zeros({layout_.padded}, layout_.dtype, Category::weights, dev);
  for (size_t i = 0; i < layout_.entries.size(); ++i) {
    const FlatLayout::Entry& e = layout_.entries[i];
    const int64_t n = shape_numel(shapes[i]);
    e.p->value = buffer_.slice_rows(e.offset, e.offset + n).view(shapes[i]);
    if (real) dev.upload(static_cast<unsigned char*>(e.p->value.raw()), staged[i].data(), n * es);
  }
}

}  // namespace snug
