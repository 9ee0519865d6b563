// How a model runs, whatever the family: gradient checkpointing, the attention implementation,
// how the LM head meets the loss, and the compute precision. These are the Trainer's run options
// (flags --gradient-checkpointing/--checkpoint-policy, --attention, --logits, --fp16/--bf16); every
// model behind models/model.h honours them, and the blocks of nn/ implement them.
#pragma once

#include <cstdint>
#include <string>

namespace snug {

// Gradient checkpointing (activation recomputation), as torch.utils.checkpoint applies it:
//   every_layer  keep each layer's input only, recompute the layer in backward (HF's default);
//   every_k      keep the input of every k-th layer, recompute k layers at a time ("sqrt" picks
//                k = ceil(sqrt(L)), about sqrt(L) checkpoints);
//   selective    keep the GEMM outputs and recompute the cheap ops (LayerNorms, attention
//                softmax, GELU) - Korthikanti et al. 2022.
// Results are bitwise identical to no checkpointing: the same kernels recompute the same values.
enum class CheckpointPolicy { none, every_layer, every_k, selective };
struct CheckpointConfig {
  CheckpointPolicy policy = CheckpointPolicy::none;
  int64_t every_k = 1;  // segment length in layers (every_layer: 1)
};
// "every-layer", "every-k:K", "sqrt", "selective" (and "none"); throws naming --checkpoint-policy.
CheckpointConfig parse_checkpoint_policy(const std::string& text, int64_t n_layer);

// Attention implementation. flash: tiled with an online softmax, saving only a per-row
// log-sum-exp (memory linear in T; docs/attention.md). naive: materializes the (B,NH,T,T)
// probabilities, the reference.
enum class AttentionImpl { flash, naive };
AttentionImpl parse_attention_impl(const std::string& text);  // "flash" | "naive"

// LM head + cross-entropy. chunked: logits computed and consumed a chunk of rows at a time
// (about 32 MiB of scratch), the head's gradient produced in the same pass; the (B,T,V) logits
// never exist. full: materialize the logits (needed to read them, e.g. for generation).
enum class LogitsMode { chunked, full };
LogitsMode parse_logits_mode(const std::string& text);  // "chunked" | "full"

// Mixed precision (--fp16 / --bf16), as torch.autocast runs a model (docs/mixed-precision.md):
// the parameters stay fp32 (master weights, category weights) and are what the optimizer
// updates; each forward casts the GEMM weights (the four Linear weights of every layer and the
// tied wte of the LM head) to 16-bit compute copies, also counted under `weights`, which live
// until the end of backward. GEMM inputs and outputs, attention and GELU outputs are rounded to
// 16 bits and kept for backward as 16-bit tensors; LayerNorm, softmax statistics, the residual
// stream, the loss and every parameter gradient stay fp32. In backward the gradients entering a
// 16-bit GEMM or attention are rounded to 16 bits too (where fp16 underflows without a loss
// scale). This CPU has no 16-bit GEMM: a 16-bit tensor is widened to an fp32 temporary where a
// kernel reads it (counted under `temporary`), so the arithmetic is that of a bf16/fp16 GEMM
// with fp32 accumulation, not its speed (kernels/gemm_path.h: where the CPU has bf16 matrix
// hardware, --bf16 runs its GEMMs on it instead).
enum class ComputeDType { f32, f16, bf16 };
// From the --fp16 / --bf16 flags; both set is an error naming them.
ComputeDType parse_compute_dtype(bool fp16, bool bf16);

}  // namespace snug
