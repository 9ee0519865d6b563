#include "optim/galore.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/host_staging.h"
#include "kernels/op_table.h"

namespace snug {

GaLoreAdamW::GaLoreAdamW(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  SNUG_CHECK(opts.galore_rank >= 1, "--galore-rank must be >= 1, got ", opts.galore_rank);
  SNUG_CHECK(opts.galore_update_proj_gap >= 1, "--galore-update-proj-gap must be >= 1, got ",
             opts.galore_update_proj_gap);
  for (Parameter* p : params) {
    if (!p->requires_grad) continue;
    State s;
    s.p = p;
    s.rank = rank_for(*p, opts);
    s.right = s.rank > 0 && p->value.dim(0) >= p->value.dim(1);
    state_.push_back(std::move(s));
  }
  // As the HF Trainer ("None of the target modules were found"): GaLore that projects nothing
  // would silently be AdamW.
  const bool any =
      std::any_of(state_.begin(), state_.end(), [](const State& s) { return s.rank > 0; });
  SNUG_CHECK(any || state_.empty(),
             "--optim galore_adamw: no trainable parameter is a GaLore target (a 2-D "
             "parameter whose name contains 'attn' or 'mlp', the GaLore repository's target "
             "modules; e.g. '",
             state_.empty() ? std::string() : state_.front().p->name,
             "' is not); this model's attention and MLP are named otherwise. Use another --optim");
}

bool GaLoreAdamW::is_target(const Parameter& p) {
  return p.value.ndim() == 2 &&
         (p.name.find("attn") != std::string::npos || p.name.find("mlp") != std::string::npos);
}

int64_t GaLoreAdamW::rank_for(const Parameter& p, const OptimizerOptions& opts) {
  if (!is_target(p)) return 0;
  return std::min({opts.galore_rank, p.value.dim(0), p.value.dim(1)});
}

int64_t GaLoreAdamW::state_bytes(const Parameter& p, const OptimizerOptions& opts) {
  const int64_t r = rank_for(p, opts);
  if (r == 0) return 8 * p.value.numel();
  const int64_t m = p.value.dim(0), n = p.value.dim(1);
  return m >= n ? 4 * (2 * m * r + r * n) : 4 * (2 * r * n + m * r);
}

void GaLoreAdamW::allocate(State& s) {
  Device& dev = state_device(*s.p, opts_);
  if (s.rank == 0) {
    s.exp_avg = Tensor::zeros(s.p->value.shape(), DType::f32, Category::optimizer_state, dev);
    s.exp_avg_sq = Tensor::zeros(s.p->value.shape(), DType::f32, Category::optimizer_state, dev);
    return;
  }
  const int64_t m = s.p->value.dim(0), n = s.p->value.dim(1), r = s.rank;
  const Shape low = s.right ? Shape{m, r} : Shape{r, n};
  s.exp_avg = Tensor::zeros(low, DType::f32, Category::optimizer_state, dev);
  s.exp_avg_sq = Tensor::zeros(low, DType::f32, Category::optimizer_state, dev);
  s.projector = Tensor::zeros(s.right ? Shape{r, n} : Shape{m, r}, DType::f32,
                              Category::optimizer_state, dev);
}

std::vector<std::pair<std::string, Tensor*>> GaLoreAdamW::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.exp_avg.defined()) allocate(s);
    out.emplace_back(s.p->name + ".exp_avg", &s.exp_avg);
    out.emplace_back(s.p->name + ".exp_avg_sq", &s.exp_avg_sq);
    if (s.rank > 0) out.emplace_back(s.p->name + ".projector", &s.projector);
  }
  return out;
}

nlohmann::json GaLoreAdamW::extra_state() const {
  nlohmann::json steps = nlohmann::json::object();
  for (const State& s : state_) steps[s.p->name] = s.step;
  return {{"param_steps", steps}};
}

void GaLoreAdamW::load_extra_state(const nlohmann::json& state) {
  const nlohmann::json& steps = state.at("param_steps");
  for (State& s : state_) s.step = steps.at(s.p->name).get<int64_t>();
}

void GaLoreAdamW::step(float lr) {
  ++steps_;
  for (State& s : state_) {
    if (!s.p->grad.defined()) continue;
    if (!s.exp_avg.defined()) allocate(s);
    update_one(s, lr);
  }
}

void GaLoreAdamW::update_one(State& s, float lr) {
  Parameter& p = *s.p;
  Device& dev = p.value.device();
  const OpTable& ops = dev.ops();
  const bool refresh = s.step % opts_.galore_update_proj_gap == 0;
  ++s.step;
  const double t = static_cast<double>(s.step);
  const float b1 = opts_.beta1, b2 = opts_.beta2, eps = opts_.eps;
  const double bc1 = 1.0 - std::pow(static_cast<double>(b1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(b2), t);
  const float neg_step = static_cast<float>(-static_cast<double>(lr) * std::sqrt(bc2) / bc1);
  const double wd = p.decay ? static_cast<double>(opts_.weight_decay) : 0.0;
  const float decay_alpha = static_cast<float>(-static_cast<double>(lr) * wd);
  const bool decay = wd != 0.0;

  float* w = p.value.data<float>();
  const float* g = p.grad.data<float>();
  float* ea = s.exp_avg.data<float>();
  float* es = s.exp_avg_sq.data<float>();
  const int64_t r = s.rank;
  if (r == 0) {
    ops.galore_adam_update(w, g, ea, es, p.value.numel(), b1, b2, eps, neg_step, decay_alpha,
                           decay);
    return;
  }
  const int64_t m = p.value.dim(0), n = p.value.dim(1);
  // low: the projected gradient, turned into the normalized update N in place.
  // The update's temporaries beside the state (the host pool under --offload-optimizer cpu).
  Device& tmp = state_device(p, opts_);
  Tensor low_t = Tensor::empty(s.exp_avg.shape(), DType::f32, Category::temporary, tmp);
  Tensor back_t = Tensor::empty({m, n}, DType::f32, Category::temporary, tmp);
  float* P = s.projector.data<float>();
  if (refresh) {
    // Host-only (kernels/op_table.h): G in and P out through host staging, free on cpu.
    const HostStaging hg(p.grad, HostStaging::Use::read);
    const HostStaging hp(s.projector, HostStaging::Use::write);
    ops.galore_projector(hp.data<float>(), hg.data<float>(), m, n, r, s.right);
    hp.upload();
  }
  float* low = low_t.data<float>();
  if (s.right)  // low (m, r) = G (m, n) @ P^T
    ops.gemm_f32(false, true, m, r, n, 1.0f, g, n, P, n, 0.0f, low, r);
  else  // low (r, n) = P^T @ G, P (m, r)
    ops.gemm_f32(true, false, r, n, m, 1.0f, P, r, g, n, 0.0f, low, n);
  ops.galore_adam_normalize(low, ea, es, s.exp_avg.numel(), b1, b2, eps);
  float* back = back_t.data<float>();
  if (s.right)  // back (m, n) = N (m, r) @ P (r, n)
    ops.gemm_f32(false, false, m, n, r, 1.0f, low, r, P, n, 0.0f, back, n);
  else  // back (m, n) = P (m, r) @ N (r, n)
    ops.gemm_f32(false, false, m, n, r, 1.0f, P, r, low, n, 0.0f, back, n);
  ops.galore_apply(w, back, m * n, neg_step, opts_.galore_scale, decay_alpha, decay);
}

}  // namespace snug
