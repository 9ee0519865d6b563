// One training step with an optimizer that runs inside backward (LOMO, AdaLOMO; optim/lomo.h).
// A grad-ready listener (Model::add_grad_ready_listener, models/grad_ready.h) hands each parameter
// to the optimizer as soon as backward has finished its gradient; the optimizer updates it and
// frees the gradient, so at most one block's gradients are live (the embeddings' at the end)
// instead of all of them. The step asks for the LM head weight's gradient last
// (Model::set_head_grad_last) for the same reason: otherwise it would be live from forward on.
// The listener consumes the gradients, so it subscribes last (after any other listener).
//
// Gradient clipping by global norm (max_grad_norm > 0) needs the norm before the first update,
// and the first update happens long before the last gradient exists. So, as LOMO does, the step
// takes two passes: the first forward + backward only measures the norm (each gradient is
// squared and summed, then freed), the second applies the updates with the clipping coefficient
// min(1, max_grad_norm / (norm + 1e-6)). LOMO keeps the autograd graph between the two backwards
// (retain_graph); snug's backward frees activations as it consumes them, so the second pass runs
// forward again: two forwards and two backwards per step (about twice the compute), with the
// same peak memory. With max_grad_norm <= 0 the step is one forward and one backward; the
// gradient norm is still measured (before each update) for the log.
//
// fp16 (dynamic loss scaling, train/grad_scaler.h), as the LOMO paper runs it: the step always
// takes the two passes, the loss multiplied by the scale in both. The first pass finds the norm
// of the scaled gradients; an inf/NaN there is an overflow: nothing is updated, the step is
// skipped and the caller lowers the scale (GradScaler::update). Otherwise the second pass
// updates with the factor clip_coef / scale (unscaling and clipping in one multiply), the norm
// reported unscaled. The second pass recomputes the same gradients, so it cannot overflow where
// the first did not; each gradient is still checked before its update, and one that is not
// finite is dropped (its parameter keeps its value) and the step reported as an overflow.
//
// bf16 parameters (--bf16-full) have bf16 gradients: their squares are summed from bf16.
//
// Gradient accumulation cannot work (nothing is kept to accumulate into); check_fused_settings
// refuses it.
#pragma once

#include <cstdint>
#include <string>

#include "models/model.h"
#include "optim/lomo.h"

namespace snug {

// Throws snug::Error naming the flag when `optim` cannot run with these settings.
void check_fused_settings(const std::string& optim, int64_t gradient_accumulation_steps);

struct FusedStepResult {
  double loss = 0.0;       // mean loss of the batch (non-finite: nothing was updated)
  double grad_norm = 0.0;  // global gradient norm before clipping, unscaled (0 on meta)
  bool overflow = false;   // fp16: a scaled gradient was inf/NaN (the step is to be skipped)
};

// One optimizer step on the (B,T) batch at learning rate lr (see above). loss_scale > 0: fp16's
// dynamic loss scale (0: none).
FusedStepResult fused_optimizer_step(Model& model, InBackwardOptimizer& opt, const int32_t* inputs,
                                     const int32_t* targets, int64_t B, int64_t T, float lr,
                                     double max_grad_norm, double loss_scale = 0.0);

}  // namespace snug
