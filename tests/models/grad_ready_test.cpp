// Grad-ready listeners (models/grad_ready.h): called in subscription order, a consumed gradient
// stops the later ones, unsubscribing works once, and each backward says which micro-batch of its
// accumulation window it is (accumulate_gradients tells the model; afterwards 0 of 1 again). On
// GPT-2 (tied head: the token embedding, holding the head's gradient, comes last).
#include "models/grad_ready.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "train/accumulate.h"

namespace snug {
namespace {
namespace grad_ready_test {

TEST(GradReadyListeners, CallInSubscriptionOrderUntilOneConsumesTheGradient) {
  Device dev(cpu_backend());
  Parameter p;
  p.name = "w";
  p.value = Tensor::empty({3}, DType::f32, Category::weights, dev);
  p.grad_for_accumulation();
  GradReadyListeners l;
  std::vector<std::string> calls;
  const GradReadyId first = l.add([&](Parameter&, const GradReadyInfo&) { calls.push_back("a"); });
  const GradReadyId second = l.add([&](Parameter& q, const GradReadyInfo& info) {
    calls.push_back("b" + std::to_string(info.micro_batch) + "/" +
                    std::to_string(info.num_micro_batches) + (info.last_micro_batch ? "!" : ""));
    q.free_grad();
  });
  l.add([&](Parameter&, const GradReadyInfo&) { calls.push_back("c"); });
  EXPECT_NE(first, second);
  l.set_micro_batch(1, 3);
  l.notify(p);
  EXPECT_EQ(calls, (std::vector<std::string>{"a", "b1/3"}));  // c: the gradient is gone
  l.notify(p);                                                // no gradient: nobody is called
  EXPECT_EQ(calls.size(), 2u);
  p.grad_for_accumulation();
  l.set_micro_batch(2, 3);
  l.remove(first);
  l.notify(p);
  EXPECT_EQ(calls, (std::vector<std::string>{"a", "b1/3", "b2/3!"}));
  EXPECT_THROW(l.remove(first), Error);
  EXPECT_THROW(l.set_micro_batch(3, 3), Error);
  EXPECT_THROW(l.set_micro_batch(-1, 2), Error);
  p.requires_grad = false;  // frozen: never handed over
  l.notify(p);
  EXPECT_EQ(calls.size(), 3u);
}

TEST(GradReadyListeners, AccumulationTellsEachBackwardItsMicroBatch) {
  GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  cfg.n_layer = 2;
  Device dev(cpu_backend());
  GPT2 model(cfg, dev);
  model.init_weights(7);
  std::map<std::string, std::vector<GradReadyInfo>> seen;
  std::vector<std::string> order;
  GradReadySubscription sub(model, [&](Parameter& p, const GradReadyInfo& info) {
    seen[p.name].push_back(info);
    order.push_back(p.name);
  });
  const int64_t B = 2, T = 8, accum = 3;
  std::vector<int32_t> in(static_cast<size_t>(B * T * accum)), tg(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<int32_t>((7 * i + 1) % 200);
    tg[i] = static_cast<int32_t>((5 * i + 2) % 200);
  }
  accumulate_gradients(model, in.data(), tg.data(), B, T, accum, B * T * accum);
  ASSERT_EQ(seen.size(), model.parameters().size());
  for (const auto& [name, infos] : seen) {
    ASSERT_EQ(infos.size(), 3u) << name;
    for (int64_t m = 0; m < accum; ++m) {
      EXPECT_EQ(infos[static_cast<size_t>(m)].micro_batch, m) << name;
      EXPECT_EQ(infos[static_cast<size_t>(m)].num_micro_batches, accum) << name;
      EXPECT_EQ(infos[static_cast<size_t>(m)].last_micro_batch, m + 1 == accum) << name;
    }
  }
  // The tied head's gradient is the token embedding's: last, after the positions.
  EXPECT_EQ(order.back(), "transformer.wte.weight");
  EXPECT_EQ(order[order.size() - 2], "transformer.wpe.weight");
  // A backward after the window is micro-batch 0 of 1 again.
  seen.clear();
  model.forward(in.data(), tg.data(), B, T);
  model.backward();
  const GradReadyInfo& after = seen.at("transformer.wte.weight").at(0);
  EXPECT_EQ(after.micro_batch, 0);
  EXPECT_EQ(after.num_micro_batches, 1);
  EXPECT_TRUE(after.last_micro_batch);
}

}  // namespace grad_ready_test
}  // namespace
}  // namespace snug
