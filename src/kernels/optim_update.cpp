// The fast optimizer updates (kernels/optim_ops.inc): OpenMP over elements, blocks or rows, with
// the per-element math of kernels/optim_math.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/optim_math.h"
#include "kernels/optim_ops.h"
#include "kernels/parallel_loops.h"
#include "kernels/top_singular.h"

namespace snug::kernels {

namespace {

constexpr int64_t kStateBlock = quant8::kOptimizerBlock;

// Block b of an 8-bit state of n elements: [begin, end).
struct BlockRange {
  int64_t begin, end;
};
inline BlockRange block_range(int64_t b, int64_t n) {
  return {b * kStateBlock, std::min(n, b * kStateBlock + kStateBlock)};
}

// The new absmax of a block of fp32 values x (len) and its codes q, quantized against it with
// `nearest` (an all-zero block gets absmax 0 and the code nearest 0).
template <typename Nearest>
float requantize_block(const float* x, int64_t len, uint8_t* q, Nearest nearest) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < len; ++i) absmax = std::max(absmax, std::fabs(x[i]));
  const float inv = absmax > 0.0f ? 1.0f / absmax : 0.0f;
  for (int64_t i = 0; i < len; ++i) q[i] = nearest(x[i] * inv);
  return absmax;
}

// Adafactor's factored statistics of one (rows, cols) matrix g: R (rows) and C (cols) decay
// towards the row and column means of g^2 + eps1. col_sum: cols doubles of scratch.
void factored_moment(const float* g, float* R, float* C, int64_t rows, int64_t cols, float beta2t,
                     float one_minus_beta2t, std::vector<double>& col_sum) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    double acc = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const float gij = g[i * cols + j];
      acc += static_cast<double>(gij * gij + kAdafactorEps1);
    }
    const float mean = static_cast<float>(acc / static_cast<double>(cols));
    R[i] = R[i] * beta2t + one_minus_beta2t * mean;
  }
  std::fill(col_sum.begin(), col_sum.end(), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float gij = g[i * cols + j];
      col_sum[static_cast<size_t>(j)] += static_cast<double>(gij * gij + kAdafactorEps1);
    }
  for (int64_t j = 0; j < cols; ++j) {
    const float mean =
        static_cast<float>(col_sum[static_cast<size_t>(j)] / static_cast<double>(rows));
    C[j] = C[j] * beta2t + one_minus_beta2t * mean;
  }
}

// r_factor (rows) = rsqrt(R / mean(R)), c_factor (cols) = rsqrt(C): U = (r_i c_j) g_ij.
void factored_scales(const float* R, const float* C, int64_t rows, int64_t cols,
                     std::vector<float>& r_factor, std::vector<float>& c_factor) {
  double racc = 0.0;
  for (int64_t i = 0; i < rows; ++i) racc += static_cast<double>(R[i]);
  const float rmean = static_cast<float>(racc / static_cast<double>(rows));
  for (int64_t i = 0; i < rows; ++i) r_factor[static_cast<size_t>(i)] = rsqrt_f32(R[i] / rmean);
  for (int64_t j = 0; j < cols; ++j) c_factor[static_cast<size_t>(j)] = rsqrt_f32(C[j]);
}

}  // namespace

void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                float weight_decay, bool first) {
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      sgd_element(g[i], p[i], buf ? buf + i : nullptr, lr, momentum, weight_decay, first);
  });
}

void lion_update(float* p, const float* g, float* m, int64_t n, float lr, float beta1, float beta2,
                 float weight_decay) {
  const LionScalars s = lion_scalars(lr, beta1, beta2, weight_decay);
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) lion_element(s, g[i], m[i], p[i]);
  });
}

void lion_bnb_update(float* p, const float* g, float* m, int64_t n, float lr, float beta1,
                     float beta2, float weight_decay) {
  const LionScalars s = lion_scalars(lr, beta1, beta2, weight_decay);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) lion_bnb_element(s, g[i], m[i], p[i]);
}

