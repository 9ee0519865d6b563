// `snug estimate`: the closed-form memory estimate, the way the Hugging Face model memory
// calculator and `accelerate estimate-memory` compute it (bytes per parameter by dtype for
// weights, gradients and optimizer state), plus activations by Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models", section 4.1), so that a
// reader can set the textbook numbers beside the dry run's exact ones (docs/memory.md).
//
// Per category, P parameters (Pt of them trainable), s = seq_len, b = batch, h = n_embd,
// a = n_head, L = n_layer, v = vocab_size, e = bytes per activation element (4 fp32, 2 under
// --fp16/--bf16/--bf16-full):
//   weights          4P (fp32); 4P + 2P with --fp16/--bf16 (fp32 master + a 16-bit copy; HF's
//                    calculator books that copy under gradients: 4P + 6P, the same sum); 2P
//                    with --bf16-full (bf16 parameters, no master) and --precision-layout
//                    deepspeed (whose fp32 master is optimizer state)
//   gradients        4Pt (fp32, also under mixed precision; 2Pt bf16 with --bf16-full and
//                    --precision-layout deepspeed);
//                    lomo/adalomo update inside backward and keep only the largest block's
//                    gradient
//   optimizer_state  the optimizer's own per-parameter formula (optim/optimizer.h
//                    state_bytes_formula): adamw 8 (4 with --bf16-full, 12 with
//                    --precision-layout deepspeed: fp32 master + moments), lion 4, sgd 0 or 4
//                    (momentum; 2 with --bf16-full), adafactor
//                    4(rows+cols) per matrix, adamw_bnb_8bit ~2 + block scales, ...
//   activations      per layer sbh(34 + 5as/h) in 16-bit (Korthikanti's count, with dropout
//                    masks), generalized to e bytes: sbh(16e + 2) + as^2b(2e + 1). The as^2b term
//                    is dropped with flash attention (the T x T scores are never stored; as in
//                    their selective recomputation). Full checkpointing keeps each layer's input
//                    (e*sbh per layer) plus one layer's activations while it is recomputed;
//                    every-k:K keeps ceil(L/K) inputs plus K layers; selective drops the as^2b
//                    term. --logits full adds 4sbv (fp32 logits for the cross-entropy).
//   temporary, input_data, kv_cache, quant_state: not modelled (0).
// The estimated peak is the sum of the four, all live at once.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/memory.h"
#include "train/training_args.h"

namespace snug {

struct MemoryEstimate {
  int64_t params = 0;
  int64_t trainable_params = 0;
  ByCategory bytes{};                           // 0 where not modelled
  std::array<std::string, kNumCategories> how;  // the formula used, "" where not modelled
  int64_t total() const;
  int64_t model_states() const;  // weights + gradients + optimizer_state
};

MemoryEstimate estimate_memory(const TrainingArguments& args);

// Korthikanti et al.'s activation bytes for the arguments (the `activations` line above).
int64_t korthikanti_activation_bytes(const TrainingArguments& args);

// The estimate beside a dry run's exact figures: one row per category with the ratio
// estimate / plan (plan: each category's own maximum, total: the peak).
std::string estimate_table(const MemoryEstimate& est, const MemoryStats& plan);
nlohmann::json estimate_json(const MemoryEstimate& est, const MemoryStats& plan);

}  // namespace snug
