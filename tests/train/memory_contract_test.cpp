// The memory contract of a training run, to the byte:
//  - AdamW in fp32 holds exactly 4P of weights, 4P of gradients and 8P of optimizer state;
//  - activations at their maximum are exactly the closed form of what GPT-2's forward saves;
//  - the meta device (shapes only) reports the same peak and breakdown as a real cpu run;
//  - a capacity below the need ends the run with an out-of-memory error naming the category.
#include <gtest/gtest.h>

#include <memory>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/configs.h"
#include "support/memory_checks.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace memory_contract_test {

struct RunOutcome {
  MemoryStats mem;
  TrainResult result;
  int64_t params = 0;
};

RunOutcome train_on(const Backend& kind, const GPT2Config& cfg, TrainingArguments args,
                    std::optional<int64_t> capacity = std::nullopt) {
  Device dev(kind);
  dev.pool().set_capacity(capacity);
  GPT2 model(cfg, dev);
  model.init_weights(args.seed);
  auto data = open_dataset(args.data, cfg.vocab_size, args.seed);
  Trainer trainer(args, model, data.get());
  RunOutcome r;
  r.result = trainer.train();
  r.mem = dev.pool().stats();
  r.params = count_params(model.parameters());
  return r;
}

GPT2Config tiny() {
  return resolve_gpt2("gpt2-tiny");
}

using test::odd_config;

TrainingArguments args(int64_t B, int64_t T, int64_t steps) {
  TrainingArguments a;
  a.per_device_train_batch_size = B;
  a.seq_len = T;
  a.max_steps = steps;
  return a;
}

// Bytes GPT-2's forward keeps for backward (see GPT2Saved): per layer 16BTC + 4BT floats plus
// the attention's NH*B*T^2 probabilities (naive) or NH*B*T log-sum-exps (flash); embeddings BTC;
// ln_f BTC + 2BT; with full logits also the probabilities BTV and per-token losses BT (chunked
// logits keep neither: the head's gradient is computed in forward, into `temporary`).
int64_t expected_activation_bytes(const GPT2Config& c, int64_t B, int64_t T, bool naive,
                                  bool full_logits) {
  const int64_t C = c.n_embd, BT = B * T;
  const int64_t per_layer = 16 * BT * C + 4 * BT + c.n_head * B * T * (naive ? T : 1);
  return 4 * (c.n_layer * per_layer + BT * C + BT * C + 2 * BT +
              (full_logits ? BT * c.vocab_size + BT : 0));
}

using test::at;

TEST(MemoryContract, AdamWFp32IsFourFourEightBytesPerParameter) {
  const RunOutcome r = train_on(cpu_backend(), tiny(), args(2, 32, 3));
  ASSERT_TRUE(r.result.error.empty()) << r.result.error;
  const int64_t P = tiny().num_params();
  EXPECT_EQ(r.params, P);
  EXPECT_EQ(at(r.mem.max_by_category, Category::weights), 4 * P);
  EXPECT_EQ(at(r.mem.max_by_category, Category::gradients), 4 * P);
  EXPECT_EQ(at(r.mem.max_by_category, Category::optimizer_state), 8 * P);
  // After the run: weights and optimizer state stay, gradients were freed by zero_grad.
  EXPECT_EQ(at(r.mem.live, Category::gradients), 0);
  EXPECT_EQ(at(r.mem.live, Category::activations), 0);
  EXPECT_EQ(at(r.mem.live, Category::temporary), 0);
  EXPECT_EQ(r.mem.live_total, 12 * P);
}

TEST(MemoryContract, ActivationsMatchClosedForm) {
  for (auto [B, T] : {std::pair<int64_t, int64_t>{2, 32}, {3, 17}})
    for (const char* attention : {"flash", "naive"})
      for (const char* logits : {"chunked", "full"}) {
        const RunOutcome r = train_on(cpu_backend(), odd_config(), [&] {
          auto a = args(B, T, 1);
          a.data = "dummy";
          a.attention = attention;
          a.logits = logits;
          return a;
        }());
        ASSERT_TRUE(r.result.error.empty()) << r.result.error;
        EXPECT_EQ(at(r.mem.max_by_category, Category::activations),
                  expected_activation_bytes(odd_config(), B, T, std::string(attention) == "naive",
                                            std::string(logits) == "full"))
            << "B=" << B << " T=" << T << " " << attention << " " << logits;
        EXPECT_EQ(at(r.mem.max_by_category, Category::input_data), 2 * 4 * B * T);
      }
}

TEST(MemoryContract, MetaDeviceReportsTheSameBytesAsCpu) {
  struct Case {
    GPT2Config cfg;
    TrainingArguments a;
  };
  std::vector<Case> cases;
  cases.push_back({tiny(), args(2, 32, 2)});
  {
    auto a = args(4, 64, 2);
    a.gradient_accumulation_steps = 2;
    cases.push_back({tiny(), a});
  }
  {
    auto a = args(3, 17, 3);
    a.data = "dummy";
    a.weight_decay = 0.1;
    cases.push_back({odd_config(), a});
  }
  for (const Case& c : cases) {
    const RunOutcome cpu = train_on(cpu_backend(), c.cfg, c.a);
    const RunOutcome meta = train_on(meta_backend(), c.cfg, c.a);
    ASSERT_TRUE(cpu.result.error.empty()) << cpu.result.error;
    ASSERT_TRUE(meta.result.error.empty()) << meta.result.error;
    SCOPED_TRACE(c.cfg.name + " B=" + std::to_string(c.a.per_device_train_batch_size));
    test::expect_meta_equals_cpu(meta.mem, cpu.mem);
    EXPECT_EQ(meta.mem.peak_by_category, cpu.mem.peak_by_category);
    EXPECT_EQ(meta.mem.live, cpu.mem.live);
  }
}

TEST(MemoryContract, CapacityBelowTheNeedEndsTheRunWithOutOfMemory) {
  const auto a = args(2, 32, 2);
  const RunOutcome meta = train_on(meta_backend(), tiny(), a);
  // One byte short of the peak: the run must fail, on cpu as on meta, at the same allocation.
  for (const Backend* kind : {&cpu_backend(), &meta_backend()}) {
    const RunOutcome r = train_on(*kind, tiny(), a, meta.mem.peak_total - 1);
    EXPECT_TRUE(r.result.out_of_memory);
    EXPECT_NE(r.result.error.find("out of memory"), std::string::npos) << r.result.error;
    EXPECT_NE(r.result.error.find(meta.mem.peak_phase), std::string::npos) << r.result.error;
    EXPECT_LE(r.mem.peak_total, meta.mem.peak_total - 1);
  }
  // Exactly the peak fits.
  const RunOutcome ok = train_on(cpu_backend(), tiny(), a, meta.mem.peak_total);
  EXPECT_TRUE(ok.result.error.empty()) << ok.result.error;
  EXPECT_EQ(ok.mem.peak_total, meta.mem.peak_total);
}

}  // namespace memory_contract_test
}  // namespace
}  // namespace snug
