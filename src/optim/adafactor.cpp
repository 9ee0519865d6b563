#include "optim/adafactor.h"

#include <algorithm>
#include <cmath>

#include "kernels/op_table.h"

namespace snug {

Adafactor::Adafactor(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, {}, 0});
}

std::vector<std::pair<std::string, Tensor*>> Adafactor::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    s.moment.allocate(s.p->value, state_device(*s.p, opts_));
    s.moment.append_state(s.p->name, out);
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
    s.moment.allocate(p.value, state_device(p, opts_));
    ++s.step;
    update_one(s, lr);
  }
}

void Adafactor::update_one(State& s, float lr) {
  Parameter& p = *s.p;
  const OpTable& ops = p.value.device().ops();
  float* w = p.value.data<float>();
  const double t = static_cast<double>(s.step);
  // Learning rate: external, or the relative step scaled by RMS(p) (computed before the update).
  float lr_t = lr;
  if (opts_.adafactor_relative_step)
    lr_t = relative_lr(static_cast<float>(rms_of(ops, w, p.value.numel())),
                       std::min(1e-2, 1.0 / std::sqrt(t)));
  const Beta2t b = adafactor_beta2t(t);
  const float decay_alpha =
      static_cast<float>(-static_cast<double>(opts_.weight_decay) * static_cast<double>(lr_t));
  const bool decay = p.decay && opts_.weight_decay != 0.0f;
  const FactoredMoment::Dims d = FactoredMoment::dims(p.value.shape());
  FactoredMoment& fm = s.moment;
  ops.adafactor_update(w, p.grad.data<float>(), fm.row.data<float>(), fm.col.data<float>(),
                       fm.full.data<float>(), d.batch, d.rows, d.cols, b.beta2t, b.one_minus_beta2t,
                       lr_t, decay_alpha, decay);
}

}  // namespace snug
