// Optimizers update Parameters from their gradients. Their state lives in the device pool (or the
// host pool, with OptimizerOptions::state_device) under `optimizer_state`, allocated on the first
// step (as torch.optim does), so a report shows exactly what each optimizer costs per trainable
// parameter P (docs/optimizers.md):
//   sgd             0 (momentum 0) or 4 bytes (momentum buffer); 2 with bf16 parameters
//   adamw_torch     8 bytes (exp_avg, exp_avg_sq in fp32); 4 with bf16 parameters (--bf16-full);
//                   12 with 16-bit parameters under --precision-layout deepspeed (fp32 master too)
//   lion            4 bytes (exp_avg)
//   adafactor       4*(rows+cols) per matrix, 4*n per vector (factored second moment)
//   adamw_bnb_8bit  2 bytes + 8 bytes per 256-element block for 8-bit tensors; tensors under
//                   4096 elements and (by default) the embeddings keep fp32 states (8 bytes)
//   lion_8bit       1 byte + 4 bytes per 256-element block for 8-bit tensors, else 4 bytes
//   lomo            0 (SGD applied inside backward, optim/lomo.h), bf16 parameters too
//   adalomo         as adafactor (factored second moment, applied inside backward)
//   galore_adamw    low-rank moments and projector for attention/MLP matrices, 8 bytes for the
//                   rest (optim/galore.h)
// state_bytes_formula() gives that number to the byte for a parameter list. Which optimizers
// exist and what each one is (aliases, bytes, bf16 support, ...): optim/registry.h.
//
// Parameters whose `grad` is undefined at step time (frozen, or untouched by backward) are
// skipped, like PyTorch does for `p.grad is None`. On the meta device the state is allocated
// (so it is accounted) but no arithmetic runs.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "nn/parameter.h"

