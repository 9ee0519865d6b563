// `snug plan --inference`: the plan of a generation instead of a training step
// (plan/inference_plan.h). The model's flags are those of `snug generate` (every training flag:
// --model, --bf16, --load-in-4bit, --lora-r...), the batch is --per-device-eval-batch-size
// prompts, the context --seq-len tokens in all (prompt = --seq-len minus --max-new-tokens), and
// --num-beams. It prints the memory table, the weights and the KV cache as formulas with the
// plan's numbers, and the device verdicts; --find-max-batch / --find-max-seq-len search the
// generation's batch and context (exact: dry runs), --memory-timeline records the generation,
// and --json writes the training plan's keys plus "inference".
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli/plan_extras.h"
#include "train/training_args.h"

namespace snug::cli {

struct InferenceFlags {
  bool on = false;  // --inference
  int64_t max_new_tokens = 64;
  int64_t num_beams = 1;
};

// --inference, and --max-new-tokens and --num-beams (generate's flags), which need it.
void add_inference_flags(CLI::App* plan, InferenceFlags& f);

int run_inference_plan(TrainingArguments args, const InferenceFlags& f,
                       const std::string& device_memory, bool all_gpus,
                       const std::string& json_path, const PlanExtras& extras);

}  // namespace snug::cli
