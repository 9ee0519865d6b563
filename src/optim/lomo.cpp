#include "optim/lomo.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"

namespace snug {

namespace {

float rsqrtf_(float x) {
  return 1.0f / std::sqrt(x);
}

}  // namespace

InBackwardOptimizer::InBackwardOptimizer(const ParameterList& params, const OptimizerOptions& opts)
    : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) params_.push_back(p);
}

void InBackwardOptimizer::begin_step(float lr, float grad_coef) {
  ++steps_;
  lr_ = lr;
  coef_ = grad_coef;
}

void InBackwardOptimizer::update(Parameter& p) {
  if (!p.requires_grad || !p.grad.defined()) return;
  allocate(p);
  if (!p.value.is_meta()) update_values(p);
  p.free_grad();
}

void InBackwardOptimizer::step(float lr) {
  begin_step(lr, 1.0f);
  for (Parameter* p : params_) update(*p);
}

void Lomo::update_values(Parameter& p) {
  const int64_t n = p.value.numel();
  float* w = p.value.data<float>();
  const float* g = p.grad.data<float>();
  const double wd = p.decay ? static_cast<double>(opts_.weight_decay) : 0.0;
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr_) * wd);
  const float neg_lr = -lr_, coef = coef_;
  const bool clip = coef_ != 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = clip ? g[i] * coef : g[i];
    float wi = w[i];
    if (wd > 0.0) wi = wi * decay;
    w[i] = wi + neg_lr * gi;
  }
}

AdaLomo::AdaLomo(const ParameterList& params, const OptimizerOptions& opts)
    : InBackwardOptimizer(params, opts) {
  for (Parameter* p : params_) {
    SNUG_CHECK(p->value.ndim() == 1 || p->value.ndim() == 2, "adalomo: parameter '", p->name,
               "' has ", p->value.ndim(), " dimensions; only vectors and matrices are supported");
    state_.push_back({p, {}, {}, {}});
  }
}

int64_t AdaLomo::state_bytes(const Shape& shape) {
  return shape.size() == 2 ? 4 * (shape[0] + shape[1]) : 4 * shape_numel(shape);
}

AdaLomo::State& AdaLomo::state_for(const Parameter& p) {
  for (State& s : state_)
    if (s.p == &p) return s;
  throw Error(detail::concat("adalomo: parameter '", p.name, "' is not optimized here"));
}

void AdaLomo::allocate(Parameter& p) {
  State& s = state_for(p);
  if (s.row.defined() || s.full.defined()) return;
  Device& dev = p.value.device();
  if (p.value.ndim() == 2) {
    s.row = Tensor::zeros({p.value.dim(0)}, DType::f32, Category::optimizer_state, dev);
    s.col = Tensor::zeros({p.value.dim(1)}, DType::f32, Category::optimizer_state, dev);
  } else {
    s.full = Tensor::zeros(p.value.shape(), DType::f32, Category::optimizer_state, dev);
  }
}

std::vector<std::pair<std::string, Tensor*>> AdaLomo::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    allocate(*s.p);
    if (s.full.defined()) {
      out.emplace_back(s.p->name + ".exp_avg_sq", &s.full);
    } else {
      out.emplace_back(s.p->name + ".exp_avg_sq_row", &s.row);
      out.emplace_back(s.p->name + ".exp_avg_sq_col", &s.col);
    }
  }
  return out;
}

void AdaLomo::update_values(Parameter& p) {
  State& s = state_for(p);
  const int64_t n_all = p.value.numel();
  float* w = p.value.data<float>();
  // The gradient buffer is the scratch: clipped in place, then overwritten by the update U
  // (it is freed right after this call).
  float* g = p.grad.data<float>();
  if (coef_ != 1.0f) {
    const float c = coef_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n_all; ++i) g[i] = g[i] * c;
  }
  const double t = static_cast<double>(steps_);
  const double beta2t_d = 1.0 - std::pow(t, kDecayRate);
  const float beta2t = static_cast<float>(beta2t_d);
  const float one_minus_beta2t = static_cast<float>(1.0 - beta2t_d);
  // lr_t from RMS(p) before the update.
  const float rms_p = static_cast<float>(std::sqrt(kernels::sum_squares(w, n_all)) /
                                         std::sqrt(static_cast<double>(n_all)));
  const float lr_t =
      static_cast<float>(static_cast<double>(lr_) * std::max(kEps2, static_cast<double>(rms_p)));
  const double wd = p.decay ? static_cast<double>(opts_.weight_decay) : 0.0;
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr_t) * wd);

  double ss = 0.0;
  if (s.row.defined()) {
    const int64_t rows = p.value.dim(0), cols = p.value.dim(1);
    float* R = s.row.data<float>();
    float* C = s.col.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      double acc = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        const float gij = g[i * cols + j];
        acc += static_cast<double>(gij * gij + kEps1);
      }
      R[i] = R[i] * beta2t + one_minus_beta2t * static_cast<float>(acc / static_cast<double>(cols));
    }
    std::vector<double> col_sum(static_cast<size_t>(cols), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const float gij = g[i * cols + j];
        col_sum[static_cast<size_t>(j)] += static_cast<double>(gij * gij + kEps1);
      }
    std::vector<float> c_factor(static_cast<size_t>(cols)), r_factor(static_cast<size_t>(rows));
    for (int64_t j = 0; j < cols; ++j) {
      const float mean =
          static_cast<float>(col_sum[static_cast<size_t>(j)] / static_cast<double>(rows));
      C[j] = C[j] * beta2t + one_minus_beta2t * mean;
      c_factor[static_cast<size_t>(j)] = rsqrtf_(C[j]);
    }
    double racc = 0.0;
    for (int64_t i = 0; i < rows; ++i) racc += static_cast<double>(R[i]);
    const float rmean = static_cast<float>(racc / static_cast<double>(rows));
    for (int64_t i = 0; i < rows; ++i) r_factor[static_cast<size_t>(i)] = rsqrtf_(R[i] / rmean);
      // U = (r c) g, kept in g; then RMS(U).
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const float ri = r_factor[static_cast<size_t>(i)];
      for (int64_t j = 0; j < cols; ++j) {
        const float u = (ri * c_factor[static_cast<size_t>(j)]) * g[i * cols + j];
        g[i * cols + j] = u;
        ss += static_cast<double>(u) * static_cast<double>(u);
      }
    }
  } else {
    float* V = s.full.data<float>();
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (int64_t i = 0; i < n_all; ++i) {
      V[i] = V[i] * beta2t + one_minus_beta2t * (g[i] * g[i] + kEps1);
      const float u = rsqrtf_(V[i]) * g[i];
      g[i] = u;
      ss += static_cast<double>(u) * static_cast<double>(u);
    }
  }
  const float rms_u = static_cast<float>(std::sqrt(ss) / std::sqrt(static_cast<double>(n_all)));
  const float denom = std::max(rms_u / static_cast<float>(kClipThreshold), 1.0f);
  const float neg_lr_t = -lr_t;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n_all; ++i) {
    const float u = g[i] / denom;
    float wi = w[i];
    if (wd > 0.0) wi = wi * decay;
    w[i] = wi + neg_lr_t * u;
  }
}

}  // namespace snug
