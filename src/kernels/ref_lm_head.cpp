// Reference chunked LM head + softmax cross-entropy: plain loops, double accumulation. The
// chunking is kept (logits and dlogits go through scratch as float, as in the unchunked path)
// so that the chunk bookkeeping is exercised by the same tests as the fast kernel.
#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/arg_checks.h"
#include "kernels/lm_head.h"

namespace snug::ref {

namespace {

inline double load(float x) {
  return x;
}
inline double load(uint16_t x) {
  return bf16_to_f32(x);
}

// lm_head_xent on checked arguments (kernels/lm_head_entry.inc).
// T = float: fp32 operands; T = uint16_t: bf16 operands, whose dlogits are rounded to bf16
// before the two backward products (they are a bf16 GEMM's input).
template <typename T>
double lm_head_xent_impl(float* losses, float* dlnf, float* dwte, const T* lnf, const T* wte,
                         const int32_t* targets, int64_t N, int64_t C, int64_t V, float scale,
                         float* scratch, int64_t chunk) {
  const bool backward = dlnf != nullptr || dwte != nullptr;
  double total = 0.0;
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t m = std::min(chunk, N - r0);
    // logits of the chunk, rounded to float as a materialized logits tensor would be
    for (int64_t i = 0; i < m; ++i) {
      const T* a = lnf + (r0 + i) * C;
      for (int64_t j = 0; j < V; ++j) {
        double acc = 0.0;
        for (int64_t c = 0; c < C; ++c) acc += load(a[c]) * load(wte[j * C + c]);
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
    if constexpr (sizeof(T) == 2)
      for (int64_t k = 0; k < m * V; ++k) scratch[k] = bf16_to_f32(f32_to_bf16(scratch[k]));
    // dwte before dlnf, so that dlnf may alias lnf (as in the fast kernel)
    if (dwte)
      for (int64_t j = 0; j < V; ++j)
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0.0;
          for (int64_t i = 0; i < m; ++i)
            acc += static_cast<double>(scratch[i * V + j]) * load(lnf[(r0 + i) * C + c]);
          dwte[j * C + c] += static_cast<float>(acc);
        }
    if (dlnf)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < V; ++j)
            acc += static_cast<double>(scratch[i * V + j]) * load(wte[j * C + c]);
          dlnf[(r0 + i) * C + c] = static_cast<float>(acc);
        }
  }
  return total;
}

}  // namespace

#include "kernels/lm_head_entry.inc"

}  // namespace snug::ref
