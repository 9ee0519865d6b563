#include "optim/lion8bit.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/adamw8bit.h"
#include "optim/quant8.h"

namespace snug {

namespace {

constexpr int64_t kBlock = quant8::kOptimizerBlock;

struct Scalars {
  float b1, b2, one_minus_b1, one_minus_b2, decay, neg_lr;
};

// One element: p and m in/out (m already dequantized).
inline void lion_element(const Scalars& s, float g, float& m, float& p) {
  if (!std::isfinite(g)) {
    m = 0.0f;
    return;
  }
  const float c = m * s.b1 + s.one_minus_b1 * g;
  const float u = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
  p = p * s.decay + s.neg_lr * u;
  m = m * s.b2 + s.one_minus_b2 * g;
}

}  // namespace

Lion8bit::Lion8bit(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, AdamW8bit::uses_8bit(*p, opts), {}, {}});
}

int64_t Lion8bit::state_bytes(const Parameter& p, const OptimizerOptions& opts) {
  const int64_t n = p.value.numel();
  if (!AdamW8bit::uses_8bit(p, opts)) return 4 * n;
  return n + 4 * quant8::num_blocks(n, kBlock);
}

const Lion8bit::State& Lion8bit::state_of(const Parameter* p) const {
  for (const State& s : state_)
    if (s.p == p) return s;
  throw Error(detail::concat("Lion8bit: parameter '", p->name, "' is not optimized here"));
}

void Lion8bit::allocate(State& s) {
  const int64_t n = s.p->value.numel();
  Device& dev = s.p->value.device();
  if (s.q8) {
    s.m = Tensor::zeros({n}, DType::u8, Category::optimizer_state, dev);
    s.absmax_m =
        Tensor::zeros({quant8::num_blocks(n, kBlock)}, DType::f32, Category::optimizer_state, dev);
  } else {
    s.m = Tensor::zeros({n}, DType::f32, Category::optimizer_state, dev);
  }
}

std::vector<std::pair<std::string, Tensor*>> Lion8bit::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.m.defined()) allocate(s);
    out.emplace_back(s.p->name + ".exp_avg", &s.m);
    if (s.q8) out.emplace_back(s.p->name + ".absmax_exp_avg", &s.absmax_m);
  }
  return out;
}

void Lion8bit::step(float lr) {
  ++steps_;
  const quant8::Code& code = quant8::signed_code();
  for (State& s : state_) {
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    if (!s.m.defined()) allocate(s);
    if (p.value.is_meta()) continue;
    const double wd = p.decay ? static_cast<double>(opts_.weight_decay) : 0.0;
    Scalars sc;
    sc.b1 = opts_.lion_beta1;
    sc.b2 = opts_.lion_beta2;
    sc.one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(sc.b1));
    sc.one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(sc.b2));
    sc.decay = static_cast<float>(1.0 - static_cast<double>(lr) * wd);
    sc.neg_lr = -lr;
    const int64_t n = p.value.numel();
    float* w = p.value.data<float>();
    const float* g = p.grad.data<float>();
    if (!s.q8) {
      float* m = s.m.data<float>();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) lion_element(sc, g[i], m[i], w[i]);
      continue;
    }
    uint8_t* qm = s.m.data<uint8_t>();
    float* am = s.absmax_m.data<float>();
    const int64_t nb = quant8::num_blocks(n, kBlock);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t i0 = b * kBlock, i1 = std::min(n, i0 + kBlock);
      float m[kBlock];
      float new_am = 0.0f;
      for (int64_t i = i0; i < i1; ++i) {
        float mi = code.value(qm[i]) * am[b];
        lion_element(sc, g[i], mi, w[i]);
        m[i - i0] = mi;
        new_am = std::max(new_am, std::fabs(mi));
      }
      am[b] = new_am;
      const float inv = new_am > 0.0f ? 1.0f / new_am : 0.0f;
      for (int64_t i = i0; i < i1; ++i) qm[i] = code.nearest_signed(m[i - i0] * inv);
    }
  }
}

}  // namespace snug
