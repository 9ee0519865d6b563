// One training run of TrainingArguments, set up as `snug train` sets it up: the model of
// a.model_config() (models/registry.h create_model) initialized from a.seed, the data of
// a.data_options() (data/batches.h open_data: the training data and, with --eval-split or
// --eval-data, the evaluation data) and a Trainer over them. It runs on the cpu device, or on
// another backend (meta: the dry run of the same arguments) or op table (one that counts calls).
// Tests read the model, the data and the pool after train().
#pragma once

#include <memory>

#include "core/device.h"
#include "data/batches.h"
#include "kernels/backends.h"
#include "models/model.h"
#include "models/model_config.h"
#include "train/trainer.h"
#include "train/training_args.h"

namespace snug::test {

struct TrainRun {
  explicit TrainRun(const TrainingArguments& a, const Backend& kind = cpu_backend(),
                    const OpTable* ops = nullptr);
  // A Trainer over the model and data, trained; its result.
  TrainResult train();

  TrainingArguments args;
  Device dev;
  ModelConfig cfg;
  std::unique_ptr<Model> model;
  OpenedData data;
};

}  // namespace snug::test
