// GPT-2 forward and backward against golden values from PyTorch in float64
// (tests/golden/gen_gpt2_golden.py -> tests/fixtures/gpt2_golden.safetensors): a tiny random model
// (V=67, P=16, C=24, L=2, NH=3, B=2, T=9) with non-zero biases and one ignored target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"

namespace snug {
namespace {
namespace gpt2_golden_test {

std::string golden_path() {
  return std::string(SNUG_TEST_DATA_DIR) + "/gpt2_golden.safetensors";
}

int64_t meta_int(const SafetensorsFile& f, const std::string& key) {
  const auto m = f.metadata();
  auto it = m.find(key);
  if (it == m.end()) throw Error("gpt2_golden.safetensors: metadata lacks " + key);
  return std::stoll(it->second);
}

GPT2Config golden_config(const SafetensorsFile& f) {
  GPT2Config cfg;
  cfg.name = "golden";
  cfg.vocab_size = meta_int(f, "vocab_size");
  cfg.n_positions = meta_int(f, "n_positions");
  cfg.n_embd = meta_int(f, "n_embd");
  cfg.n_layer = meta_int(f, "n_layer");
  cfg.n_head = meta_int(f, "n_head");
  cfg.layer_norm_epsilon = 1e-5f;
  return cfg;
}

bool is_parameter_entry(const std::string& name) {
  return name.rfind("grad/", 0) != 0 && name != "input_ids" && name != "targets" && name != "loss";
}

// Loads the golden parameters into `model`, asserting that the file holds exactly the model's
// parameters (plus their gradients and the batch).
void load_golden_params(const SafetensorsFile& f, GPT2& model) {
  std::set<std::string> in_file;
  for (const std::string& n : f.names())
    if (is_parameter_entry(n)) in_file.insert(n);
  std::set<std::string> in_model;
  for (Parameter* p : model.parameters()) {
    in_model.insert(p->name);
    ASSERT_TRUE(f.contains(p->name)) << "golden file lacks parameter " << p->name;
    ASSERT_TRUE(f.contains("grad/" + p->name)) << "golden file lacks grad/" << p->name;
    f.read_into(p->name, p->value);
  }
  for (const std::string& n : in_file)
    EXPECT_TRUE(in_model.count(n))
        << "golden file has " << n << ", the model has no such parameter";
  EXPECT_EQ(in_file.size(), in_model.size());
}

struct Batch {
  std::vector<int32_t> ids, targets;
  int64_t B = 0, T = 0;
};

Batch golden_batch(const SafetensorsFile& f) {
  Batch b;
  b.B = meta_int(f, "batch");
  b.T = meta_int(f, "seq");
  b.ids = f.read_i32("input_ids");
  b.targets = f.read_i32("targets");
  EXPECT_EQ(f.info("input_ids").shape, (std::vector<int64_t>{b.B, b.T}));
  EXPECT_EQ(f.info("targets").shape, (std::vector<int64_t>{b.B, b.T}));
  return b;
}

TEST(GoldenGpt2, LossAndGradientsMatchPyTorchFloat64) {
  const SafetensorsFile f(golden_path());
  const GPT2Config cfg = golden_config(f);
  Device cpu(cpu_backend());
  GPT2 model(cfg, cpu);
  load_golden_params(f, model);
  if (HasFatalFailure()) return;
  const Batch b = golden_batch(f);

  const float loss = model.forward(b.ids.data(), b.targets.data(), b.B, b.T);
  model.backward(1.0f);

  const float golden_loss = f.read_f32("loss").at(0);
  EXPECT_EQ(model.last_valid_targets(), b.B * b.T - 1);  // one target is -100
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_LE(std::fabs(loss - golden_loss), std::max(1e-4f * std::fabs(golden_loss), 1e-6f))
      << "loss " << loss << " vs golden " << golden_loss;

  for (Parameter* p : model.parameters()) {
    ASSERT_TRUE(p->grad.defined()) << p->name << ": backward left no gradient";
    ASSERT_EQ(p->grad.shape(), p->value.shape()) << p->name;
    const std::vector<float> golden = f.read_f32("grad/" + p->name);
    ASSERT_EQ(static_cast<int64_t>(golden.size()), p->grad.numel()) << p->name;
    const float* g = p->grad.data<float>();
    float gmax = 0.0f, err = 0.0f;
    int64_t worst = 0;
    for (size_t i = 0; i < golden.size(); ++i) {
      gmax = std::max(gmax, std::fabs(golden[i]));
      const float e = std::fabs(g[i] - golden[i]);
      if (!(e <= err)) {  // also catches NaN
        err = e;
        worst = static_cast<int64_t>(i);
      }
    }
    const float rel = err / std::max(gmax, 1e-6f);
    EXPECT_LE(rel, 1e-4f) << p->name << ": max |grad - golden| = " << err << " at element " << worst
                          << " (got " << g[worst] << ", golden " << golden[worst]
                          << "), max |golden| = " << gmax;
  }
}

TEST(GoldenGpt2, DeterministicAndFreesActivations) {
  const SafetensorsFile f(golden_path());
  Device cpu(cpu_backend());
  GPT2 model(golden_config(f), cpu);
  load_golden_params(f, model);
  if (HasFatalFailure()) return;
  const Batch b = golden_batch(f);
  MemoryPool& pool = model.device().pool();

  // Forward only (no backward), then free: no activation bytes remain.
  const float l1 = model.forward(b.ids.data(), b.targets.data(), b.B, b.T);
  EXPECT_GT(pool.live(Category::activations), 0);
  model.free_activations();
  EXPECT_EQ(pool.live(Category::activations), 0);

  const float l2 = model.forward(b.ids.data(), b.targets.data(), b.B, b.T, /*for_backward=*/false);
  model.free_activations();
  EXPECT_EQ(pool.live(Category::activations), 0);
  EXPECT_EQ(std::memcmp(&l1, &l2, sizeof(float)), 0) << l1 << " vs " << l2;

  // Forward + backward twice: bitwise identical loss and gradients.
  std::vector<std::vector<float>> grads[2];
  float losses[2];
  for (int run = 0; run < 2; ++run) {
    model.zero_grad();
    losses[run] = model.forward(b.ids.data(), b.targets.data(), b.B, b.T);
    model.backward(1.0f);
    model.free_activations();
    EXPECT_EQ(pool.live(Category::activations), 0);
    for (Parameter* p : model.parameters()) {
      ASSERT_TRUE(p->grad.defined()) << p->name;
      const float* g = p->grad.data<float>();
      grads[run].emplace_back(g, g + p->grad.numel());
    }
  }
  EXPECT_EQ(std::memcmp(&losses[0], &losses[1], sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(&losses[0], &l1, sizeof(float)), 0);
  const ParameterList& params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(grads[0][i] == grads[1][i]) << params[i]->name << ": gradients differ run to run";
}

}  // namespace gpt2_golden_test
}  // namespace
}  // namespace snug
