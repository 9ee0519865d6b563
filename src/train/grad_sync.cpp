#include "train/grad_sync.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace snug {

namespace {

// The trainable parameters in bucket order: last first.
std::vector<Parameter*> bucket_order(const ParameterList& params) {
  std::vector<Parameter*> out;
  for (auto it = params.rbegin(); it != params.rend(); ++it)
    if ((*it)->requires_grad) out.push_back(*it);
  return out;
}

}  // namespace

int64_t gradient_bucket_elements(const ParameterList& params, double cap_mb) {
  int64_t total = 0;
  for (Parameter* p : bucket_order(params)) total += p->numel();
  const auto cap = static_cast<int64_t>(cap_mb * 1024.0 * 1024.0) / 4;
  return std::min(total, std::max<int64_t>(cap, 1));
}

GradSyncStats all_reduce_gradients(const ParameterList& params, dist::Communicator& comm,
                                   double cap_mb, Device& dev) {
  GradSyncStats st;
  const std::vector<Parameter*> order = bucket_order(params);
  const int64_t cap = gradient_bucket_elements(params, cap_mb);
  if (cap == 0) return st;
  const bool meta = dev.is_meta();
  for (const Parameter* p : order) {
    SNUG_CHECK(p->grad.defined(), "data parallelism: parameter ", p->name,
               " trains but has no gradient after backward on rank ", comm.rank());
    SNUG_CHECK(meta || p->grad.dtype() == DType::f32, "data parallelism: parameter ", p->name,
               " has a ", dtype_name(p->grad.dtype()),
               " gradient; the gradient all-reduce sums fp32 gradients only (train without "
               "16-bit gradients, or on one process)");
  }
  Tensor bucket = Tensor::empty({cap}, DType::f32, Category::temporary, dev);
  if (meta) return st;
  float* buf = bucket.data<float>();
  // What the filled part of the bucket holds: (parameter, first element, count).
  struct Piece {
    Parameter* p;
    int64_t begin, count;
  };
  std::vector<Piece> pieces;
  int64_t fill = 0;
  auto flush = [&] {
    if (fill == 0) return;
    comm.all_reduce_sum(buf, static_cast<size_t>(fill));
    ++st.buckets;
    st.bytes += fill * 4;
    int64_t at = 0;
    for (const Piece& pc : pieces) {
      std::memcpy(pc.p->grad.data<float>() + pc.begin, buf + at,
                  static_cast<size_t>(pc.count) * sizeof(float));
      at += pc.count;
    }
    pieces.clear();
    fill = 0;
  };
  for (Parameter* p : order) {
    const int64_t n = p->grad.numel();
    for (int64_t begin = 0; begin < n;) {
      const int64_t count = std::min(n - begin, cap - fill);
      std::memcpy(buf + fill, p->grad.data<float>() + begin,
                  static_cast<size_t>(count) * sizeof(float));
      pieces.push_back({p, begin, count});
      fill += count;
      begin += count;
      if (fill == cap) flush();
    }
  }
  flush();
  return st;
}

}  // namespace snug