void lion_bnb_update_8bit(float* p, const float* g, uint8_t* qm, float* absmax_m, int64_t n,
                          float lr, float beta1, float beta2, float weight_decay,
                          const quant8::Code* code) {
  const LionScalars s = lion_scalars(lr, beta1, beta2, weight_decay);
  const int64_t nb = (n + kStateBlock - 1) / kStateBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    const auto [i0, i1] = block_range(b, n);
    float m[kStateBlock];
    for (int64_t i = i0; i < i1; ++i) {
      m[i - i0] = code->value(qm[i]) * absmax_m[b];
      lion_bnb_element(s, g[i], m[i - i0], p[i]);
    }
    absmax_m[b] =
        requantize_block(m, i1 - i0, qm + i0, [code](float x) { return code->nearest_signed(x); });
  }
}

void adamw_bnb_update(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  const AdamBnbScalars s = adam_bnb_scalars(lr, beta1, beta2, eps, weight_decay, t);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) adam_bnb_element(s, g[i], m[i], v[i], p[i]);
}

void adamw_bnb_update_8bit(float* p, const float* g, uint8_t* qm, uint8_t* qv, float* absmax_m,
                           float* absmax_v, int64_t n, float lr, float beta1, float beta2,
                           float eps, float weight_decay, int64_t t, const quant8::Code* code_m,
                           const quant8::Code* code_v) {
  const AdamBnbScalars s = adam_bnb_scalars(lr, beta1, beta2, eps, weight_decay, t);
  const int64_t nb = (n + kStateBlock - 1) / kStateBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    const auto [i0, i1] = block_range(b, n);
    float m[kStateBlock], v[kStateBlock];
    for (int64_t i = i0; i < i1; ++i) {
      m[i - i0] = code_m->value(qm[i]) * absmax_m[b];
      v[i - i0] = code_v->value(qv[i]) * absmax_v[b];
      adam_bnb_element(s, g[i], m[i - i0], v[i - i0], p[i]);
    }
    absmax_m[b] = requantize_block(m, i1 - i0, qm + i0,
                                   [code_m](float x) { return code_m->nearest_signed(x); });
    absmax_v[b] =
        requantize_block(v, i1 - i0, qv + i0, [code_v](float x) { return code_v->nearest(x); });
  }
}

void adafactor_update(float* w, const float* g, float* R, float* C, float* V, int64_t batch,
                      int64_t rows, int64_t cols, float beta2t, float one_minus_beta2t, float lr_t,
                      float decay_alpha, bool decay) {
  const int64_t n_all = batch * rows * cols;
  // Pass 1: update the second-moment statistics, then find RMS(U) with U recomputed on the fly
  // (no full-size scratch). Pass 2 applies the clipped, scaled update.
  double ss = 0.0;
  if (V) {
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (int64_t i = 0; i < n_all; ++i) {
      const float u = vector_moment_update(g[i], V[i], beta2t, one_minus_beta2t);
      ss += static_cast<double>(u) * static_cast<double>(u);
    }
    const float denom = clip_denominator(ss, n_all);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n_all; ++i) {
      const float u = (rsqrt_f32(V[i]) * g[i]) / denom * lr_t;
      float wi = w[i];
      if (decay) wi = wi + decay_alpha * wi;
      w[i] = wi - u;
    }
    return;
  }
  std::vector<float> r_factor(static_cast<size_t>(rows)), c_factor(static_cast<size_t>(cols));
  std::vector<double> col_sum(static_cast<size_t>(cols));
  for (int64_t b = 0; b < batch; ++b) {
    const float* gb = g + b * rows * cols;
    factored_moment(gb, R + b * rows, C + b * cols, rows, cols, beta2t, one_minus_beta2t, col_sum);
    factored_scales(R + b * rows, C + b * cols, rows, cols, r_factor, c_factor);
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const float ri = r_factor[static_cast<size_t>(i)];
      for (int64_t j = 0; j < cols; ++j) {
        const float u = (ri * c_factor[static_cast<size_t>(j)]) * gb[i * cols + j];
        ss += static_cast<double>(u) * static_cast<double>(u);
      }
    }
  }
  const float denom = clip_denominator(ss, n_all);
  for (int64_t b = 0; b < batch; ++b) {
    const float* gb = g + b * rows * cols;
    float* wb = w + b * rows * cols;
    factored_scales(R + b * rows, C + b * cols, rows, cols, r_factor, c_factor);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const float ri = r_factor[static_cast<size_t>(i)];
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t k = i * cols + j;
        const float u = ((ri * c_factor[static_cast<size_t>(j)]) * gb[k]) / denom * lr_t;
        float wk = wb[k];
        if (decay) wk = wk + decay_alpha * wk;
        wb[k] = wk - u;
      }
    }
  }
}

