// The reference optimizer updates (kernels/optim_ops.inc): one plain loop per op, element by
// element, with the per-element math of kernels/optim_math.h; Adafactor's update U is stored
// rather than recomputed, and GaLore's projector comes from Jacobi sweeps instead of LAPACK.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "kernels/optim_math.h"
#include "kernels/optim_ops.h"

namespace snug::ref {

using kernels::kAdafactorEps1;

void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                float weight_decay, bool first) {
  for (int64_t i = 0; i < n; ++i)
    kernels::sgd_element(g[i], p[i], buf ? &buf[i] : nullptr, lr, momentum, weight_decay, first);
}

void lion_update(float* p, const float* g, float* m, int64_t n, float lr, float beta1, float beta2,
                 float weight_decay) {
  const kernels::LionScalars s = kernels::lion_scalars(lr, beta1, beta2, weight_decay);
  for (int64_t i = 0; i < n; ++i) kernels::lion_element(s, g[i], m[i], p[i]);
}

void lion_bnb_update(float* p, const float* g, float* m, int64_t n, float lr, float beta1,
                     float beta2, float weight_decay) {
  const kernels::LionScalars s = kernels::lion_scalars(lr, beta1, beta2, weight_decay);
  for (int64_t i = 0; i < n; ++i) kernels::lion_bnb_element(s, g[i], m[i], p[i]);
}

namespace {

// Dequantizes n codes (block-wise absmax) into fp32.
std::vector<float> dequantize8(const uint8_t* q, const float* absmax, int64_t n,
                               const quant8::Code& code) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = code.value(q[i]) * absmax[i / quant8::kOptimizerBlock];
  return x;
}

// Quantizes x back: per block absmax = max |x|, q = nearest(x / absmax) (0 for a zero block).
void quantize8(const std::vector<float>& x, uint8_t* q, float* absmax, const quant8::Code& code,
               bool is_signed) {
  const int64_t n = static_cast<int64_t>(x.size()), block = quant8::kOptimizerBlock;
  for (int64_t b = 0; b * block < n; ++b) {
    const int64_t end = std::min(n, (b + 1) * block);
    float a = 0.0f;
    for (int64_t i = b * block; i < end; ++i) a = std::max(a, std::fabs(x[static_cast<size_t>(i)]));
    absmax[b] = a;
    const float inv = a > 0.0f ? 1.0f / a : 0.0f;
    for (int64_t i = b * block; i < end; ++i) {
      const float y = x[static_cast<size_t>(i)] * inv;
      q[i] = is_signed ? code.nearest_signed(y) : code.nearest(y);
    }
  }
}

}  // namespace

void lion_bnb_update_8bit(float* p, const float* g, uint8_t* qm, float* absmax_m, int64_t n,
                          float lr, float beta1, float beta2, float weight_decay,
                          const quant8::Code* code) {
  std::vector<float> m = dequantize8(qm, absmax_m, n, *code);
  lion_bnb_update(p, g, m.data(), n, lr, beta1, beta2, weight_decay);
  quantize8(m, qm, absmax_m, *code, true);
}

void adamw_bnb_update(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  const kernels::AdamBnbScalars s =
      kernels::adam_bnb_scalars(lr, beta1, beta2, eps, weight_decay, t);
  for (int64_t i = 0; i < n; ++i) kernels::adam_bnb_element(s, g[i], m[i], v[i], p[i]);
}

void adamw_bnb_update_8bit(float* p, const float* g, uint8_t* qm, uint8_t* qv, float* absmax_m,
                           float* absmax_v, int64_t n, float lr, float beta1, float beta2,
                           float eps, float weight_decay, int64_t t, const quant8::Code* code_m,
                           const quant8::Code* code_v) {
  std::vector<float> m = dequantize8(qm, absmax_m, n, *code_m);
  std::vector<float> v = dequantize8(qv, absmax_v, n, *code_v);
  adamw_bnb_update(p, g, m.data(), v.data(), n, lr, beta1, beta2, eps, weight_decay, t);
  quantize8(m, qm, absmax_m, *code_m, true);
  quantize8(v, qv, absmax_v, *code_v, false);
}

