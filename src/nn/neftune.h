// NEFTune (Jain et al. 2023, "NEFTune: Noisy Embeddings Improve Instruction Finetuning"), as the
// HF Trainer's neftune_noise_alpha applies it: a forward hook on get_input_embeddings() adds
// U(-m, m) noise to the embeddings' output (B,T,C) in training forwards, m = alpha / sqrt(T * C).
// The noise is a constant of the forward (gradients flow through unchanged); it is keyed by the
// run's training-forward count, so a recomputation or a resumed run draws the same. Every family
// calls this one function (DecoderLM, Bert).
#pragma once

#include "core/tensor.h"
#include "nn/run_context.h"

namespace snug::nn {

// emb (B,T,C) fp32 += the noise of c's current training forward.
void add_neftune_noise(const RunContext& c, const Tensor& emb, double alpha);

}  // namespace snug::nn
