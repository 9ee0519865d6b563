#include "optim/registry.h"

#include <algorithm>

#include "core/error.h"
#include "io/excerpt.h"
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

template <class T>
std::unique_ptr<Optimizer> make(const ParameterList& params, const OptimizerOptions& opts,
                                const std::string& /*name_given*/) {
  return std::make_unique<T>(params, opts);
}

// Bytes of `slots` state values per element held in the parameter's own dtype (fp32: 4 bytes a
// slot, bf16 under --bf16-full: 2).
int64_t in_param_dtype(const Parameter& p, int64_t slots) {
  return slots * static_cast<int64_t>(dtype_size(p.value.dtype())) * p.value.numel();
}

}  // namespace

const std::vector<OptimizerEntry>& optimizer_registry() {
  static const std::vector<OptimizerEntry> entries = {
      {.name = "adamw_torch",
       .aliases = {"adamw"},
       .make = make<AdamW>,
       .state_bytes = AdamW::state_bytes,
       .bf16_params = true,
       .master_weights = true,
       .elementwise = true,
       .advisor_rank = 1},
      {.name = "sgd",
       .make = make<SGD>,
       .state_bytes =
           [](const Parameter& p, const OptimizerOptions& o) {
             return in_param_dtype(p, o.momentum != 0.0f ? 1 : 0);
           },
       .bf16_params = true,
       .elementwise = true,
       .advisor_rank = 5,
       .what_if_rank = 4},
      {.name = "adafactor",
       .make = make<Adafactor>,
       .state_bytes =
           [](const Parameter& p, const OptimizerOptions&) {
             return Adafactor::state_bytes(p.value.shape());
           },
       .advisor_rank = 3,
       .what_if_rank = 1},
      {.name = "adamw_bnb_8bit",
       .aliases = {"adamw_8bit"},
       .make = [](const ParameterList& params, const OptimizerOptions& opts,
                  const std::string& name) -> std::unique_ptr<Optimizer> {
         return std::make_unique<AdamW8bit>(params, opts, name);  // name() is the one given
       },
       .state_bytes = AdamW8bit::state_bytes,
       .advisor_rank = 2,
       .what_if_rank = 2},
      {.name = "lion",
       .make = make<Lion>,
       .state_bytes = [](const Parameter& p,
                         const OptimizerOptions&) { return in_param_dtype(p, 1); },
       .elementwise = true,
       .advisor_rank = 4,
       .what_if_rank = 3},
      {.name = "lion_8bit", .make = make<Lion8bit>, .state_bytes = Lion8bit::state_bytes},
      {.name = "lomo",
       .make = make<Lomo>,
       .state_bytes = [](const Parameter&, const OptimizerOptions&) { return int64_t{0}; },
       .updates_in_backward = true,
       .bf16_params = true,
       .advisor_rank = 7,
       .what_if_rank = 6},
      {.name = "adalomo",
       .make = make<AdaLomo>,
       .state_bytes = [](const Parameter& p,
                         const OptimizerOptions&) { return AdaLomo::state_bytes(p.value.shape()); },
       .updates_in_backward = true,
       .bf16_params = true,
       .advisor_rank = 6,
       .what_if_rank = 5},
      {.name = "galore_adamw", .make = make<GaLoreAdamW>, .state_bytes = GaLoreAdamW::state_bytes},
  };
  return entries;
}

const OptimizerEntry* find_optimizer(const std::string& name) {
  for (const OptimizerEntry& e : optimizer_registry()) {
    if (name == e.name) return &e;
    for (const char* alias : e.aliases)
      if (name == alias) return &e;
  }
  return nullptr;
}

const OptimizerEntry& optimizer_entry(const std::string& name) {
  const OptimizerEntry* e = find_optimizer(name);
  if (e) return *e;
  std::string known;
  for (const auto& n : optimizer_names()) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  throw Error(
      detail::concat("--optim: unknown optimizer '", excerpt(name), "' (known: ", known, ")"));
}

namespace {

std::vector<const OptimizerEntry*> ranked(int OptimizerEntry::*rank) {
  std::vector<const OptimizerEntry*> out;
  for (const OptimizerEntry& e : optimizer_registry())
    if (e.*rank > 0) out.push_back(&e);
  std::stable_sort(
      out.begin(), out.end(),
      [rank](const OptimizerEntry* a, const OptimizerEntry* b) { return a->*rank < b->*rank; });
  return out;
}

}  // namespace

std::vector<const OptimizerEntry*> advisor_optimizers() {
  return ranked(&OptimizerEntry::advisor_rank);
}

std::vector<const OptimizerEntry*> what_if_optimizers() {
  return ranked(&OptimizerEntry::what_if_rank);
}

namespace {

// "a, b or c": the names (aliases included) of the entries with `field`.
std::string names_with(bool OptimizerEntry::*field) {
  std::vector<std::string> names;
  for (const OptimizerEntry& e : optimizer_registry()) {
    if (!(e.*field)) continue;
    names.emplace_back(e.name);
    for (const char* alias : e.aliases) names.emplace_back(alias);
  }
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

}  // namespace

std::string bf16_optimizer_names() {
  return names_with(&OptimizerEntry::bf16_params);
}

std::string master_weight_optimizer_names() {
  return names_with(&OptimizerEntry::master_weights);
}

}  // namespace snug
