// Gradient accumulation is exact: the window's loss is normalized by the window's number of target
// tokens, so B=8 x 1 micro-batch and B=2 x 4 micro-batches over the same samples (with a
// different number of ignored targets in each micro-batch) give the same loss and the same
// weights after 5 AdamW steps, up to float rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "core/device.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "optim/optimizer.h"
#include "support/random.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace grad_accum_test {

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
};

Outcome run(int64_t B, int64_t accum, const std::vector<int32_t>& inputs,
            const std::vector<int32_t>& targets, int64_t T, int steps) {
  GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  cfg.n_layer = 2;
  Device dev(cpu_backend());
  GPT2 model(cfg, dev);
  model.init_weights(7);
  auto opt = make_optimizer("adamw_torch", model.parameters(), {});
  Outcome o;
  const int64_t window = B * accum * T;
  for (int s = 0; s < steps; ++s) {
    const int32_t* in = inputs.data() + s * window;
    const int32_t* tg = targets.data() + s * window;
    int64_t valid = 0;
    for (int64_t i = 0; i < window; ++i) valid += tg[i] >= 0;
    o.losses.push_back(accumulate_gradients(model, in, tg, B, T, accum, valid));
    opt->step(1e-3f);
    model.zero_grad();
  }
  for (Parameter* p : model.parameters())
    o.weights.emplace_back(p->value.data<float>(), p->value.data<float>() + p->value.numel());
  return o;
}

TEST(GradientAccumulation, EightByOneEqualsTwoByFourWithUnevenIgnoredTargets) {
  const int64_t T = 16, steps = 5, per_step = 8 * T;
  std::vector<int32_t> inputs = test::random_ints(steps * per_step, 1, 0, 255);
  std::vector<int32_t> targets = test::random_ints(steps * per_step, 2, 0, 255);
  // Ignore many targets in the first sequences of each step only: micro-batches then hold very
  // different numbers of valid targets, which per-micro-batch normalization would get wrong.
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t i = 0; i < 2 * T + 5; ++i) targets[static_cast<size_t>(s * per_step + i)] = -100;

  const Outcome one = run(8, 1, inputs, targets, T, steps);
  const Outcome four = run(2, 4, inputs, targets, T, steps);
  for (int s = 0; s < steps; ++s)
    EXPECT_NEAR(one.losses[s], four.losses[s], 1e-5 * std::abs(one.losses[s])) << "step " << s;
  // Relative L2 difference over all weights. (Per element, the key bias is not comparable: its
  // gradient is mathematically zero, as softmax ignores a per-query constant, so Adam divides
  // float noise of ~1e-10 by similar noise and moves it by noise-sized amounts.)
  double diff2 = 0, norm2 = 0;
  for (size_t p = 0; p < one.weights.size(); ++p)
    for (size_t i = 0; i < one.weights[p].size(); ++i) {
      const double d = double(one.weights[p][i]) - four.weights[p][i];
      diff2 += d * d;
      norm2 += double(one.weights[p][i]) * one.weights[p][i];
    }
  EXPECT_LT(std::sqrt(diff2 / norm2), 1e-5);
}

}  // namespace grad_accum_test
}  // namespace
}  // namespace snug
