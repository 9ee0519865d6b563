#include "optim/optimizer.h"

#include "core/error.h"
#include "kernels/stochastic_round.h"
#include "optim/registry.h"

namespace snug {

uint64_t bf16_rounding_key(const OptimizerOptions& opts, int64_t step, const Parameter& p,
                           size_t position) {
  return kernels::rounding_key(
      opts.rounding_seed, step,
      p.rounding_tensor >= 0 ? p.rounding_tensor : static_cast<int64_t>(position));
}

bool supports_bf16_params(const std::string& name) {
  const OptimizerEntry* e = find_optimizer(name);
  return e != nullptr && e->bf16_params;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const OptimizerEntry& e : optimizer_registry()) {
    names.emplace_back(e.name);
    for (const char* alias : e.aliases) names.emplace_back(alias);
  }
  return names;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const ParameterList& params,
                                          const OptimizerOptions& opts) {
  const OptimizerEntry* e = find_optimizer(name);
  SNUG_CHECK(!opts.master_weights || (e && e->master_weights),
             "--precision-layout deepspeed: --optim ", name,
             " keeps no fp32 master weights; use --optim ", master_weight_optimizer_names(),
             " (or --precision-layout snug)");
  for (const Parameter* p : params)
    SNUG_CHECK(!p->requires_grad || p->value.dtype() == DType::f32 || (e && e->bf16_params),
               "--bf16-full: --optim ", name,
               " cannot update bf16 parameters (it keeps fp32 state of the parameters' size); "
               "use --optim ",
               bf16_optimizer_names(), ", or drop --bf16-full");
  return optimizer_entry(name).make(params, opts, name);
}

int64_t state_bytes_formula(const std::string& name, const ParameterList& params,
                            const OptimizerOptions& opts) {
  const OptimizerEntry& e = optimizer_entry(name);
  int64_t total = 0;
  for (const Parameter* p : params)
    if (p->requires_grad) total += e.state_bytes(*p, opts);
  return total;
}

}  // namespace snug
