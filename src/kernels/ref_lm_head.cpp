// Reference chunked LM head + softmax cross-entropy: plain loops, double accumulation. The
// chunking is kept (logits and dlogits go through scratch as float, as in the unchunked path)
// so that the chunk bookkeeping is exercised by the same tests as the fast kernel.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/lm_head.h"

namespace snug::ref {

double lm_head_xent(float* losses, float* dlnf, float* dwte, const float* lnf, const float* wte,
                    const int32_t* targets, int64_t N, int64_t C, int64_t V, float scale,
                    float* scratch, int64_t chunk) {
  SNUG_CHECK(N >= 0 && C >= 0 && V >= 1, "lm_head_xent: bad sizes N=", N, " C=", C, " V=", V);
  SNUG_CHECK(chunk >= 1, "lm_head_xent: chunk must be >= 1, got ", chunk);
  for (int64_t n = 0; n < N; ++n)
    SNUG_CHECK(targets[n] < V, "lm_head_xent: target ", targets[n], " at row ", n,
               " is out of range for a vocabulary of ", V);
  const bool backward = dlnf != nullptr || dwte != nullptr;
  double total = 0.0;
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t m = std::min(chunk, N - r0);
    // logits of the chunk, rounded to float as a materialized logits tensor would be
    for (int64_t i = 0; i < m; ++i) {
      const float* a = lnf + (r0 + i) * C;
      for (int64_t j = 0; j < V; ++j) {
        double acc = 0.0;
        for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(a[c]) * wte[j * C + c];
        scratch[i * V + j] = static_cast<float>(acc);
      }
    }
    // loss, then dlogits in place
    for (int64_t i = 0; i < m; ++i) {
      float* x = scratch + i * V;
      const int32_t tgt = targets[r0 + i];
      double loss = 0.0;
      if (tgt >= 0) {
        double maxv = -INFINITY;
        for (int64_t j = 0; j < V; ++j) maxv = std::max(maxv, static_cast<double>(x[j]));
        double sum = 0.0;
        for (int64_t j = 0; j < V; ++j) sum += std::exp(x[j] - maxv);
        loss = std::log(sum) - (x[tgt] - maxv);
        if (backward)
          for (int64_t j = 0; j < V; ++j) {
            const double p = std::exp(x[j] - maxv) / sum;
            x[j] = static_cast<float>((p - (j == tgt ? 1.0 : 0.0)) * scale);
          }
      } else if (backward) {
        for (int64_t j = 0; j < V; ++j) x[j] = 0.0f;
      }
      if (losses) losses[r0 + i] = static_cast<float>(loss);
      total += loss;
    }
    if (!backward) continue;
    // dwte before dlnf, so that dlnf may alias lnf (as in the fast kernel)
    if (dwte)
      for (int64_t j = 0; j < V; ++j)
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0.0;
          for (int64_t i = 0; i < m; ++i)
            acc += static_cast<double>(scratch[i * V + j]) * lnf[(r0 + i) * C + c];
          dwte[j * C + c] += static_cast<float>(acc);
        }
    if (dlnf)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < V; ++j)
            acc += static_cast<double>(scratch[i * V + j]) * wte[j * C + c];
          dlnf[(r0 + i) * C + c] = static_cast<float>(acc);
        }
  }
  return total;
}

}  // namespace snug::ref
