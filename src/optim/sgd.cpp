#include "optim/sgd.h"

#include "core/error.h"
#include "kernels/op_table.h"

namespace snug {

namespace {
// The momentum buffer takes the parameters' dtype: fp32, or bf16 under --bf16-full.
DType state_dtype(const Parameter& p) {
  return p.value.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
}
}  // namespace

SGD::SGD(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, {}});
}

std::vector<std::pair<std::string, Tensor*>> SGD::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  if (opts_.momentum == 0.0f) return out;
  for (State& s : state_) {
    const Parameter& p = *s.p;
    if (!s.momentum_buffer.defined())
      s.momentum_buffer = Tensor::zeros(p.value.shape(), state_dtype(p), Category::optimizer_state,
                                        state_device(p, opts_));
    out.emplace_back(p.name + ".momentum_buffer", &s.momentum_buffer);
  }
  return out;
}

nlohmann::json SGD::extra_state() const {
  nlohmann::json started = nlohmann::json::object();
  for (const State& s : state_) started[s.p->name] = s.started;
  return {{"momentum_started", started}};
}

void SGD::load_extra_state(const nlohmann::json& state) {
  const nlohmann::json& started = state.at("momentum_started");
  for (State& s : state_) s.started = started.at(s.p->name).get<bool>();
}

void SGD::step(float lr) {
  ++steps_;
  const bool use_momentum = opts_.momentum != 0.0f;
  for (size_t si = 0; si < state_.size(); ++si) {
    State& s = state_[si];
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    const bool first = use_momentum && !s.started;
    if (use_momentum && !s.momentum_buffer.defined())
      s.momentum_buffer = Tensor::empty(p.value.shape(), state_dtype(p), Category::optimizer_state,
                                        state_device(p, opts_));
    if (use_momentum) s.started = true;
    const OpTable& ops = p.value.device().ops();
    const float wd = p.decay ? opts_.weight_decay : 0.0f;
    const float mu = opts_.momentum;
    if (p.value.dtype() == DType::bf16) {
      // --bf16-full: the same step on bf16 storage, weights stochastically rounded.
      SNUG_CHECK(p.grad.dtype() == DType::bf16, "sgd: bf16 parameter '", p.name, "' has a ",
                 dtype_name(p.grad.dtype()), " gradient");
      ops.sgd_update_bf16(p.value.data_u16(), p.grad.data_u16(),
                          use_momentum ? s.momentum_buffer.data_u16() : nullptr, p.value.numel(),
                          lr, mu, wd, first, bf16_rounding_key(opts_, steps_, p, si),
                          p.rounding_offset);
      continue;
    }
    ops.sgd_update(p.value.data<float>(), p.grad.data<float>(),
                   use_momentum ? s.momentum_buffer.data<float>() : nullptr, p.value.numel(), lr,
                   mu, wd, first);
  }
}

}  // namespace snug
