// Every optimizer lowers the loss: gpt2-tiny on the built-in corpus, 300 steps of B=8, T=64,
// through the Trainer (linear decay, grad clipping 1.0), at the learning rate docs/optimizers.md
// recommends for it. The final loss (mean of the last 10 steps) must be at most 0.75 of the first.
#include <gtest/gtest.h>

#include <iostream>
#include <numeric>
#include <string>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace optim_convergence_slowtest {

struct Case {
  std::string optim;
  double lr;
  int64_t galore_rank = 128;
  std::string label = "";  // test name; the optimizer's when empty
};

class OptimConvergence : public ::testing::TestWithParam<Case> {};

TEST_P(OptimConvergence, LossDropsByAQuarterIn300Steps) {
  const Case c = GetParam();
  TrainingArguments a;
  a.model = "gpt2-tiny";
  a.data = "builtin";
  a.optim = c.optim;
  a.learning_rate = c.lr;
  a.galore_rank = c.galore_rank;
  a.max_steps = 300;
  a.per_device_train_batch_size = 8;
  a.seq_len = 64;
  a.logging_steps = 1000;
  Device dev(cpu_backend());
  const GPT2Config cfg = resolve_gpt2(a.model);
  GPT2 model(cfg, dev);
  model.init_weights(a.seed);
  auto data = open_dataset("builtin", cfg.vocab_size, 42);
  Trainer trainer(a, model, data.get());
  const TrainResult r = trainer.train();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.loss.size(), 300u);
  const double first = r.loss.front();
  const double last = std::accumulate(r.loss.end() - 10, r.loss.end(), 0.0) / 10.0;
  const std::string rank =
      c.optim == "galore_adamw" ? " rank " + std::to_string(c.galore_rank) : "";
  std::cout << "[ convergence ] " << c.optim << rank << " lr " << c.lr << ": first " << first
            << ", last-10 mean " << last << ", ratio " << last / first << ", " << r.runtime_s
            << " s\n";
  EXPECT_LE(last, 0.75 * first) << c.optim;
}

// Keep in sync with the table in docs/optimizers.md.
INSTANTIATE_TEST_SUITE_P(OptimGpt2Tiny, OptimConvergence,
                         ::testing::Values(Case{"adamw_torch", 6e-4}, Case{"sgd", 0.5},
                                           Case{"lion", 2e-4}, Case{"adafactor", 3e-3},
                                           Case{"adamw_bnb_8bit", 6e-4}, Case{"lion_8bit", 2e-4},
                                           Case{"lomo", 0.5}, Case{"adalomo", 1e-2},
                                           Case{"galore_adamw", 2e-3},
                                           Case{"galore_adamw", 2e-3, 32, "galore_adamw_rank32"}),
                         [](const ::testing::TestParamInfo<Case>& pi) {
                           return pi.param.label.empty() ? pi.param.optim : pi.param.label;
                         });

}  // namespace optim_convergence_slowtest
}  // namespace
}  // namespace snug
