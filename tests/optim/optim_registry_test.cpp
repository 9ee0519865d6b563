// The optimizer registry (optim/registry.h) holds every fact the rest of snug asks about an
// optimizer, so each field is held to what the optimizer really does:
//  - state_bytes: a real cpu run of a small model (two steps, one parameter frozen) allocates
//    exactly the sum over the trainable parameters under optimizer_state, fp32 and, for the
//    entries that update bf16 parameters, under --bf16-full;
//  - updates_in_backward: the factory's optimizer is an InBackwardOptimizer exactly then;
//  - bf16_params: --bf16-full is accepted exactly for those names;
//  - the advisor's and the what-if table's optimizers, in their order.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "optim/lomo.h"
#include "optim/registry.h"
#include "support/configs.h"
#include "support/memory_checks.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace optim_registry_test {

using test::at;

TEST(OptimRegistry, NamesAreUniqueAndEachFindsItsEntry) {
  std::set<std::string> seen;
  for (const OptimizerEntry& e : optimizer_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    EXPECT_EQ(find_optimizer(e.name), &e);
    for (const char* alias : e.aliases) {
      EXPECT_TRUE(seen.insert(alias).second) << alias;
      EXPECT_EQ(find_optimizer(alias), &e) << alias;
    }
  }
  EXPECT_EQ(seen.size(), optimizer_names().size());
  EXPECT_EQ(optimizer_names().front(), TrainingArguments{}.optim);  // the default comes first
  EXPECT_EQ(find_optimizer("adamw_nope"), nullptr);
  EXPECT_THROW(optimizer_entry("adamw_nope"), Error);
}

TEST(OptimRegistry, StateBytesEqualWhatARealRunAllocates) {
  const GPT2Config cfg = test::odd_config();
  for (const OptimizerEntry& e : optimizer_registry()) {
    for (bool bf16_full : {false, true}) {
      if (bf16_full && !e.bf16_params) continue;
      TrainingArguments a;
      a.optim = e.name;
      a.bf16_full = bf16_full;
      a.per_device_train_batch_size = 2;
      a.seq_len = 16;
      a.max_steps = 2;
      a.momentum = 0.9;                       // sgd keeps a buffer
      a.weight_decay = 0.01;                  // every optimizer's decay path
      a.galore_rank = 8;                      // below the matrices' sides: projected states
      a.freeze = {"transformer.wpe.weight"};  // frozen: no state
      Device dev(cpu_backend());
      GPT2 model(cfg, dev, a.param_dtype());
      model.init_weights(a.seed);
      auto data = open_dataset(a.data, cfg.vocab_size, a.seed);
      Trainer trainer(a, model, data.get());
      const TrainResult r = trainer.train();
      ASSERT_TRUE(r.error.empty()) << e.name << ": " << r.error;
      int64_t want = 0, trainable = 0;
      for (const Parameter* p : model.parameters())
        if (p->requires_grad) {
          want += e.state_bytes(*p, a.optimizer_options());
          ++trainable;
        }
      EXPECT_LT(trainable, static_cast<int64_t>(model.parameters().size())) << "wpe is frozen";
      const MemoryStats st = dev.pool().stats();
      EXPECT_EQ(at(st.max_by_category, Category::optimizer_state), want)
          << e.name << (bf16_full ? " --bf16-full" : "");
      EXPECT_EQ(state_bytes_formula(e.name, model.parameters(), a.optimizer_options()), want);
    }
  }
}

TEST(OptimRegistry, UpdatesInBackwardIsTheFusedOptimizer) {
  Device dev(meta_backend());
  GPT2 model(test::odd_config(), dev);
  for (const OptimizerEntry& e : optimizer_registry()) {
    const auto opt = make_optimizer(e.name, model.parameters(), OptimizerOptions{});
    EXPECT_EQ(dynamic_cast<InBackwardOptimizer*>(opt.get()) != nullptr, e.updates_in_backward)
        << e.name;
  }
}

TEST(OptimRegistry, Bf16FullAcceptsExactlyTheBf16Entries) {
  for (const std::string& name : optimizer_names()) {
    TrainingArguments a;
    a.optim = name;
    a.bf16_full = true;
    if (optimizer_entry(name).bf16_params) {
      EXPECT_NO_THROW(a.validate()) << name;
    } else {
      EXPECT_THROW(a.validate(), Error) << name;
    }
  }
  EXPECT_EQ(bf16_optimizer_names(), "adamw_torch, adamw, sgd, lomo or adalomo");
}

std::vector<std::string> names(const std::vector<const OptimizerEntry*>& entries) {
  std::vector<std::string> out;
  for (const OptimizerEntry* e : entries) out.emplace_back(e->name);
  return out;
}

TEST(OptimRegistry, AdvisorAndWhatIfProposeInTheirOrder) {
  EXPECT_EQ(names(advisor_optimizers()),
            (std::vector<std::string>{"adamw_torch", "adamw_bnb_8bit", "adafactor", "lion", "sgd",
                                      "adalomo", "lomo"}));
  EXPECT_EQ(
      names(what_if_optimizers()),
      (std::vector<std::string>{"adafactor", "adamw_bnb_8bit", "lion", "sgd", "adalomo", "lomo"}));
}

}  // namespace optim_registry_test
}  // namespace
}  // namespace snug
