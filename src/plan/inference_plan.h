// `snug plan --inference`: a generation (generate/generate.h) replayed on the meta device with
// the model built exactly as `snug generate` builds it (create_model, load_initial_weights,
// prepare_generation: the same precision, quantization and LoRA flags), so that the plan's peak
// is a real cpu generation's peak to the byte (tests/cli/plan_inference_cli_test.cpp).
//
// The shape, in the flags' terms:
//   batch          --per-device-eval-batch-size prompts (transformers' name for the batch of
//                  evaluation and predict_with_generate)
//   context        --seq-len positions in all: the prompt is seq_len - --max-new-tokens tokens
//   num_beams      --num-beams: batch x num_beams cache rows
// The weights are stored in the dtype asked (train/training_args.h generation_param_dtype():
// --bf16/--bf16-full/--torch-dtype bfloat16 2 bytes per parameter, no fp32 master; LoRA adapters
// fp32 on any base). The KV cache is seed 004's formula, 2 x rows x layers x kv_heads x head_dim
// x context x bytes, in the compute dtype (2 bytes under --bf16/--fp16: nn/kv_cache.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/memory.h"
#include "nn/kv_cache.h"
#include "train/training_args.h"

namespace snug {

struct InferenceShape {
  int64_t batch = 1;           // prompts
  int64_t prompt_tokens = 1;   // tokens per prompt
  int64_t max_new_tokens = 1;  // tokens generated after each
  int64_t num_beams = 1;
  int64_t context() const { return prompt_tokens + max_new_tokens; }
  int64_t rows() const { return batch * num_beams; }  // the cache's batch
};

// The shape the flags ask for. Throws snug::Error naming the flags when the prompt would have
// no token (--seq-len <= --max-new-tokens) or a size is not positive.
InferenceShape inference_shape(const TrainingArguments& args, int64_t max_new_tokens,
                               int64_t num_beams);

struct InferencePlan {
  MemoryStats memory;
  nn::KVCacheShape kv;              // the model's cache: layers, kv heads, head_dim
  int64_t kv_cache_bytes = 0;       // the generation's cache (the formula)
  int64_t params = 0;               // parameter elements (a tied head counted once)
  int64_t f32_params = 0;           // of them, stored in fp32 (a 16-bit base's: the adapters)
  int64_t half_params = 0;          // of them, stored in 16 bits (half_dtype)
  DType half_dtype = DType::bf16;   // bf16 or f16
  int64_t compute_copy_params = 0;  // of them, those with a 16-bit compute copy (fp32 + --bf16)
  int64_t trainable_params = 0;     // LoRA adapters' (the plan's config reports it)
  int64_t forwards = 0;
};

// The generation of `shape` on meta, every other setting from `args` (its device is ignored).
// With `timeline`, every allocation and free is recorded into it. Throws snug::Error for a model
// that cannot generate (an encoder such as BERT), naming it.
InferencePlan inference_dry_run(const TrainingArguments& args, const InferenceShape& shape,
                                std::vector<MemoryEvent>* timeline = nullptr);

// "2 x 3 (batch x beams) x 12 (layers) x 12 (kv heads) x 64 (head_dim) x 1024 (context) x 2
// (bytes, bf16) = 113246208 bytes": the formula with the plan's numbers.
std::string kv_cache_formula(const InferenceShape& shape, const nn::KVCacheShape& kv);
// What the weights are: "2 x 124.44M (bf16) = 248879616 bytes, 2.00 bytes per parameter", or
// "4 x 124.44M (fp32 master) + 2 x 124.34M (bf16 compute copies of the GEMM weights) = ...", from
// the plan's counts and its measured weights bytes.
std::string weights_formula(const TrainingArguments& args, const InferencePlan& p);

// The "inference" object of plan --json: batch, prompt_tokens, max_new_tokens, num_beams,
// context, kv_cache_bytes, kv_cache ({layers, kv_heads, head_dim, bytes_per_element, dtype}),
// forwards, params, param_dtype, compute_copy_params.
nlohmann::json inference_json(const InferenceShape& shape, const InferencePlan& p);

}  // namespace snug