namespace {

// The unclipped update U of Adafactor/AdaLomo for g (batch, rows, cols), updating R, C (or V).
std::vector<float> second_moment_update(const float* g, float* R, float* C, float* V, int64_t batch,
                                        int64_t rows, int64_t cols, float beta2t,
                                        float one_minus_beta2t) {
  const int64_t n = batch * rows * cols;
  std::vector<float> u(static_cast<size_t>(n));
  if (V) {
    for (int64_t i = 0; i < n; ++i)
      u[static_cast<size_t>(i)] =
          kernels::vector_moment_update(g[i], V[i], beta2t, one_minus_beta2t);
    return u;
  }
  const auto g2 = [&](int64_t b, int64_t i, int64_t j) {
    const float x = g[(b * rows + i) * cols + j];
    return static_cast<double>(x * x + kAdafactorEps1);
  };
  for (int64_t b = 0; b < batch; ++b) {
    float* Rb = R + b * rows;
    float* Cb = C + b * cols;
    for (int64_t i = 0; i < rows; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < cols; ++j) s += g2(b, i, j);
      Rb[i] = Rb[i] * beta2t + one_minus_beta2t * static_cast<float>(s / static_cast<double>(cols));
    }
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0.0;
      for (int64_t i = 0; i < rows; ++i) s += g2(b, i, j);
      Cb[j] = Cb[j] * beta2t + one_minus_beta2t * static_cast<float>(s / static_cast<double>(rows));
    }
    const float rmean =
        static_cast<float>(std::accumulate(Rb, Rb + rows, 0.0) / static_cast<double>(rows));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t k = (b * rows + i) * cols + j;
        u[static_cast<size_t>(k)] =
            (kernels::rsqrt_f32(Rb[i] / rmean) * kernels::rsqrt_f32(Cb[j])) * g[k];
      }
  }
  return u;
}

double sum_of_squares(const std::vector<float>& u) {
  double ss = 0.0;
  for (float x : u) ss += static_cast<double>(x) * static_cast<double>(x);
  return ss;
}

}  // namespace

void adafactor_update(float* w, const float* g, float* R, float* C, float* V, int64_t batch,
                      int64_t rows, int64_t cols, float beta2t, float one_minus_beta2t, float lr_t,
                      float decay_alpha, bool decay) {
  const std::vector<float> u =
      second_moment_update(g, R, C, V, batch, rows, cols, beta2t, one_minus_beta2t);
  const int64_t n = batch * rows * cols;
  const float denom = kernels::clip_denominator(sum_of_squares(u), n);
  for (int64_t i = 0; i < n; ++i) {
    float wi = w[i];
    if (decay) wi = wi + decay_alpha * wi;
    w[i] = wi - u[static_cast<size_t>(i)] / denom * lr_t;
  }
}

void adalomo_update(float* w, float* g, float* R, float* C, float* V, int64_t rows, int64_t cols,
                    float beta2t, float one_minus_beta2t, float lr_t, float decay,
                    bool apply_decay) {
  const std::vector<float> u =
      second_moment_update(g, R, C, V, 1, rows, cols, beta2t, one_minus_beta2t);
  const int64_t n = rows * cols;
  std::copy(u.begin(), u.end(), g);
  const float denom = kernels::clip_denominator(sum_of_squares(u), n);
  for (int64_t i = 0; i < n; ++i) {
    float wi = w[i];
    if (apply_decay) wi = wi * decay;
    w[i] = wi + (-lr_t) * (g[i] / denom);
  }
}

void lomo_update(float* p, const float* g, int64_t n, float lr, float weight_decay,
                 float grad_coef) {
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    const float gi = grad_coef != 1.0f ? g[i] * grad_coef : g[i];
    if (weight_decay > 0.0f) p[i] = p[i] * decay;
    p[i] = p[i] + (-lr) * gi;
  }
}

