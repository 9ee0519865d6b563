#include "optim/adamw.h"

#include "core/error.h"
#include "kernels/op_table.h"

namespace snug {

AdamW::AdamW(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, {}, {}, {}});
}

bool AdamW::has_master(const Parameter& p, const OptimizerOptions& opts) {
  return opts.master_weights && p.value.dtype() != DType::f32;
}

int64_t AdamW::state_bytes(const Parameter& p, const OptimizerOptions& opts) {
  if (has_master(p, opts)) return 12 * p.value.numel();  // master, exp_avg, exp_avg_sq in fp32
  return 2 * static_cast<int64_t>(dtype_size(p.value.dtype())) * p.value.numel();
}

void AdamW::allocate(State& s) const {
  const Parameter& p = *s.p;
  // The moments take the parameters' dtype: fp32, or bf16 under --bf16-full; fp32 beside a
  // master.
  const bool master = has_master(p, opts_);
  const DType dt = p.value.dtype() == DType::bf16 && !master ? DType::bf16 : DType::f32;
  if (master) {
    // The master starts as the 16-bit weights widened (exact), as DeepSpeed clones its fp32
    // partition from the 16-bit one. A resumed run overwrites it with the saved master.
    s.master = Tensor::empty(p.value.shape(), DType::f32, Category::optimizer_state,
                             state_device(p, opts_));
    p.value.device().ops().unpack_half(s.master.data<float>(), p.value.data_u16(), p.value.numel(),
                                       p.value.dtype() == DType::f16);
  }
  s.exp_avg = Tensor::zeros(p.value.shape(), dt, Category::optimizer_state, state_device(p, opts_));
  s.exp_avg_sq =
      Tensor::zeros(p.value.shape(), dt, Category::optimizer_state, state_device(p, opts_));
}

std::vector<std::pair<std::string, Tensor*>> AdamW::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.exp_avg.defined()) allocate(s);
    if (s.master.defined()) out.emplace_back(s.p->name + ".fp32", &s.master);
    out.emplace_back(s.p->name + ".exp_avg", &s.exp_avg);
    out.emplace_back(s.p->name + ".exp_avg_sq", &s.exp_avg_sq);
  }
  return out;
}

void AdamW::step(float lr) {
  ++steps_;
  for (size_t i = 0; i < state_.size(); ++i) {
    State& s = state_[i];
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    if (!s.exp_avg.defined()) allocate(s);
    const OpTable& ops = p.value.device().ops();
    const float wd = p.decay ? opts_.weight_decay : 0.0f;
    if (s.master.defined()) {
      // --precision-layout deepspeed: fp32 master and moments, 16-bit weights and gradient.
      SNUG_CHECK(p.grad.dtype() == p.value.dtype(), "adamw: ", dtype_name(p.value.dtype()),
                 " parameter '", p.name, "' has a ", dtype_name(p.grad.dtype()), " gradient");
      ops.adamw_update_master(p.value.data_u16(), p.grad.data_u16(), s.master.data<float>(),
                              s.exp_avg.data<float>(), s.exp_avg_sq.data<float>(), p.value.numel(),
                              lr, opts_.beta1, opts_.beta2, opts_.eps, wd, steps_,
                              p.value.dtype() == DType::f16);
      continue;
    }
    if (p.value.dtype() == DType::bf16) {
      // --bf16-full: bf16 weights, gradient and moments; stochastic rounding keyed by (seed,
      // step, tensor) so that runs and resumed runs are bit-reproducible.
      SNUG_CHECK(p.grad.dtype() == DType::bf16, "adamw: bf16 parameter '", p.name, "' has a ",
                 dtype_name(p.grad.dtype()), " gradient");
      ops.adamw_update_bf16(p.value.data_u16(), p.grad.data_u16(), s.exp_avg.data_u16(),
                            s.exp_avg_sq.data_u16(), p.value.numel(), lr, opts_.beta1, opts_.beta2,
                            opts_.eps, wd, steps_, bf16_rounding_key(opts_, steps_, p, i),
                            p.rounding_offset);
      continue;
    }
    ops.adamw_update(p.value.data<float>(), p.grad.data<float>(), s.exp_avg.data<float>(),
                     s.exp_avg_sq.data<float>(), p.value.numel(), lr, opts_.beta1, opts_.beta2,
                     opts_.eps, wd, steps_);
  }
}

}  // namespace snug
