// Forward + backward over an accumulation window of micro-batches: the Trainer's accumulate step
// (train/trainer.h), also what the tests drive directly. Each micro-batch's backward is told its
// index in the window (Model::set_micro_batch), which grad-ready listeners see
// (models/grad_ready.h); afterwards the model is back at micro-batch 0 of 1.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/model.h"

namespace snug {

// Forward + backward over `accum` micro-batches of (B,T) tokens laid out one after another in
// inputs/targets, accumulating into the parameters' gradients d(window loss)/dW where the window
// loss is the sum of per-token losses divided by `window_targets`, the number of targets >= 0 in
// the whole window, times `loss_scale` (fp16's dynamic loss scale; 1 otherwise). Returns that
// window loss, unscaled (non-finite: stopped at that micro-batch).
double accumulate_gradients(Model& model, const int32_t* inputs, const int32_t* targets, int64_t B,
                            int64_t T, int64_t accum, int64_t window_targets,
                            double loss_scale = 1.0);
// The same with micro-batch m holding cols[m] <= T tokens per row ((B, cols[m]) at offset m*B*T)
// and, when `positions` is not null, its position ids laid out as the inputs (packed rows).
// window_targets may count more targets than these micro-batches hold (data parallelism: the
// window's count summed over every rank), so that each rank's gradients add up to the
// one-process window's. `after_backward`, when set, runs after each micro-batch's backward (ZeRO
// stage 2 reduces that micro-batch's gradients there).
double accumulate_gradients(Model& model, const int32_t* inputs, const int32_t* targets,
                            const int32_t* positions, const std::vector<int64_t>& cols, int64_t B,
                            int64_t T, int64_t window_targets, double loss_scale = 1.0,
                            const std::function<void()>& after_backward = {});

}  // namespace snug
