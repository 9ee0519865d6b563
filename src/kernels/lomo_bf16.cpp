// LOMO and AdaLomo on bf16 weights and gradients (--bf16-full, kernels/ops.inc): arithmetic in
// float on the widened values, in the fp32 kernels' order (optim_update.cpp), the weights rounded
// stochastically (kernels/stochastic_round.h) or to nearest even. Every reduction has a fixed
// order (row by row, column by column, kernels/partial_sum.h), so the result is the same at any
// thread count; each element's random bits depend only on its index.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/optim_math.h"
#include "kernels/parallel_loops.h"
#include "kernels/partial_sum.h"
#include "kernels/stochastic_round.h"

namespace snug::kernels {

namespace {
constexpr int64_t kColBlock = 256;

inline uint16_t store(float f, bool stochastic, uint64_t key, int64_t i) {
  return stochastic ? f32_to_bf16_stochastic(f, random_bits(key, i)) : f32_to_bf16(f);
}

// The clipped gradient g' of element i in float.
struct ClippedGrad {
  const uint16_t* g;
  float coef;
  float operator()(int64_t i) const {
    const float x = bf16_to_f32(g[i]);
    return coef != 1.0f ? x * coef : x;
  }
};

// Adafactor's R (rows) and C (cols) from g' (rows, cols), as optim_update.cpp's factored_moment:
// each row's and each column's mean of g'^2 + eps1 summed in index order in double.
void factored_moment_bf16(const ClippedGrad& gc, float* R, float* C, int64_t rows, int64_t cols,
                          float beta2t, float one_minus_beta2t) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    double acc = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const float x = gc(i * cols + j);
      acc += static_cast<double>(x * x + kAdafactorEps1);
    }
    R[i] = R[i] * beta2t + one_minus_beta2t * static_cast<float>(acc / static_cast<double>(cols));
  }
  // Columns in blocks, each block's rows in order: every column sums in row order.
  const int64_t blocks = (cols + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j0 = b * kColBlock, j1 = std::min(cols, j0 + kColBlock);
    double sum[kColBlock] = {};
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const float x = gc(i * cols + j);
        sum[j - j0] += static_cast<double>(x * x + kAdafactorEps1);
      }
    for (int64_t j = j0; j < j1; ++j) {
      const float mean = static_cast<float>(sum[j - j0] / static_cast<double>(rows));
      C[j] = C[j] * beta2t + one_minus_beta2t * mean;
    }
  }
}

}  // namespace

void lomo_update_bf16(uint16_t* p, const uint16_t* g, int64_t n, float lr, float weight_decay,
                      float grad_coef, bool stochastic, uint64_t key) {
  const double wd = static_cast<double>(weight_decay);
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * wd);
  const float neg_lr = -lr;
  const ClippedGrad gc{g, grad_coef};
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float wi = bf16_to_f32(p[i]);
      if (wd > 0.0) wi = wi * decay;
      p[i] = store(wi + neg_lr * gc(i), stochastic, key, i);
    }
  });
}

void adalomo_update_bf16(uint16_t* w, const uint16_t* g, float* R, float* C, float* V, int64_t rows,
                         int64_t cols, float grad_coef, float beta2t, float one_minus_beta2t,
                         float lr_t, float decay, bool apply_decay, bool stochastic, uint64_t key) {
  const int64_t n = rows * cols;
  const ClippedGrad gc{g, grad_coef};
  const float neg_lr_t = -lr_t;
  // U of element i, recomputed in both passes (g stays bf16; no full-size scratch).
  std::vector<float> r_factor, c_factor;
  if (V) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float x = gc(i);
      V[i] = V[i] * beta2t + one_minus_beta2t * (x * x + kAdafactorEps1);
    }
  } else {
    factored_moment_bf16(gc, R, C, rows, cols, beta2t, one_minus_beta2t);
    r_factor.resize(static_cast<size_t>(rows));
    c_factor.resize(static_cast<size_t>(cols));
    double racc = 0.0;
    for (int64_t i = 0; i < rows; ++i) racc += static_cast<double>(R[i]);
    const float rmean = static_cast<float>(racc / static_cast<double>(rows));
    for (int64_t i = 0; i < rows; ++i) r_factor[static_cast<size_t>(i)] = rsqrt_f32(R[i] / rmean);
    for (int64_t j = 0; j < cols; ++j) c_factor[static_cast<size_t>(j)] = rsqrt_f32(C[j]);
  }
  const float* rf = r_factor.data();
  const float* cf = c_factor.data();
  const auto u_of = [&](int64_t i) {
    if (V) return rsqrt_f32(V[i]) * gc(i);
    return (rf[i / cols] * cf[i % cols]) * gc(i);
  };
  const double ss = fixed_partial_sum(n, [&](int64_t i) {
    const double u = u_of(i);
    return u * u;
  });
  const float denom = clip_denominator(ss, n);
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float wi = bf16_to_f32(w[i]);
      if (apply_decay) wi = wi * decay;
      w[i] = store(wi + neg_lr_t * (u_of(i) / denom), stochastic, key, i);
    }
  });
}

}  // namespace snug::kernels
