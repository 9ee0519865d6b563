#include "optim/adamw8bit.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/quant8.h"

namespace snug {

namespace {

constexpr int64_t kBlock = quant8::kOptimizerBlock;

struct Scalars {
  float b1, b2, one_minus_b1, one_minus_b2, step_size, correction2_eps, decay;
  bool apply_decay;
};

Scalars scalars(const OptimizerOptions& o, float lr, float wd, int64_t t) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(t));
  const double bc2 =
      std::sqrt(1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(t)));
  Scalars s;
  s.b1 = o.beta1;
  s.b2 = o.beta2;
  s.one_minus_b1 = 1.0f - o.beta1;
  s.one_minus_b2 = 1.0f - o.beta2;
  s.step_size = static_cast<float>(-static_cast<double>(lr) * bc2 / bc1);
  s.correction2_eps = static_cast<float>(bc2) * o.eps;
  s.decay = 1.0f - lr * wd;
  s.apply_decay = wd > 0.0f;
  return s;
}

// The fp32 part of one element's update; m and v in/out.
inline void adam_element(const Scalars& s, float g, float& m, float& v, float& p) {
  if (!std::isfinite(g)) {
    m = 0.0f;
    v = 0.0f;
    return;
  }
  v = v * s.b2 + s.one_minus_b2 * g * g;
  m = m * s.b1 + s.one_minus_b1 * g;
  p = p + s.step_size * (m / (std::sqrt(v) + s.correction2_eps));
  if (s.apply_decay) p = p * s.decay;
}

}  // namespace

AdamW8bit::AdamW8bit(const ParameterList& params, const OptimizerOptions& opts, std::string name)
    : opts_(opts), name_(std::move(name)) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, uses_8bit(*p, opts), {}, {}, {}, {}});
}

bool AdamW8bit::uses_8bit(const Parameter& p, const OptimizerOptions& opts) {
  if (p.value.numel() < opts.min_8bit_size) return false;
  const bool embedding =
      p.name.find("wte") != std::string::npos || p.name.find("wpe") != std::string::npos;
  return !embedding || opts.optim_8bit_embeddings;
}

int64_t AdamW8bit::state_bytes(const Parameter& p, const OptimizerOptions& opts) {
  const int64_t n = p.value.numel();
  if (!uses_8bit(p, opts)) return 8 * n;
  return 2 * n + 2 * 4 * quant8::num_blocks(n, kBlock);
}

const AdamW8bit::State& AdamW8bit::state_of(const Parameter* p) const {
  for (const State& s : state_)
    if (s.p == p) return s;
  throw Error(detail::concat("AdamW8bit: parameter '", p->name, "' is not optimized here"));
}

void AdamW8bit::allocate(State& s) {
  const Parameter& p = *s.p;
  const int64_t n = p.value.numel();
  Device& dev = p.value.device();
  const Shape flat{n};
  if (s.q8) {
    const Shape blocks{quant8::num_blocks(n, kBlock)};
    s.m = Tensor::zeros(flat, DType::u8, Category::optimizer_state, dev);
    s.v = Tensor::zeros(flat, DType::u8, Category::optimizer_state, dev);
    s.absmax_m = Tensor::zeros(blocks, DType::f32, Category::optimizer_state, dev);
    s.absmax_v = Tensor::zeros(blocks, DType::f32, Category::optimizer_state, dev);
  } else {
    s.m = Tensor::zeros(flat, DType::f32, Category::optimizer_state, dev);
    s.v = Tensor::zeros(flat, DType::f32, Category::optimizer_state, dev);
  }
}

std::vector<std::pair<std::string, Tensor*>> AdamW8bit::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.m.defined()) allocate(s);
    out.emplace_back(s.p->name + ".exp_avg", &s.m);
    out.emplace_back(s.p->name + ".exp_avg_sq", &s.v);
    if (s.q8) {
      out.emplace_back(s.p->name + ".absmax_exp_avg", &s.absmax_m);
      out.emplace_back(s.p->name + ".absmax_exp_avg_sq", &s.absmax_v);
    }
  }
  return out;
}

void AdamW8bit::step(float lr) {
  ++steps_;
  const quant8::Code& c1 = quant8::signed_code();
  const quant8::Code& c2 = quant8::unsigned_code();
  for (State& s : state_) {
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    const int64_t n = p.value.numel();
    if (!s.m.defined()) allocate(s);
    if (p.value.is_meta()) continue;
    const Scalars sc = scalars(opts_, lr, p.decay ? opts_.weight_decay : 0.0f, steps_);
    float* w = p.value.data<float>();
    const float* g = p.grad.data<float>();
    if (!s.q8) {
      float* m = s.m.data<float>();
      float* v = s.v.data<float>();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) adam_element(sc, g[i], m[i], v[i], w[i]);
      continue;
    }
    uint8_t* qm = s.m.data<uint8_t>();
    uint8_t* qv = s.v.data<uint8_t>();
    float* am = s.absmax_m.data<float>();
    float* av = s.absmax_v.data<float>();
    const int64_t nb = quant8::num_blocks(n, kBlock);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t i0 = b * kBlock, i1 = std::min(n, i0 + kBlock);
      float m[kBlock], v[kBlock];
      float new_am = 0.0f, new_av = 0.0f;
      for (int64_t i = i0; i < i1; ++i) {
        float mi = c1.value(qm[i]) * am[b];
        float vi = c2.value(qv[i]) * av[b];
        adam_element(sc, g[i], mi, vi, w[i]);
        m[i - i0] = mi;
        v[i - i0] = vi;
        new_am = std::max(new_am, std::fabs(mi));
        new_av = std::max(new_av, std::fabs(vi));
      }
      am[b] = new_am;
      av[b] = new_av;
      const float inv_m = new_am > 0.0f ? 1.0f / new_am : 0.0f;
      const float inv_v = new_av > 0.0f ? 1.0f / new_av : 0.0f;
      for (int64_t i = i0; i < i1; ++i) {
        qm[i] = c1.nearest_signed(m[i - i0] * inv_m);
        qv[i] = c2.nearest(v[i - i0] * inv_v);
      }
    }
  }
}

}  // namespace snug
