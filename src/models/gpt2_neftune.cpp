// NEFTune (Jain et al. 2023, "NEFTune: Noisy Embeddings Improve Instruction Finetuning"), as
// Hugging Face's Trainer applies it with neftune_noise_alpha: a forward hook on the input
// embeddings adds uniform noise of magnitude alpha / sqrt(L * d) (L the sequence length, d the
// embedding width) in training mode only. The noise is a constant of the forward, so gradients
// flow through the embeddings unchanged. GPT-2's input embedding is wte; adding the noise after
// wpe has been added is the same sum.
#include <cmath>

#include "core/random.h"
#include "models/gpt2_internal.h"

namespace snug {

void GPT2::add_neftune_noise(const Tensor& encoded) const {
  const int64_t T = encoded.dim(1), C = encoded.dim(2);
  const double mag = neftune_alpha_ / std::sqrt(static_cast<double>(T * C));
  SplitMix64 rng(splitmix64_mix(forward_count_ ^ 0x6e656674756e65ull));  // "neftune"
  float* e = encoded.data<float>();
  for (int64_t i = 0; i < encoded.numel(); ++i)
    e[i] += static_cast<float>((2.0 * rng.uniform() - 1.0) * mag);
}

}  // namespace snug
