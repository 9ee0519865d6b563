// Softmax cross-entropy over vocabulary rows, rows in parallel.

#include "kernels/arg_checks.h"
#include "kernels/kernels.h"
#include "kernels/row_softmax.h"

namespace snug::kernels {

double softmax_xent_forward(float* losses, float* probs, const float* logits,
                            const int32_t* targets, int64_t N, int64_t V) {
  kernels::detail::check_targets(targets, N, V, "softmax_xent_forward");
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * V;
    float* p = probs + n * V;
    const float maxv = detail::row_max(x, V);
    const int32_t tgt = targets[n];
    // Read the target logit before probs (which may alias logits) is written.
    const float shifted_target = tgt >= 0 ? x[tgt] - maxv : 0.0f;
    const float sum = detail::exp_shifted(p, x, V, maxv);
    detail::scale_row(p, V, 1.0f / sum);
    losses[n] = tgt >= 0 ? detail::xent_from_sum(sum, shifted_target) : 0.0f;
  }
  // Serial sum in a fixed order: the returned loss is bitwise reproducible.
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) total += losses[n];
  return total;
}

void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, float scale,
                           int64_t N, int64_t V) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int32_t tgt = targets[n];
    const float* p = probs + n * V;
    float* d = dlogits + n * V;
    if (tgt < 0) {
#pragma omp simd
      for (int64_t j = 0; j < V; ++j) d[j] = 0.0f;
      continue;
    }
    const float pt = p[tgt];  // read before d (which may alias p) is written
#pragma omp simd
    for (int64_t j = 0; j < V; ++j) d[j] = p[j] * scale;
    d[tgt] = (pt - 1.0f) * scale;
  }
}

}  // namespace snug::kernels
