// One training run of a GPT-2 of `cfg` on a fresh device of `kind` (cpu, meta, cpu-remote), in
// the run's parameter storage (a.param_dtype()), initialized from init_seed, over
// open_dataset(a.data) by a Trainer: what the Trainer tests compare between devices and flags.
// The device (its pools, the host pool beside it), the model, the data, the Trainer (what it owns,
// e.g. ZeRO's shards, stays live) and the result stay for the test to read. `before` runs once
// the model is built, before the Trainer is (e.g. to count what it will partition); `setup`
// runs on the fresh device, before anything is allocated on it (e.g. to give its pool pages).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/backend.h"
#include "core/device.h"
#include "data/dataset.h"
#include "models/gpt2/gpt2.h"
#include "train/trainer.h"
#include "train/training_args.h"

namespace snug::test {

struct Gpt2Train {
  Gpt2Train(const Backend& kind, const GPT2Config& cfg, const TrainingArguments& a,
            uint64_t init_seed = 42, const std::function<void(GPT2&)>& before = {},
            const std::function<void(Device&)>& setup = {});

  Device dev;
  GPT2 model;
  std::unique_ptr<TokenSource> data;
  std::unique_ptr<Trainer> trainer;
  TrainResult result;
};

}  // namespace snug::test
