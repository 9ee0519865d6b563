// Reference softmax cross-entropy, in double.
#include <cmath>

#include "kernels/arg_checks.h"
#include "kernels/kernels.h"

namespace snug::ref {

double softmax_xent_forward(float* losses, float* probs, const float* logits,
                            const int32_t* targets, int64_t N, int64_t V) {
  kernels::detail::check_targets(targets, N, V, "softmax_xent_forward");
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const float* x = logits + n * V;
    double maxv = -INFINITY;
    for (int64_t j = 0; j < V; ++j)
      if (x[j] > maxv) maxv = x[j];
    double sum = 0.0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(x[j] - maxv);
    const int32_t tgt = targets[n];
    // Read the target logit before probs (which may alias logits) is written.
    const double loss = tgt >= 0 ? std::log(sum) - (x[tgt] - maxv) : 0.0;
    for (int64_t j = 0; j < V; ++j)
      probs[n * V + j] = static_cast<float>(std::exp(x[j] - maxv) / sum);
    losses[n] = static_cast<float>(loss);
    total += loss;
  }
  return total;
}

void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, float scale,
                           int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const int32_t tgt = targets[n];
    for (int64_t j = 0; j < V; ++j) {
      const double p = probs[n * V + j];
      dlogits[n * V + j] =
          tgt < 0 ? 0.0f : static_cast<float>((p - (j == tgt ? 1.0 : 0.0)) * scale);
    }
  }
}

}  // namespace snug::ref
