// Gradient checkpointing changes memory, never results: every policy gives bitwise the loss and
// gradients of the run without it, and keeps fewer activation bytes.
#include <gtest/gtest.h>

#include <cstring>

#include "core/device.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/random.h"

namespace snug {
namespace {
namespace checkpointing_test {

struct Result {
  float loss = 0;
  std::vector<std::vector<float>> grads;
  int64_t max_activations = 0;
};

Result run(const std::string& policy, const Backend& kind = cpu_backend(),
           AttentionImpl attention = AttentionImpl::flash,
           ComputeDType precision = ComputeDType::f32) {
  GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  cfg.n_layer = 5;  // odd: segments of 2 leave a short last one
  Device dev(kind);
  GPT2 model(cfg, dev);
  model.init_weights(3);
  model.set_checkpointing(parse_checkpoint_policy(policy, cfg.n_layer));
  model.set_attention(attention);
  model.set_compute_dtype(precision);
  const int64_t B = 3, T = 24;
  const auto in = test::random_ints(B * T, 11, 0, 255);
  auto tg = test::random_ints(B * T, 12, 0, 255);
  tg[5] = -100;
  Result r;
  for (int rep = 0; rep < 2; ++rep) {  // twice: gradients accumulate across micro-batches too
    r.loss = model.forward(in.data(), tg.data(), B, T, true, 0.5f);
    model.backward(0.5f);
  }
  for (Parameter* p : model.parameters())
    if (!dev.is_meta())
      r.grads.emplace_back(p->grad.data<float>(), p->grad.data<float>() + p->grad.numel());
  r.max_activations = dev.pool().stats().max_by_category[static_cast<int>(Category::activations)];
  EXPECT_EQ(dev.pool().live(Category::activations), 0) << policy;
  EXPECT_EQ(dev.pool().live(Category::temporary), 0) << policy;
  return r;
}

TEST(GradientCheckpointing, EveryPolicyIsBitwiseIdenticalToNone) {
  // In fp32 and under mixed precision (recomputation rounds to 16 bits where forward did).
  for (ComputeDType precision : {ComputeDType::f32, ComputeDType::bf16, ComputeDType::f16})
    for (AttentionImpl attention : {AttentionImpl::flash, AttentionImpl::naive}) {
      SCOPED_TRACE(static_cast<int>(precision));
      const Result none = run("none", cpu_backend(), attention, precision);
      for (const char* policy : {"every-layer", "every-k:2", "every-k:5", "sqrt", "selective"}) {
        SCOPED_TRACE(policy);
        const Result r = run(policy, cpu_backend(), attention, precision);
        EXPECT_EQ(std::memcmp(&r.loss, &none.loss, sizeof(float)), 0)
            << r.loss << " vs " << none.loss;
        ASSERT_EQ(r.grads.size(), none.grads.size());
        for (size_t p = 0; p < r.grads.size(); ++p)
          EXPECT_EQ(std::memcmp(r.grads[p].data(), none.grads[p].data(),
                                r.grads[p].size() * sizeof(float)),
                    0)
              << "parameter " << p;
        EXPECT_LT(r.max_activations, none.max_activations);
      }
    }
}

TEST(GradientCheckpointing, MetaAccountsTheSameBytes) {
  for (ComputeDType precision : {ComputeDType::f32, ComputeDType::bf16})
    for (const char* policy : {"none", "every-layer", "every-k:2", "selective"}) {
      const auto flash = AttentionImpl::flash;
      EXPECT_EQ(run(policy, meta_backend(), flash, precision).max_activations,
                run(policy, cpu_backend(), flash, precision).max_activations)
          << policy;
    }
}

TEST(GradientCheckpointing, PolicyParsing) {
  EXPECT_EQ(parse_checkpoint_policy("sqrt", 12).every_k, 4);
  EXPECT_EQ(parse_checkpoint_policy("sqrt", 48).every_k, 7);
  EXPECT_EQ(parse_checkpoint_policy("every-k:3", 12).every_k, 3);
  EXPECT_EQ(parse_checkpoint_policy("every-layer", 12).policy, CheckpointPolicy::every_layer);
  EXPECT_THROW(parse_checkpoint_policy("every-k:0", 12), Error);
  EXPECT_THROW(parse_checkpoint_policy("every-k:x", 12), Error);
  EXPECT_THROW(parse_checkpoint_policy("sometimes", 12), Error);
}

}  // namespace checkpointing_test
}  // namespace
}  // namespace snug
