// One training step with an optimizer that runs inside backward (LOMO, AdaLOMO; optim/lomo.h).
// The model's grad-ready hook (Model::set_grad_ready_hook) hands each parameter to the optimizer
// as soon as backward has finished its gradient; the optimizer updates it and frees the gradient,
// so at most one block's gradients are live (the embeddings' at the end) instead of all of them.
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
// Gradient accumulation cannot work (nothing is kept to accumulate into), nor can fp16's loss
// scaler (which must see every gradient before any update); check_fused_settings refuses both.
#pragma once

#include <cstdint>
#include <string>

#include "models/model.h"
#include "optim/lomo.h"

namespace snug {

// Throws snug::Error naming the flag when `optim` cannot run with these settings.
void check_fused_settings(const std::string& optim, int64_t gradient_accumulation_steps, bool fp16);

struct FusedStepResult {
  double loss = 0.0;       // mean loss of the batch (non-finite: nothing was updated)
  double grad_norm = 0.0;  // global gradient norm before clipping (0 on meta)
};

// One optimizer step on the (B,T) batch at learning rate lr (see above).
FusedStepResult fused_optimizer_step(Model& model, InBackwardOptimizer& opt, const int32_t* inputs,
                                     const int32_t* targets, int64_t B, int64_t T, float lr,
                                     double max_grad_norm);

}  // namespace snug
