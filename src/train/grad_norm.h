// The global gradient norm and clipping by it (torch.nn.utils.clip_grad_norm_ with the L2 norm),
// cut where a data-parallel run has to step in between: each process sums the squares of the
// gradients it holds (grad_sum_squares), the sums are added across ranks (one scalar all-reduce;
// a replicated gradient counted once), and only then come the square root, the coefficient and
// the scaling. The Trainer (train/trainer.h) and the fused step (train/fused_step.h) share these.
//
// Gradients are fp32, or bf16 under --bf16-full (squares summed in double from bf16; scaled and
// rounded back). Sums run in the device's kernels (sum_squares_each, deterministic on every
// backend), one sum per parameter, added in the list's order.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace snug {

// Sum of the squares of p's gradient; 0 without a gradient or on meta.
double grad_sum_squares(const Parameter& p);
// The sums of squares of several gradients (fp32 or bf16), each as grad_sum_squares gives it (0
// for an undefined or meta one), from one sum_squares_each call per device: a GPU waits once,
// not once a tensor.
std::vector<double> grad_sums_of_squares(const std::vector<const Tensor*>& grads);
// The sum over `params`: their sums added in the list's order.
double grad_sum_squares(const ParameterList& params);
// clip_grad_norm_'s coefficient for a norm: max_norm / (norm + 1e-6), clamped to 1.
double clip_coefficient(double norm, double max_norm);
// Every gradient of `params` times `coef` (no-op on meta).
void scale_gradients(const ParameterList& params, double coef);

}  // namespace snug
