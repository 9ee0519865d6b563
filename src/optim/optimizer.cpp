#include "optim/optimizer.h"

#include "core/error.h"
#include "optim/adafactor.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "optim/galore.h"
#include "optim/lion.h"
#include "optim/lion8bit.h"
#include "optim/lomo.h"
#include "optim/sgd.h"

namespace snug {

namespace {

[[noreturn]] void unknown_optimizer(const std::string& name) {
  std::string known;
  for (const auto& n : optimizer_names()) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  throw Error(detail::concat("--optim: unknown optimizer '", name, "' (known: ", known, ")"));
}

bool is_adamw(const std::string& name) {
  return name == "adamw_torch" || name == "adamw";
}
bool is_adamw8bit(const std::string& name) {
  return name == "adamw_bnb_8bit" || name == "adamw_8bit";
}

}  // namespace

bool supports_bf16_params(const std::string& name) {
  return is_adamw(name) || name == "sgd";
}

std::vector<std::string> optimizer_names() {
  return {"adamw_torch", "adamw",     "sgd",  "adafactor", "adamw_bnb_8bit", "adamw_8bit",
          "lion",        "lion_8bit", "lomo", "adalomo",   "galore_adamw"};
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const ParameterList& params,
                                          const OptimizerOptions& opts) {
  for (const Parameter* p : params)
    SNUG_CHECK(!p->requires_grad || p->value.dtype() == DType::f32 || supports_bf16_params(name),
               "--bf16-full: --optim ", name,
               " cannot update bf16 parameters (it keeps fp32 state or updates inside backward); "
               "use --optim adamw_torch, adamw or sgd, or drop --bf16-full");
  if (is_adamw(name)) return std::make_unique<AdamW>(params, opts);
  if (name == "sgd") return std::make_unique<SGD>(params, opts);
  if (name == "adafactor") return std::make_unique<Adafactor>(params, opts);
  if (is_adamw8bit(name)) return std::make_unique<AdamW8bit>(params, opts, name);
  if (name == "lion") return std::make_unique<Lion>(params, opts);
  if (name == "lion_8bit") return std::make_unique<Lion8bit>(params, opts);
  if (name == "lomo") return std::make_unique<Lomo>(params, opts);
  if (name == "adalomo") return std::make_unique<AdaLomo>(params, opts);
  if (name == "galore_adamw") return std::make_unique<GaLoreAdamW>(params, opts);
  unknown_optimizer(name);
}

int64_t state_bytes_formula(const std::string& name, const ParameterList& params,
                            const OptimizerOptions& opts) {
  int64_t per_elem = -1;  // bytes per element for the uniform ones
  if (is_adamw(name))
    per_elem = 8;
  else if (name == "sgd")
    per_elem = opts.momentum != 0.0f ? 4 : 0;
  else if (name == "lion")
    per_elem = 4;
  else if (name == "lomo")
    per_elem = 0;
  else if (name != "adafactor" && name != "adalomo" && !is_adamw8bit(name) && name != "lion_8bit" &&
           name != "galore_adamw")
    unknown_optimizer(name);
  int64_t total = 0;
  for (const Parameter* p : params) {
    if (!p->requires_grad) continue;
    if (per_elem >= 0)  // state in the parameters' dtype: 4 bytes per fp32 slot, 2 in bf16
      total += per_elem / 4 * static_cast<int64_t>(dtype_size(p->value.dtype())) * p->value.numel();
    else if (name == "adafactor")
      total += Adafactor::state_bytes(p->value.shape());
    else if (name == "adalomo")
      total += AdaLomo::state_bytes(p->value.shape());
    else if (name == "lion_8bit")
      total += Lion8bit::state_bytes(*p, opts);
    else if (name == "galore_adamw")
      total += GaLoreAdamW::state_bytes(*p, opts);
    else
      total += AdamW8bit::state_bytes(*p, opts);
  }
  return total;
}

}  // namespace snug