void adalomo_update(float* w, float* g, float* R, float* C, float* V, int64_t rows, int64_t cols,
                    float beta2t, float one_minus_beta2t, float lr_t, float decay,
                    bool apply_decay) {
  const int64_t n_all = rows * cols;
  // U = (r c) g or rsqrt(V) g, kept in g; then RMS(U).
  double ss = 0.0;
  if (V) {
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (int64_t i = 0; i < n_all; ++i) {
      const float u = vector_moment_update(g[i], V[i], beta2t, one_minus_beta2t);
      g[i] = u;
      ss += static_cast<double>(u) * static_cast<double>(u);
    }
  } else {
    std::vector<float> r_factor(static_cast<size_t>(rows)), c_factor(static_cast<size_t>(cols));
    std::vector<double> col_sum(static_cast<size_t>(cols));
    factored_moment(g, R, C, rows, cols, beta2t, one_minus_beta2t, col_sum);
    factored_scales(R, C, rows, cols, r_factor, c_factor);
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const float ri = r_factor[static_cast<size_t>(i)];
      for (int64_t j = 0; j < cols; ++j) {
        const float u = (ri * c_factor[static_cast<size_t>(j)]) * g[i * cols + j];
        g[i * cols + j] = u;
        ss += static_cast<double>(u) * static_cast<double>(u);
      }
    }
  }
  const float denom = clip_denominator(ss, n_all);
  const float neg_lr_t = -lr_t;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n_all; ++i) {
    const float u = g[i] / denom;
    float wi = w[i];
    if (apply_decay) wi = wi * decay;
    w[i] = wi + neg_lr_t * u;
  }
}

void lomo_update(float* p, const float* g, int64_t n, float lr, float weight_decay,
                 float grad_coef) {
  const double wd = static_cast<double>(weight_decay);
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * wd);
  const float neg_lr = -lr;
  const bool clip = grad_coef != 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = clip ? g[i] * grad_coef : g[i];
    float wi = p[i];
    if (wd > 0.0) wi = wi * decay;
    p[i] = wi + neg_lr * gi;
  }
}

void galore_adam_update(float* p, const float* g, float* m, float* v, int64_t n, float beta1,
                        float beta2, float eps, float neg_step, float decay_alpha, bool decay) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    galore_apply_element(p[i], galore_adam_element(g[i], m[i], v[i], beta1, beta2, eps), neg_step,
                         decay_alpha, decay);
}

void galore_adam_normalize(float* low, float* m, float* v, int64_t n, float beta1, float beta2,
                           float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    low[i] = galore_adam_element(low[i], m[i], v[i], beta1, beta2, eps);
}

void galore_apply(float* p, const float* back, int64_t n, float neg_step, float scale,
                  float decay_alpha, bool decay) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    galore_apply_element(p[i], back[i] * scale, neg_step, decay_alpha, decay);
}

void galore_projector(float* P, const float* G, int64_t m, int64_t n, int64_t r, bool right) {
  if (right)
    top_right_singular_vectors(G, m, n, r, P);
  else
    top_left_singular_vectors(G, m, n, r, P);
}

}  // namespace snug::kernels
