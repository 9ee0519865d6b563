// Model configs shared by tests.
#pragma once

#include <cstdint>
#include <string>

#include "models/gpt2/gpt2_config.h"
#include "models/model_config.h"
#include "train/training_args.h"

namespace snug::test {

// Small, with every dimension odd or uneven (vocab 301, 40 positions, C 48 over 6 heads,
// 3 layers): shape bugs that round sizes hide show up here.
inline GPT2Config odd_config() {
  return {
      .name = "odd", .vocab_size = 301, .n_positions = 40, .n_embd = 48, .n_layer = 3, .n_head = 6};
}

// GPT-2 at a 7B shape: 32 layers of 4096 over 32 heads of 128, 2048 positions.
inline ModelShapeOverrides seven_b_shape() {
  ModelShapeOverrides o;
  o.n_layer = 32;
  o.n_embd = 4096;
  o.n_head = 32;
  o.n_positions = 2048;
  return o;
}

// The shape of a run, for the tests that set little else, written as data:
// args_of({.model = "gpt2-124m", .seq_len = 256, .batch = 2}). Every field not given keeps
// TrainingArguments' default.
struct RunShape {
  std::string model = TrainingArguments().model;
  int64_t seq_len = TrainingArguments().seq_len;
  int64_t batch = TrainingArguments().per_device_train_batch_size;
  int64_t accumulation = TrainingArguments().gradient_accumulation_steps;
};
inline TrainingArguments args_of(const RunShape& s) {
  TrainingArguments a;
  a.model = s.model;
  a.seq_len = s.seq_len;
  a.per_device_train_batch_size = s.batch;
  a.gradient_accumulation_steps = s.accumulation;
  return a;
}

// gpt2-tiny on the built-in data, seq 32, batch 2, learning rate 1e-3, `max_steps` steps, its
// checkpoints in `out`: the small real run the checkpoint tests stop and resume.
inline TrainingArguments tiny_run(int64_t max_steps, const std::string& out) {
  TrainingArguments a;
  a.model = "gpt2-tiny";
  a.data = "builtin";
  a.seq_len = 32;
  a.per_device_train_batch_size = 2;
  a.max_steps = max_steps;
  a.learning_rate = 1e-3;
  a.output_dir = out;
  return a;
}

// gpt2-tiny (the default model) on the built-in data with LoRA rank r (alpha 2r) on every linear
// layer, seq 64, batch 4, learning rate 3e-3, `max_steps` steps, no logging: the small adapter run
// whose loss must fall (LoRA, and QLoRA with apply_qlora_recipe()).
inline TrainingArguments small_lora_run(int64_t r, int64_t max_steps) {
  TrainingArguments a;
  a.lora_r = r;
  a.lora_alpha = 2.0 * static_cast<double>(r);
  a.target_modules = "all-linear";
  a.learning_rate = 3e-3;
  a.max_steps = max_steps;
  a.per_device_train_batch_size = 4;
  a.seq_len = 64;
  a.logging_steps = 1000;
  return a;
}

}  // namespace snug::test
