#include "optim/adafactor.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace snug {

namespace {

// Root mean square, from the engine's thread-count-independent sum of squares.
double rms_of(const float* x, int64_t n) {
  return std::sqrt(kernels::sum_squares(x, n)) / std::sqrt(static_cast<double>(n));
}

float rsqrtf_(float x) {
  return 1.0f / std::sqrt(x);
}

}  // namespace

Adafactor::Adafactor(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, {}, {}, {}, 0});
}

int64_t Adafactor::state_bytes(const Shape& shape) {
  if (shape.size() >= 2) {
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < shape.size(); ++i) batch *= shape[i];
    return 4 * batch * (shape[shape.size() - 2] + shape[shape.size() - 1]);
  }
  return 4 * shape_numel(shape);
}

void Adafactor::allocate(State& s) {
  const Parameter& p = *s.p;
  const Shape& sh = p.value.shape();
  Device& dev = p.value.device();
  if (sh.size() >= 2) {
    const Shape row_shape(sh.begin(), sh.end() - 1);
    Shape col_shape(sh.begin(), sh.end() - 2);
    col_shape.push_back(sh.back());
    s.row = Tensor::zeros(row_shape, DType::f32, Category::optimizer_state, dev);
    s.col = Tensor::zeros(col_shape, DType::f32, Category::optimizer_state, dev);
  } else {
    s.full = Tensor::zeros(sh, DType::f32, Category::optimizer_state, dev);
  }
}

std::vector<std::pair<std::string, Tensor*>> Adafactor::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.row.defined() && !s.full.defined()) allocate(s);
    if (s.full.defined()) {
      out.emplace_back(s.p->name + ".exp_avg_sq", &s.full);
    } else {
      out.emplace_back(s.p->name + ".exp_avg_sq_row", &s.row);
      out.emplace_back(s.p->name + ".exp_avg_sq_col", &s.col);
    }
  }
  return out;
}

nlohmann::json Adafactor::extra_state() const {
  nlohmann::json steps = nlohmann::json::object();
  for (const State& s : state_) steps[s.p->name] = s.step;
  return {{"param_steps", steps}};
}

void Adafactor::load_extra_state(const nlohmann::json& state) {
  const nlohmann::json& steps = state.at("param_steps");
  for (State& s : state_) s.step = steps.at(s.p->name).get<int64_t>();
}

void Adafactor::step(float lr) {
  ++steps_;
  for (State& s : state_) {
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    if (!s.row.defined() && !s.full.defined()) allocate(s);
    ++s.step;
    if (p.value.is_meta()) continue;
    update_one(s, lr);
  }
}