void galore_adam_update(float* p, const float* g, float* m, float* v, int64_t n, float beta1,
                        float beta2, float eps, float neg_step, float decay_alpha, bool decay) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = kernels::galore_adam_element(g[i], m[i], v[i], beta1, beta2, eps);
    kernels::galore_apply_element(p[i], u, neg_step, decay_alpha, decay);
  }
}

void galore_adam_normalize(float* low, float* m, float* v, int64_t n, float beta1, float beta2,
                           float eps) {
  for (int64_t i = 0; i < n; ++i)
    low[i] = kernels::galore_adam_element(low[i], m[i], v[i], beta1, beta2, eps);
}

void galore_apply(float* p, const float* back, int64_t n, float neg_step, float scale,
                  float decay_alpha, bool decay) {
  for (int64_t i = 0; i < n; ++i)
    kernels::galore_apply_element(p[i], back[i] * scale, neg_step, decay_alpha, decay);
}

// The Gram matrix of G's shorter side in double, diagonalized by cyclic Jacobi rotations; its
// r largest eigenvectors, sign-normalized as kernels/top_singular.h says, make the projector.
void galore_projector(float* P, const float* G, int64_t m, int64_t n, int64_t r, bool right) {
  SNUG_CHECK(r >= 1 && r <= std::min(m, n), "galore_projector: rank ", r, " outside [1, ",
             std::min(m, n), "]");
  const int64_t k = right ? n : m;
  const auto at = [k](std::vector<double>& M, int64_t i, int64_t j) -> double& {
    return M[static_cast<size_t>(i * k + j)];
  };
  std::vector<double> A(static_cast<size_t>(k * k), 0.0), V(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t t = 0; t < (right ? m : n); ++t)
        at(A, i, j) += right ? static_cast<double>(G[t * n + i]) * G[t * n + j]
                             : static_cast<double>(G[i * n + t]) * G[j * n + t];
  for (int64_t i = 0; i < k; ++i) at(V, i, i) = 1.0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0, total = 0.0;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) {
        total += at(A, i, j) * at(A, i, j);
        if (i != j) off += at(A, i, j) * at(A, i, j);
      }
    if (off <= 1e-30 * total) break;
    for (int64_t p = 0; p < k; ++p)
      for (int64_t q = p + 1; q < k; ++q) {
        const double apq = at(A, p, q);
        if (apq == 0.0) continue;
        const double theta = (at(A, q, q) - at(A, p, p)) / (2.0 * apq);
        const double t = (theta >= 0.0 ? 1.0 : -1.0) / (std::fabs(theta) + std::hypot(theta, 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (int64_t i = 0; i < k; ++i) {  // A J, V J (columns p, q)
          const double aip = at(A, i, p), aiq = at(A, i, q);
          at(A, i, p) = c * aip - s * aiq;
          at(A, i, q) = s * aip + c * aiq;
          const double vip = at(V, i, p), viq = at(V, i, q);
          at(V, i, p) = c * vip - s * viq;
          at(V, i, q) = s * vip + c * viq;
        }
        for (int64_t j = 0; j < k; ++j) {  // J^T (A J) (rows p, q)
          const double apj = at(A, p, j), aqj = at(A, q, j);
          at(A, p, j) = c * apj - s * aqj;
          at(A, q, j) = s * apj + c * aqj;
        }
      }
  }
  std::vector<int64_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return at(A, a, a) > at(A, b, b); });
  for (int64_t j = 0; j < r; ++j) {
    const int64_t col = order[static_cast<size_t>(j)];
    int64_t arg = 0;
    for (int64_t i = 1; i < k; ++i)
      if (std::fabs(at(V, i, col)) > std::fabs(at(V, arg, col))) arg = i;
    const double sign = at(V, arg, col) < 0.0 ? -1.0 : 1.0;
    for (int64_t i = 0; i < k; ++i) {
      const float x = static_cast<float>(sign * at(V, i, col));
      if (right)
        P[j * n + i] = x;
      else
        P[i * r + j] = x;
    }
  }
}

}  // namespace snug::ref
