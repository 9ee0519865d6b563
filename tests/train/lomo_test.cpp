// LOMO and AdaLOMO update inside backward (optim/lomo.h, train/fused_step.h):
//  - on GPT-2 124M (meta) the gradients peak at the embeddings' gradient (the largest block),
//    to the byte, instead of 4P; AdaLOMO keeps Adafactor's state and LOMO none;
//  - the fused update equals an ordinary backward followed by the same update, bit for bit;
//  - with clipping (two passes) LOMO follows SGD with clip_grad_norm_, and the loss falls;
//  - gradient accumulation is refused with a message naming the flag (fp16 and bf16 parameters:
//    lomo_bf16_test.cpp).
#include "optim/lomo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/configs.h"
#include "support/memory_checks.h"
#include "train/fused_step.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace lomo_test {

using test::at;

MemoryStats meta_run(const std::string& optim, double max_grad_norm) {
  Device dev(meta_backend());
  GPT2 model(resolve_gpt2("gpt2-124m"), dev);
  TrainingArguments a;
  a.model = "gpt2-124m";
  a.device = "meta";
  a.optim = optim;
  a.max_steps = 2;
  a.per_device_train_batch_size = 2;
  a.seq_len = 128;
  a.max_grad_norm = max_grad_norm;
  Trainer trainer(a, model, nullptr);
  const TrainResult r = trainer.train();
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.steps, 2);
  return dev.pool().stats();
}

TEST(Lomo, Gpt2_124mGradientsPeakAtTheEmbeddingsNotFourP) {
  const GPT2Config cfg = resolve_gpt2("gpt2-124m");
  const int64_t C = cfg.n_embd, V = cfg.vocab_size, Tp = cfg.n_positions;
  const int64_t P = cfg.num_params();
  // The largest block's gradients: wte (V, C) + wpe (n_positions, C), live together at the end
  // of backward; a transformer layer's twelve are 12 C^2 + 13 C floats, ln_f's 2 C.
  const int64_t embeddings = 4 * (V * C + Tp * C);
  const int64_t layer = 4 * (12 * C * C + 13 * C);
  ASSERT_GT(embeddings, layer);
  for (const char* optim : {"lomo", "adalomo"})
    for (double clip : {1.0, 0.0}) {
      const MemoryStats st = meta_run(optim, clip);
      EXPECT_EQ(at(st.max_by_category, Category::gradients), embeddings)
          << optim << " clip " << clip;
      EXPECT_EQ(embeddings, 157535232);
      EXPECT_EQ(at(st.live, Category::gradients), 0) << optim;
      EXPECT_LT(at(st.max_by_category, Category::gradients), 4 * P / 3);
    }
  EXPECT_EQ(at(meta_run("lomo", 1.0).max_by_category, Category::optimizer_state), 0);
  // AdaLOMO: 4 (rows + cols) per matrix, 4 n per vector, as adafactor.
  int64_t factored = 0;
  {
    Device dev(meta_backend());
    GPT2 model(cfg, dev);
    factored = state_bytes_formula("adafactor", model.parameters(), OptimizerOptions{});
  }
  EXPECT_EQ(at(meta_run("adalomo", 0.0).max_by_category, Category::optimizer_state), factored);
  // The ordinary optimizers hold all 4P bytes of gradients at once.
  EXPECT_EQ(at(meta_run("sgd", 1.0).max_by_category, Category::gradients), 4 * P);
}

// One model, initialized and fed the same batch every time.
struct Tiny {
  Device dev{cpu_backend()};
  GPT2 model{resolve_gpt2("gpt2-tiny"), dev};
  std::vector<int32_t> x, y;
  static constexpr int64_t B = 2, T = 32;
  Tiny() {
    model.init_weights(42);
    x.resize(B * T);
    y.resize(B * T);
    for (int64_t i = 0; i < B * T; ++i) {
      x[size_t(i)] = static_cast<int32_t>((i * 37 + 11) % 256);
      y[size_t(i)] = static_cast<int32_t>((i * 53 + 7) % 256);
    }
    y[3] = -100;  // an ignored target
  }
  std::vector<float> weights() const {
    std::vector<float> w;
    for (const Parameter* p : model.parameters())
      w.insert(w.end(), p->value.data<float>(), p->value.data<float>() + p->value.numel());
    return w;
  }
};

