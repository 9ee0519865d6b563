// ZeRO stage 3 partitioned from construction (train/zero3_init.h, nn/construction_partition.h;
// DeepSpeed's zero.Init), on one process standing for rank r of a world of 3 (odd: padding):
//  - initialized from a seed or loaded from a safetensors file, fp32 or bf16, each trainable
//    parameter holds exactly its slice of the whole model's values (elements [r*s, (r+1)*s), the
//    padding past its end zeros); a --freeze'd one is whole, as the Trainer keeps it;
//  - the rank's tracked weights are never more than its shards and the frozen parameters, to the
//    byte: the whole model never exists in the pool;
//  - a dry run (the plan) of a stage-3 world holds the shards plus one gathered block at most,
//    evaluating or not: its weights' maximum is 4 * (S + the largest block's padded elements);
//  - runs the Trainer refuses at stage 3 (a family without gathers, mixed precision over fp32
//    weights) and runs below stage 3 are built whole, so the Trainer says why as before.
// (The losses of such runs against one process: the mpi cases mpi_zero3_*.)
#include "train/zero3_init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "kernels/backends.h"
#include "models/hf_weights.h"
#include "models/registry.h"
#include "plan/dry_run.h"
#include "support/memory_checks.h"
#include "support/temp_dir.h"
#include "train/model_setup.h"
#include "train/training_args.h"
#include "train/zero3_params.h"

