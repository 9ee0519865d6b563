#include "optim/optimizer.h"

#include "core/error.h"
#include "optim/adamw.h"

namespace snug {

std::vector<std::string> optimizer_names() {
  return {"adamw_torch", "adamw"};
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const ParameterList& params,
                                          const OptimizerOptions& opts) {
  if (name == "adamw_torch" || name == "adamw") return std::make_unique<AdamW>(params, opts);
  std::string known;
  for (const auto& n : optimizer_names()) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  throw Error(detail::concat("--optim: unknown optimizer '", name, "' (known: ", known, ")"));
}

}  // namespace snug
