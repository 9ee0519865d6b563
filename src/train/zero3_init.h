// ZeRO stage 3 from the model's construction on: snug's form of DeepSpeed's zero.Init
// (docs/distributed.md, "Partitioned from construction"). Without it each rank builds and loads
// the whole model before the Trainer cuts it, so a rank's peak weights are one process's (a 7B
// model's 28 GB of fp32 on every card, however many ranks share it). Inside the scope
// zero3_init returns, each trainable parameter is partitioned as the model makes it: only the
// rank's slice exists (nn/construction_partition.h), initialization and loading write it, and
// the Trainer's ZeRO-3 parameters (train/zero3_params.h) take the shards over. The values, the
// losses and every later allocation are those of the run partitioned by the Trainer.
//
// Which parameters train is known only after the PEFT steps (LoRA freezes the base, --freeze):
// zero3_init builds the model on meta first and runs configure_model and prepare_model on it
// (train/model_setup.h), so the layout is zero3_layout of exactly what the run trains. Parameters
// added after construction (LoRA adapters) are made whole and partitioned by the Trainer.
#pragma once

#include <memory>

#include "core/device.h"
#include "models/model.h"
#include "nn/construction_partition.h"
#include "train/training_args.h"

namespace snug {

// What a stage-3 run refuses of `args` and `model` (the Trainer's checks), as snug::Error.
void check_zero3_settings(const TrainingArguments& args, const Model& model);

// For --zero-stage 3: the scope to create (and load) the run's model on `dev` in, as rank `rank`
// of `world`; its shards (zeroed, category weights) are allocated now, on `dev` or in its host
// pool (--offload-param cpu). nullptr below stage 3, and for a run the Trainer refuses (it then
// refuses it as before, after the model is built whole). Keep it alive until the Trainer is made.
std::unique_ptr<nn::ConstructionPartition> zero3_init(const TrainingArguments& args, Device& dev,
                                                      int rank, int world);

}  // namespace snug