namespace snug {
namespace {
namespace zero3_init_test {

using test::at;

constexpr int kWorld = 3;

TrainingArguments stage3(const std::string& model, bool bf16_full) {
  TrainingArguments a;
  a.model = model;
  a.zero_stage = 3;
  a.bf16_full = bf16_full;
  a.optim = "adamw_torch";
  a.freeze = {"wpe"};  // stays whole
  return a;
}

// Element i of a parameter's whole values, or of a partitioned one's shard, as float.
float value_at(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::f32) return t.data<float>()[i];
  float f = 0;
  convert(t.data_u16() + i, t.dtype(), &f, DType::f32, 1);
  return f;
}

// Builds rank r's model inside zero3_init's scope and checks it against `whole` (the same
// values, built whole).
void expect_slices_of(const Model& whole, const TrainingArguments& a, int r) {
  SCOPED_TRACE("rank " + std::to_string(r));
  Device dev(cpu_backend());
  const auto scope = zero3_init(a, dev, r, kWorld);
  ASSERT_NE(scope, nullptr);
  const auto model = create_model(a.model_config(), dev, a.param_dtype());
  load_initial_weights(*model, a, a.model_config());
  int64_t frozen_bytes = 0, checked = 0;
  for (size_t k = 0; k < whole.parameters().size(); ++k) {
    const Parameter& w = *whole.parameters()[k];
    const Parameter& p = *model->parameters()[k];
    ASSERT_EQ(w.name, p.name);
    ASSERT_EQ(w.shape(), p.shape());
    if (w.name.find("wpe") != std::string::npos) {
      ASSERT_TRUE(p.value.defined()) << p.name;
      EXPECT_FALSE(p.shard.defined());
      frozen_bytes += p.value.nbytes();
      for (int64_t i = 0; i < p.numel(); ++i)
        ASSERT_EQ(value_at(p.value, i), value_at(w.value, i)) << p.name << " " << i;
      continue;
    }
    ASSERT_FALSE(p.value.defined()) << p.name;
    ASSERT_TRUE(p.shard.defined()) << p.name;
    const int64_t s = zero3_padded_numel(p.numel(), kWorld) / kWorld;
    EXPECT_EQ(p.shard.numel(), s);
    EXPECT_EQ(p.shard_begin, r * s);
    for (int64_t i = 0; i < s; ++i) {
      const int64_t e = r * s + i;
      ASSERT_EQ(value_at(p.shard, i), e < p.numel() ? value_at(w.value, e) : 0.0f)
          << p.name << " element " << e;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
  const MemoryStats m = dev.pool().stats();
  EXPECT_EQ(at(m.max_by_category, Category::weights), scope->shards().nbytes() + frozen_bytes);
  EXPECT_EQ(at(m.live, Category::weights), scope->shards().nbytes() + frozen_bytes);
}

TEST(Zero3Init, SeededSlicesAreTheWholeModelsFp32AndBf16) {
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "fp32");
    const TrainingArguments a = stage3("gpt2-tiny", bf16);
    Device whole_dev(cpu_backend());
    const auto whole = create_model(a.model_config(), whole_dev, a.param_dtype());
    load_initial_weights(*whole, a, a.model_config());
    for (int r = 0; r < kWorld; ++r) expect_slices_of(*whole, a, r);
  }
}

TEST(Zero3Init, LoadedSlicesAreTheFilesSlices) {
  testing_data::TempDir dir;
  TrainingArguments a = stage3("llama-tiny", false);
  a.freeze = {"embed_tokens"};
  Device whole_dev(cpu_backend());
  const auto whole = create_model(a.model_config(), whole_dev, a.param_dtype());
  load_initial_weights(*whole, a, a.model_config());
  save_hf_weights(*whole, dir.file("w.safetensors"));
  a.init_from = dir.file("w.safetensors");
  a.seed = 7;  // not what the file holds
  for (int r = 0; r < kWorld; ++r) {
    Device dev(cpu_backend());
    const auto scope = zero3_init(a, dev, r, kWorld);
    ASSERT_NE(scope, nullptr);
    const auto model = create_model(a.model_config(), dev, a.param_dtype());
    load_initial_weights(*model, a, a.model_config());
    for (size_t k = 0; k < whole->parameters().size(); ++k) {
      const Parameter& w = *whole->parameters()[k];
      const Parameter& p = *model->parameters()[k];
      const bool frozen = w.name.find("embed_tokens") != std::string::npos;
      ASSERT_EQ(p.value.defined(), frozen) << p.name;
      const Tensor& t = frozen ? p.value : p.shard;
      const int64_t first = frozen ? 0 : p.shard_begin;
      for (int64_t i = 0; i < t.numel(); ++i) {
        const int64_t e = first + i;
        ASSERT_EQ(value_at(t, i), e < w.numel() ? value_at(w.value, e) : 0.0f)
            << p.name << " " << e;
      }
    }
  }
}

// The parameters of one gathered block of a Llama model, by name.
int64_t block_of(const std::string& name) {
  const std::string layers = "model.layers.";
  if (name.rfind(layers, 0) == 0) return std::stoll(name.substr(layers.size()));
  if (name.rfind("model.embed_tokens", 0) == 0) return -1;
  return -2;  // the head: the final norm and lm_head
}

TEST(Zero3Init, APlansWeightsAreTheShardsAndOneGatheredBlock) {
  for (const int world : {2, 3, 5})
    for (const bool eval : {false, true}) {  // an evaluation gathers by blocks too
      SCOPED_TRACE("world " + std::to_string(world) + (eval ? " with evaluation" : ""));
      TrainingArguments a = stage3("llama-tiny", false);
      a.freeze.clear();
      a.per_device_train_batch_size = 2;
      a.seq_len = 16;
      a.max_steps = 2;
      a.data = "dummy";
      if (eval) {
        a.eval_data = "dummy";
        a.eval_steps = 1;
      }
      DryRunData d;
      d.world_size = world;
      const MemoryStats m = dry_run(a, d);
      Device meta(meta_backend());
      const auto model = create_model(a.model_config(), meta);
      const std::vector<Zero3Entry> layout = zero3_layout(model->parameters(), world);
      int64_t shards = 0;
      std::map<int64_t, int64_t> blocks;  // padded elements per block
      for (const Zero3Entry& e : layout) {
        shards += e.shard;
        blocks[block_of(e.p->name)] += e.padded;
      }
      int64_t largest = 0;
      for (const auto& [b, n] : blocks) largest = std::max(largest, n);
      EXPECT_EQ(at(m.max_by_category, Category::weights), 4 * (shards + largest));
      // One process holds the whole model: 4 bytes a parameter.
      EXPECT_LT(at(m.max_by_category, Category::weights), 4 * count_params(model->parameters()));
    }
}

TEST(Zero3Init, RunsTheTrainerRefusesOrBelowStageThreeAreBuiltWhole) {
  Device dev(cpu_backend());
  TrainingArguments two = stage3("gpt2-tiny", false);
  two.zero_stage = 2;
  EXPECT_EQ(zero3_init(two, dev, 0, kWorld), nullptr);
  TrainingArguments mixed = stage3("gpt2-tiny", false);
  mixed.bf16 = true;  // fp32 weights cast per forward: refused at stage 3
  EXPECT_EQ(zero3_init(mixed, dev, 0, kWorld), nullptr);
  TrainingArguments bert = stage3("bert-tiny", false);
  bert.freeze.clear();
  EXPECT_EQ(zero3_init(bert, dev, 0, kWorld), nullptr);  // no gathers in its blocks
  TrainingArguments typo = stage3("gpt2-tiny", false);
  typo.freeze = {"no_such_parameter"};  // prepare_model's error, in the Trainer's order
  EXPECT_EQ(zero3_init(typo, dev, 0, kWorld), nullptr);
  EXPECT_EQ(at(dev.pool().stats().max_by_category, Category::weights), 0);
}

}  // namespace zero3_init_test
}  // namespace
}  // namespace snug