void Adafactor::update_one(State& s, float lr) {
  Parameter& p = *s.p;
  const int64_t n_all = p.value.numel();
  float* w = p.value.data<float>();
  const float* g = p.grad.data<float>();
  const double t = static_cast<double>(s.step);

  // Learning rate: external, or the relative step scaled by RMS(p) (computed before the update).
  float lr_t = lr;
  if (opts_.adafactor_relative_step) {
    const double rel = std::min(1e-2, 1.0 / std::sqrt(t));
    const float rms_p = static_cast<float>(rms_of(w, n_all));
    lr_t = static_cast<float>(std::max(kEps2, static_cast<double>(rms_p)) * rel);
  }
  const double beta2t_d = 1.0 - std::pow(t, kDecayRate);
  const float beta2t = static_cast<float>(beta2t_d);
  const float one_minus_beta2t = static_cast<float>(1.0 - beta2t_d);

  // Pass 1: update the second-moment statistics, then find RMS(U) with U recomputed on the fly
  // (no full-size scratch). Pass 2 applies the clipped, scaled update.
  double ss = 0.0;
  if (s.row.defined()) {
    const Shape& sh = p.value.shape();
    const int64_t rows = sh[sh.size() - 2], cols = sh.back();
    const int64_t batch = n_all / (rows * cols);
    float* R = s.row.data<float>();
    float* C = s.col.data<float>();
    std::vector<float> r_factor(static_cast<size_t>(rows));
    std::vector<double> col_sum(static_cast<size_t>(cols));
    for (int64_t b = 0; b < batch; ++b) {
      const float* gb = g + b * rows * cols;
      float* Rb = R + b * rows;
      float* Cb = C + b * cols;
      // Row means of g^2 + eps1 (over the columns).
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < rows; ++i) {
        double acc = 0.0;
        for (int64_t j = 0; j < cols; ++j) {
          const float gij = gb[i * cols + j];
          acc += static_cast<double>(gij * gij + kEps1);
        }
        const float mean = static_cast<float>(acc / static_cast<double>(cols));
        Rb[i] = Rb[i] * beta2t + one_minus_beta2t * mean;
      }
      // Column means (over the rows).
      std::fill(col_sum.begin(), col_sum.end(), 0.0);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const float gij = gb[i * cols + j];
          col_sum[static_cast<size_t>(j)] += static_cast<double>(gij * gij + kEps1);
        }
      for (int64_t j = 0; j < cols; ++j) {
        const float mean =
            static_cast<float>(col_sum[static_cast<size_t>(j)] / static_cast<double>(rows));
        Cb[j] = Cb[j] * beta2t + one_minus_beta2t * mean;
      }
      // r_factor = rsqrt(R / mean(R)); c_factor = rsqrt(C).
      double racc = 0.0;
      for (int64_t i = 0; i < rows; ++i) racc += static_cast<double>(Rb[i]);
      const float rmean = static_cast<float>(racc / static_cast<double>(rows));
      for (int64_t i = 0; i < rows; ++i) r_factor[static_cast<size_t>(i)] = rsqrtf_(Rb[i] / rmean);
      std::vector<float> c_factor(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) c_factor[static_cast<size_t>(j)] = rsqrtf_(Cb[j]);
#pragma omp parallel for reduction(+ : ss) schedule(static)
      for (int64_t i = 0; i < rows; ++i) {
        const float ri = r_factor[static_cast<size_t>(i)];
        for (int64_t j = 0; j < cols; ++j) {
          const float u = (ri * c_factor[static_cast<size_t>(j)]) * gb[i * cols + j];
          ss += static_cast<double>(u) * static_cast<double>(u);
        }
      }
    }
    const float rms_u = static_cast<float>(std::sqrt(ss) / std::sqrt(static_cast<double>(n_all)));
    const float denom = std::max(rms_u / static_cast<float>(kClipThreshold), 1.0f);
    const float decay_alpha =
        static_cast<float>(-static_cast<double>(opts_.weight_decay) * static_cast<double>(lr_t));
    const bool decay = p.decay && opts_.weight_decay != 0.0f;
    for (int64_t b = 0; b < batch; ++b) {
      const float* gb = g + b * rows * cols;
      float* wb = w + b * rows * cols;
      const float* Rb = R + b * rows;
      const float* Cb = C + b * cols;
      double racc = 0.0;
      for (int64_t i = 0; i < rows; ++i) racc += static_cast<double>(Rb[i]);
      const float rmean = static_cast<float>(racc / static_cast<double>(rows));
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < rows; ++i) {
        const float ri = rsqrtf_(Rb[i] / rmean);
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t k = i * cols + j;
          const float u = ((ri * rsqrtf_(Cb[j])) * gb[k]) / denom * lr_t;
          float wk = wb[k];
          if (decay) wk = wk + decay_alpha * wk;
          wb[k] = wk - u;
        }
      }
    }
  } else {
    float* V = s.full.data<float>();
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (int64_t i = 0; i < n_all; ++i) {
      V[i] = V[i] * beta2t + one_minus_beta2t * (g[i] * g[i] + kEps1);
      const float u = rsqrtf_(V[i]) * g[i];
      ss += static_cast<double>(u) * static_cast<double>(u);
    }
    const float rms_u = static_cast<float>(std::sqrt(ss) / std::sqrt(static_cast<double>(n_all)));
    const float denom = std::max(rms_u / static_cast<float>(kClipThreshold), 1.0f);
    const float decay_alpha =
        static_cast<float>(-static_cast<double>(opts_.weight_decay) * static_cast<double>(lr_t));
    const bool decay = p.decay && opts_.weight_decay != 0.0f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n_all; ++i) {
      const float u = (rsqrtf_(V[i]) * g[i]) / denom * lr_t;
      float wi = w[i];
      if (decay) wi = wi + decay_alpha * wi;
      w[i] = wi - u;
    }
  }
}

}  // namespace snug
