// AdamW step with torch.optim.AdamW's operation order (single-tensor path; kernels/adamw_math.h).
#include "kernels/adamw_math.h"
#include "kernels/kernels.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels {

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t) {
  const AdamWScalars s = adamw_scalars(lr, beta1, beta2, eps, weight_decay, t);
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) adamw_element(s, g[i], m[i], v[i], p[i]);
  });
}

}  // namespace snug::kernels
