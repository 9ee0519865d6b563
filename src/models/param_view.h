// fp32 view of a vector parameter (LayerNorm weight or bias, Linear bias) for a kernel argument,
// whatever the parameter's storage dtype.
//
// fp32 parameters: the value itself, no copy. bf16 parameters (--bf16-full): the values widened
// into a host buffer owned by the view, which is NOT a tracked allocation: like the kernels' own
// internal scratch (kernels/kernels.h) it is small and bounded (at most 4C floats, 128 KiB at
// C = 8192), and being untracked it needs no allocation on the meta device, where these views are
// never built (their callers run only on real devices). Matrices (GEMM weights, embeddings) are
// widened through GPT2::param_f32 / gemm_weight into tracked `temporary` tensors instead.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nn/parameter.h"

namespace snug {

class VectorF32 {
 public:
  explicit VectorF32(const Parameter* p);
  // nullptr for a null parameter or on the meta device.
  const float* get() const { return ptr_; }

 private:
  std::vector<float> buf_;
  const float* ptr_ = nullptr;
};

// Sets p's values from `fill`, which writes n consecutive fp32 values per call (in order, from the
// first element): all at once into an fp32 parameter; a chunk at a time through a small host
// buffer, rounded to nearest even, into a bf16 one (so a bf16 model initialized from a seed holds
// exactly the fp32 model's values rounded, with no fp32 copy of the tensor). No-op on meta.
void fill_values(Parameter& p, const std::function<void(float*, int64_t)>& fill);

}  // namespace snug
