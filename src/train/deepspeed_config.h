// `--deepspeed ds_config.json` (HF TrainingArguments' `deepspeed`; issue 30): the keys of a
// DeepSpeed config that snug can honour, mapped onto TrainingArguments, so that an
// accelerate/DeepSpeed user's file carries over; every other key is refused by its full JSON path
// (docs/distributed.md, "--deepspeed").
//
// Read (anything else is refused, naming the path):
//   zero_optimization.stage                        0 (ZeRO 1-3 are refused until train runs them)
//   zero_optimization.offload_optimizer.device     --offload-optimizer none|cpu (nvme refused)
//   zero_optimization.offload_param.device         --offload-param none|cpu (nvme refused)
//   bf16.enabled                                   --bf16
//   fp16.enabled                                   --fp16
//   fp16.loss_scale, initial_scale_power, loss_scale_window, hysteresis, min_loss_scale
//                                                  only the values snug's scaler (torch's
//                                                  GradScaler) has: 0 (dynamic), 16, 2000, 1, <= 1
//   gradient_accumulation_steps                    --gradient-accumulation-steps
//   gradient_clipping                              --max-grad-norm
//   train_micro_batch_size_per_gpu                 --per-device-train-batch-size
//   train_batch_size                               checked: micro * accumulation * world size
//   optimizer {type AdamW, params lr, betas, eps, weight_decay}
//                                                  --optim adamw_torch, --learning-rate,
//                                                  --adam-beta1/2, --adam-epsilon, --weight-decay
// A value may be "auto": HF's rule, the command's flag (given or default) fills it. A value that
// contradicts a flag given on the command line is refused naming both; one that differs from a
// flag's default sets the flag.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "train/training_args.h"

namespace snug {

// Applies `config` (the parsed file; `origin` names it in messages: "--deepspeed ds.json") to
// `args`. `explicit_keys`: the JSON keys (train/flag_table.h) of the flags given on the command
// line; `world_size`: the ranks of the job (train_batch_size's check). Throws snug::Error.
void apply_deepspeed_config(const nlohmann::json& config, const std::string& origin,
                            const std::set<std::string>& explicit_keys, int world_size,
                            TrainingArguments& args);

// Reads the file at args.deepspeed (its JSON, with a message naming the file when it is not)
// and applies it as above.
void apply_deepspeed_file(const std::set<std::string>& explicit_keys, int world_size,
                          TrainingArguments& args);

}  // namespace snug