void expect_fused_equals_unfused(const std::string& optim, bool naive_logits) {
  OptimizerOptions o;
  o.weight_decay = 0.1f;
  Tiny a, b;
  if (naive_logits) {
    a.model.set_logits_mode(LogitsMode::full);
    b.model.set_logits_mode(LogitsMode::full);
  }
  auto opt_a = make_optimizer(optim, a.model.parameters(), o);
  auto opt_b = make_optimizer(optim, b.model.parameters(), o);
  auto* fused = dynamic_cast<InBackwardOptimizer*>(opt_b.get());
  ASSERT_NE(fused, nullptr);
  for (int step = 0; step < 3; ++step) {
    const float loss_a = a.model.forward(a.x.data(), a.y.data(), Tiny::B, Tiny::T);
    a.model.backward();
    opt_a->step(0.05f);  // ordinary: every gradient exists, then the update
    const FusedStepResult r =
        fused_optimizer_step(b.model, *fused, b.x.data(), b.y.data(), Tiny::B, Tiny::T, 0.05f, 0.0);
    EXPECT_EQ(static_cast<double>(loss_a), r.loss) << optim << " step " << step;
    EXPECT_GT(r.grad_norm, 0.0);
    for (const Parameter* p : b.model.parameters()) EXPECT_FALSE(p->grad.defined()) << p->name;
  }
  const std::vector<float> wa = a.weights(), wb = b.weights();
  ASSERT_EQ(wa.size(), wb.size());
  EXPECT_EQ(std::memcmp(wa.data(), wb.data(), wa.size() * sizeof(float)), 0)
      << optim << ": fused weights differ from backward-then-step";
}

TEST(Lomo, FusedUpdateEqualsBackwardThenStepBitForBit) {
  expect_fused_equals_unfused("lomo", false);
  expect_fused_equals_unfused("adalomo", false);
  expect_fused_equals_unfused("lomo", true);  // full logits: wte's gradient is not deferred
}

TEST(Lomo, TinyRealRunGradientsPeakAtOneLayerAndLossFalls) {
  const GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  const int64_t C = cfg.n_embd;
  Device dev(cpu_backend());
  GPT2 model(cfg, dev);
  model.init_weights(42);
  const auto data = open_dataset("builtin", cfg.vocab_size, 42);
  TrainingArguments a = test::args_of({.seq_len = 64, .batch = 4});
  a.max_steps = 40;
  a.learning_rate = 0.5;
  a.optim = "lomo";
  Trainer trainer(a, model, data.get());
  const TrainResult r = trainer.train();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.loss.size(), 40u);
  double last = 0;
  for (size_t i = 30; i < 40; ++i) last += r.loss[i] / 10.0;
  EXPECT_LT(last, 0.85 * r.loss.front()) << "first " << r.loss.front() << " last-10 " << last;
  // gpt2-tiny's largest block is a transformer layer (its embeddings are (256 + 256) x 128).
  const int64_t layer = 4 * (12 * C * C + 13 * C);
  ASSERT_GT(layer, 4 * (cfg.vocab_size + cfg.n_positions) * C);
  const MemoryStats st = dev.pool().stats();
  EXPECT_EQ(at(st.max_by_category, Category::gradients), layer);
  for (double n : r.grad_norm) EXPECT_TRUE(std::isfinite(n) && n > 0);
}

TEST(Lomo, WithClippingFollowsSgdWithClipGradNorm) {
  // LOMO is SGD applied inside backward; its two-pass clipping gives clip_grad_norm_'s update.
  auto run = [](const std::string& optim) {
    const GPT2Config cfg = resolve_gpt2("gpt2-tiny");
    Device dev(cpu_backend());
    GPT2 model(cfg, dev);
    model.init_weights(42);
    const auto data = open_dataset("builtin", cfg.vocab_size, 42);
    TrainingArguments a;
    a.optim = optim;
    a.learning_rate = 0.5;
    a.max_steps = 6;
    a.max_grad_norm = 0.5;  // clips: the first norms are about 2-4
    a.per_device_train_batch_size = 2;
    a.seq_len = 32;
    Trainer trainer(a, model, data.get());
    return trainer.train();
  };
  const TrainResult sgd = run("sgd"), lomo = run("lomo");
  ASSERT_TRUE(sgd.error.empty() && lomo.error.empty()) << sgd.error << lomo.error;
  ASSERT_EQ(sgd.loss.size(), lomo.loss.size());
  EXPECT_GT(sgd.grad_norm[0], 0.5);
  for (size_t i = 0; i < sgd.loss.size(); ++i) {
    EXPECT_NEAR(lomo.loss[i], sgd.loss[i], 1e-5 * sgd.loss[i]) << "step " << i + 1;
    EXPECT_NEAR(lomo.grad_norm[i], sgd.grad_norm[i], 1e-5 * sgd.grad_norm[i]) << "step " << i + 1;
  }
}

TEST(Lomo, GradientAccumulationIsRefused) {
  Device dev(meta_backend());
  GPT2 model(resolve_gpt2("gpt2-tiny"), dev);
  TrainingArguments a;
  a.device = "meta";
  a.max_steps = 1;
  a.optim = "lomo";
  a.gradient_accumulation_steps = 4;
  try {
    Trainer t(a, model, nullptr);
    ADD_FAILURE() << "lomo accepted gradient accumulation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gradient-accumulation-steps 4"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("lomo"), std::string::npos) << e.what();
  }
}

}  // namespace lomo_test
}  // namespace
}  // namespace snug