namespace snug {

struct OptimizerOptions {
  float beta1 = 0.9f;    // adam_beta1 (AdamW, 8-bit AdamW)
  float beta2 = 0.999f;  // adam_beta2 (AdamW, 8-bit AdamW)
  float eps = 1e-8f;     // adam_epsilon (AdamW, 8-bit AdamW)
  float weight_decay = 0.0f;
  // SGD (torch.optim.SGD): momentum 0 keeps no state; dampening 0, nesterov off.
  float momentum = 0.0f;
  // Lion has its own betas (paper and lion-pytorch defaults), so that the Adam betas a run
  // carries for AdamW (0.9, 0.999) do not silently become Lion's.
  float lion_beta1 = 0.9f;
  float lion_beta2 = 0.99f;
  // Adafactor: false = the HF Trainer's optim="adafactor" (external lr, scale_parameter=False,
  // relative_step=False); true = the paper's relative step, lr_t = min(1e-2, 1/sqrt(t)) *
  // max(1e-3, RMS(param)), ignoring the scheduled learning rate.
  bool adafactor_relative_step = false;
  // 8-bit AdamW and 8-bit Lion: give the token/position embeddings (names containing
  // "wte"/"wpe") 8-bit states too. Off by default: the HF Trainer keeps nn.Embedding states in fp32
  // (transformers #14819).
  bool optim_8bit_embeddings = false;
  // 8-bit AdamW: tensors with fewer elements keep fp32 states (bitsandbytes min_8bit_size).
  int64_t min_8bit_size = 4096;
  // GaLore (galore_adamw): projection rank, steps between projector refreshes, and the scale of
  // the projected-back update; GaLore's and the HF Trainer's defaults.
  int64_t galore_rank = 128;
  int64_t galore_update_proj_gap = 200;
  float galore_scale = 0.25f;
  // --bf16-full (bf16 parameters, supported by adamw, sgd, lomo and adalomo): seed of the
  // stochastic rounding of the updated weights (kernels/stochastic_round.h); the Trainer passes
  // --seed.
  uint64_t rounding_seed = 0;
  // lomo/adalomo on bf16 parameters: false rounds the updated weights to nearest even instead,
  // as lomo_optim's p.copy_(p_fp32) does (the golden tests of the paper's update; training keeps
  // stochastic rounding, which lets updates below half a bf16 ulp move the weights).
  bool bf16_stochastic_rounding = true;
  // --precision-layout deepspeed (DeepSpeed's mixed-precision layout, ZeRO's K = 12): a 16-bit
  // trainable parameter keeps an fp32 master copy beside fp32 moments in optimizer_state (12
  // bytes per parameter with AdamW); the update runs on the master and the 16-bit weights are
  // the master rounded to nearest even. Optimizers whose registry entry has master_weights only
  // (make_optimizer refuses the others); fp32 parameters (LoRA adapters) are updated as usual.
  bool master_weights = false;
  // --offload-optimizer cpu (train/offload.h): the device whose pool holds the state tensors
  // (the host pool); nullptr keeps them on each parameter's device. The update still reads the
  // parameters and gradients where they are, with their device's kernels, so it must address
  // them (a cpu device and its host pool share the RAM).
  Device* state_device = nullptr;
};

// Where the optimizer state of `p` is allocated: opts.state_device, or p's device.
inline Device& state_device(const Parameter& p, const OptimizerOptions& opts) {
  return opts.state_device != nullptr ? *opts.state_device : p.value.device();
}

// The key of --bf16-full's stochastic rounding (kernels/stochastic_round.h) for `p`, the
// optimizer's `position`-th parameter, at `step`: under the tensor index p names when it is a ZeRO
// piece (Parameter::rounding_tensor), else under its position. Its elements draw from
// p.rounding_offset on.
uint64_t bf16_rounding_key(const OptimizerOptions& opts, int64_t step, const Parameter& p,
                           size_t position);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update with learning rate `lr` (the scheduler's value for this step).
  virtual void step(float lr) = 0;
  // The --optim name, e.g. "adamw_torch".
  virtual std::string name() const = 0;
  // Number of completed steps.
  int64_t steps() const { return steps_; }
  // Checkpoints (train/checkpoint.h): sets the completed-step count of a resumed run.
  void set_steps(int64_t steps) { steps_ = steps; }
  // Every state tensor under a stable name, "<parameter name>.<state>" (e.g. "h.0.attn.c_attn.
  // weight.exp_avg"). State not created yet is allocated first (zero-filled, as the first step
  // would), so a checkpoint can be loaded into the returned tensors. Empty for stateless ones.
  virtual std::vector<std::pair<std::string, Tensor*>> state_tensors() { return {}; }
  // State that is not a tensor and not steps() (Adafactor's per-parameter step counts, SGD's
  // "momentum buffer initialized" flags), as a JSON object; load_extra_state restores it.
  virtual nlohmann::json extra_state() const { return nlohmann::json::object(); }
  virtual void load_extra_state(const nlohmann::json& /*state*/) {}
  // Whether a step's memory depends on the step count as well as on the shapes (GaLore's
  // projector refresh): a dry run then replays every step (train/replay_memo.h).
  virtual bool memory_varies_by_step() const { return false; }

 protected:
  int64_t steps_ = 0;
};

// The entry of `states` (structs with a `Parameter* p`) that belongs to `p`; throws snug::Error
// "<who>: parameter '<name>' is not optimized here" when none does.
template <typename States>
auto& find_state(States& states, const Parameter* p, const char* who) {
  for (auto& s : states)
    if (s.p == p) return s;
  throw Error(detail::concat(who, ": parameter '", p->name, "' is not optimized here"));
}

// Whether optimizer `name` updates bf16 parameters (--bf16-full): adamw_torch/adamw (bf16
// moments, 4 bytes per parameter), sgd (bf16 momentum buffer), lomo (no state) and adalomo
// (fp32 factored second moment, as without --bf16-full). Others throw in
// make_optimizer when a trainable parameter is bf16.
bool supports_bf16_params(const std::string& name);
// Names accepted by --optim (first is the default).
std::vector<std::string> optimizer_names();
// Throws snug::Error listing the accepted names for an unknown one.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const ParameterList& params,
                                          const OptimizerOptions& opts);
// Exact bytes of optimizer_state that optimizer `name` allocates for `params` once every
// trainable parameter has had a gradient at a step. Throws like make_optimizer for unknown names.
int64_t state_bytes_formula(const std::string& name, const ParameterList& params,
                            const OptimizerOptions& opts);

}  // namespace snug
