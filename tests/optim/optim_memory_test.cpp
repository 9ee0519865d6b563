// Optimizer state bytes on GPT-2 124M, shapes only (meta device): each optimizer allocates
// exactly state_bytes_formula(), which is 0 / 4P / 8P / 4P for sgd / sgd+momentum / adamw / lion.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "core/device.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "optim/optimizer.h"

namespace snug {
namespace {
namespace optim_memory_test {

int64_t measure(const std::string& optim, const OptimizerOptions& o, int64_t* formula,
                int64_t* params) {
  Device dev(meta_backend());
  GPT2 model(resolve_gpt2("gpt2-124m"), dev);
  auto opt = make_optimizer(optim, model.parameters(), o);
  for (Parameter* p : model.parameters()) p->grad_for_accumulation();
  opt->step(1e-3f);
  opt->step(1e-3f);  // nothing more is allocated after the first step
  *formula = state_bytes_formula(optim, model.parameters(), o);
  *params = count_params(model.parameters(), true);
  const MemoryStats st = dev.pool().stats();
  EXPECT_EQ(st.live[static_cast<int>(Category::optimizer_state)],
            st.max_by_category[static_cast<int>(Category::optimizer_state)])
      << optim;
  return st.max_by_category[static_cast<int>(Category::optimizer_state)];
}

struct Case {
  std::string label, optim;
  float momentum = 0.0f;
  bool emb8 = false;
  double bytes_per_param = -1;  // exact expectation where there is a closed form
};

class OptimMemory : public ::testing::TestWithParam<Case> {};

TEST_P(OptimMemory, Gpt2StateBytesEqualTheFormula) {
  const Case c = GetParam();
  OptimizerOptions o;
  o.momentum = c.momentum;
  o.optim_8bit_embeddings = c.emb8;
  o.weight_decay = 0.01f;
  int64_t formula = 0, P = 0;
  const int64_t got = measure(c.optim, o, &formula, &P);
  EXPECT_EQ(got, formula) << c.label;
  if (c.bytes_per_param >= 0) {
    EXPECT_EQ(got, static_cast<int64_t>(c.bytes_per_param) * P) << c.label;
  }
  std::cout << "[ optim state ] gpt2-124m " << c.label << ": " << got << " bytes, "
            << static_cast<double>(got) / static_cast<double>(P) << " bytes/param (P = " << P
            << ")\n";
  RecordProperty("state_bytes", std::to_string(got));
}

INSTANTIATE_TEST_SUITE_P(
    OptimGpt2_124m, OptimMemory,
    ::testing::Values(
        Case{"sgd", "sgd", 0.0f, false, 0}, Case{"sgd_momentum", "sgd", 0.9f, false, 4},
        Case{"adamw_torch", "adamw_torch", 0.0f, false, 8}, Case{"adamw", "adamw", 0.0f, false, 8},
        Case{"lion", "lion", 0.0f, false, 4}, Case{"adafactor", "adafactor"},
        Case{"adamw_bnb_8bit", "adamw_bnb_8bit"},
        Case{"adamw_8bit_embeddings", "adamw_8bit", 0.0f, true}, Case{"lion_8bit", "lion_8bit"},
        Case{"lion_8bit_embeddings", "lion_8bit", 0.0f, true}, Case{"lomo", "lomo", 0.0f, false, 0},
        Case{"adalomo", "adalomo"}, Case{"galore_adamw", "galore_adamw"}),
    [](const ::testing::TestParamInfo<Case>& pi) { return pi.param.label; });

TEST(OptimMemoryFormula, ClosedFormsOnGpt2) {
  Device dev(meta_backend());
  const GPT2Config cfg = resolve_gpt2("gpt2-124m");
  GPT2 model(cfg, dev);
  OptimizerOptions o;
  // Adafactor: 4 (rows + cols) per matrix, 4 n per vector.
  int64_t want = 0;
  for (const Parameter* p : model.parameters()) {
    const Shape& s = p->value.shape();
    want += s.size() >= 2 ? 4 * (s[0] + s[1]) : 4 * s[0];
  }
  EXPECT_EQ(state_bytes_formula("adafactor", model.parameters(), o), want);
  // 8-bit AdamW: 2 bytes + 8 bytes per 256-block for 8-bit tensors, 8 bytes otherwise.
  auto q8 = [](int64_t n) { return 2 * n + 8 * ((n + 255) / 256); };
  int64_t want8 = 0, want8_emb = 0;
  for (const Parameter* p : model.parameters()) {
    const int64_t n = p->value.numel();
    const bool emb =
        p->name.find("wte") != std::string::npos || p->name.find("wpe") != std::string::npos;
    want8 += n >= 4096 && !emb ? q8(n) : 8 * n;
    want8_emb += n >= 4096 ? q8(n) : 8 * n;
  }
  EXPECT_EQ(state_bytes_formula("adamw_bnb_8bit", model.parameters(), o), want8);
  o.optim_8bit_embeddings = true;
  EXPECT_EQ(state_bytes_formula("adamw_8bit", model.parameters(), o), want8_emb);
  const int64_t P = count_params(model.parameters(), true);
  EXPECT_LE(want8_emb, static_cast<int64_t>(2.1 * static_cast<double>(P)));
  EXPECT_THROW(state_bytes_formula("adamw_nope", model.parameters(), o), Error);
}

TEST(OptimMemoryFormula, NewOptimizersClosedFormsOnGpt2) {
  Device dev(meta_backend());
  const GPT2Config cfg = resolve_gpt2("gpt2-124m");
  GPT2 model(cfg, dev);
  OptimizerOptions o;
  const int64_t C = cfg.n_embd, L = cfg.n_layer, V = cfg.vocab_size, T = cfg.n_positions;
  const int64_t P = count_params(model.parameters(), true);
  // lion_8bit: 1 byte + 4 bytes per 256-block for 8-bit tensors (>= 4096 elements, not the
  // embeddings), 4 bytes otherwise.
  auto q8 = [](int64_t n) { return n + 4 * ((n + 255) / 256); };
  const int64_t per_layer_8bit =
      q8(C * 3 * C) + q8(C * C) + q8(C * 4 * C) + q8(4 * C * C);               // the four matrices
  const int64_t per_layer_fp32 = 4 * (2 * C + 3 * C + C + 2 * C + 4 * C + C);  // LN, biases
  const int64_t embeddings = 4 * (V * C + T * C);
  const int64_t lnf = 4 * 2 * C;
  EXPECT_EQ(state_bytes_formula("lion_8bit", model.parameters(), o),
            L * (per_layer_8bit + per_layer_fp32) + embeddings + lnf);
  o.optim_8bit_embeddings = true;
  EXPECT_EQ(state_bytes_formula("lion_8bit", model.parameters(), o),
            L * (per_layer_8bit + per_layer_fp32) + q8(V * C) + q8(T * C) + lnf);
  EXPECT_LE(state_bytes_formula("lion_8bit", model.parameters(), o),
            static_cast<int64_t>(1.1 * static_cast<double>(P)));
  o.optim_8bit_embeddings = false;
  // lomo keeps nothing; adalomo what adafactor keeps.
  EXPECT_EQ(state_bytes_formula("lomo", model.parameters(), o), 0);
  EXPECT_EQ(state_bytes_formula("adalomo", model.parameters(), o),
            state_bytes_formula("adafactor", model.parameters(), o));
  // galore_adamw, rank 128: every layer matrix is (C, k C) with C < k C except mlp.c_proj
  // (4C, C): left projector (C, r) + moments (r, k C) x 2; c_proj: right projector (r, C) +
  // moments (4C, r) x 2. The other parameters: 8 bytes each.
  const int64_t r = 128;
  const int64_t galore_layer = 4 * ((2 * r * 3 * C + C * r) + (2 * r * C + C * r) +
                                    (2 * r * 4 * C + C * r) + (2 * 4 * C * r + r * C));
  const int64_t plain = 8 * (P - L * (12 * C * C));
  EXPECT_EQ(state_bytes_formula("galore_adamw", model.parameters(), o), L * galore_layer + plain);
  EXPECT_EQ(L * galore_layer + plain, 448161792);
  o.galore_rank = 1024;  // above min(m, n): clamped to the shorter side
  const int64_t full = C;
  const int64_t galore_full = 4 * ((2 * full * 3 * C + C * full) + (2 * full * C + C * full) +
                                   (2 * full * 4 * C + C * full) + (2 * 4 * C * full + full * C));
  EXPECT_EQ(state_bytes_formula("galore_adamw", model.parameters(), o), L * galore_full + plain);
}

TEST(OptimMemoryFormula, FrozenParametersCostNothing) {
  Device dev(meta_backend());
  GPT2 model(resolve_gpt2("gpt2-tiny"), dev);
  for (Parameter* p : model.parameters()) p->requires_grad = false;
  for (const std::string& name : optimizer_names())
    EXPECT_EQ(state_bytes_formula(name, model.parameters(), OptimizerOptions{}), 0) << name;
}

}  // namespace optim_memory_test
}  // namespace
}  // namespace snug
