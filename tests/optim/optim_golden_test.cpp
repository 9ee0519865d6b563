// Three optimizer steps on a (37, 53) matrix (with weight decay) and a (53,) vector (without),
// against PyTorch/transformers/lion-pytorch (tests/golden/gen_optim_golden.py). Tolerance: 1e-6
// of the largest expected magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "optim/optimizer.h"

namespace snug {
namespace {
namespace optim_golden_test {

struct GoldenCase {
  std::string key;    // tensor name prefix in the golden file
  std::string optim;  // --optim name
  float lr;
  float wd;
  float momentum = 0.0f;
  bool relative_step = false;
};

// Keep in sync with CONFIGS in tests/golden/gen_optim_golden.py.
std::vector<GoldenCase> cases() {
  return {
      {"sgd", "sgd", 0.1f, 0.01f},
      {"sgd_momentum", "sgd", 0.1f, 0.01f, 0.9f},
      {"adamw_torch", "adamw_torch", 1e-2f, 0.1f},
      {"lion", "lion", 1e-2f, 0.1f},
      {"adafactor", "adafactor", 1e-2f, 0.1f},
      {"adafactor_relative_step", "adafactor", 0.0f, 0.1f, 0.0f, true},
  };
}

std::string golden_path() {
  return std::string(SNUG_TEST_DATA_DIR) + "/optim_golden.safetensors";
}

void fill(Tensor& t, const std::vector<float>& v) {
  ASSERT_EQ(static_cast<int64_t>(v.size()), t.numel());
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
}

::testing::AssertionResult close_rel_max(const Tensor& got, const std::vector<float>& want,
                                         double rel) {
  double max_abs = 0.0, worst = 0.0;
  int64_t worst_i = 0;
  for (size_t i = 0; i < want.size(); ++i) max_abs = std::max(max_abs, std::fabs(double(want[i])));
  const float* g = got.data<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(g[i]) - double(want[i]));
    if (!(err <= worst) || std::isnan(err)) {
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = static_cast<int64_t>(i);
    }
  }
  if (worst <= rel * max_abs) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "worst at [" << worst_i << "]: got " << g[worst_i] << ", want "
         << want[static_cast<size_t>(worst_i)] << " (error " << worst << " > " << rel << " * "
         << max_abs << ")";
}

class OptimGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(OptimGolden, ThreeStepsMatchReference) {
  const GoldenCase c = GetParam();
  SafetensorsFile f(golden_path());
  Device dev(cpu_backend());
  Parameter w{"h.0.mlp.c_fc.weight", {}, {}, true, true, {}, Category::gradients, nullptr};
  Parameter b{"h.0.mlp.c_fc.bias", {}, {}, true, false, {}, Category::gradients, nullptr};
  w.value = Tensor::empty({37, 53}, DType::f32, Category::weights, dev);
  b.value = Tensor::empty({53}, DType::f32, Category::weights, dev);
  fill(w.value, f.read_f32("w0"));
  fill(b.value, f.read_f32("b0"));
  OptimizerOptions o;
  o.weight_decay = c.wd;
  o.momentum = c.momentum;
  o.adafactor_relative_step = c.relative_step;
  auto opt = make_optimizer(c.optim, {&w, &b}, o);
  for (int k = 1; k <= 3; ++k) {
    const std::string ks = std::to_string(k);
    w.grad_for_accumulation();
    b.grad_for_accumulation();
    fill(w.grad, f.read_f32("grad_w." + ks));
    fill(b.grad, f.read_f32("grad_b." + ks));
    opt->step(c.lr);
    EXPECT_TRUE(close_rel_max(w.value, f.read_f32(c.key + ".w." + ks), 1e-6))
        << c.key << " matrix after step " << k;
    EXPECT_TRUE(close_rel_max(b.value, f.read_f32(c.key + ".b." + ks), 1e-6))
        << c.key << " vector after step " << k;
    w.free_grad();
    b.free_grad();
  }
  EXPECT_EQ(opt->steps(), 3);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptimGolden, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& pi) {
                           return pi.param.key;
                         });

TEST(OptimGoldenSkips, ParameterWithoutGradIsUntouched) {
  Device dev(cpu_backend());
  for (const std::string& name : optimizer_names()) {
    Parameter p{"h.0.attn.c_proj.weight", {}, {}, true, true, {}, Category::gradients, nullptr};
    p.value = Tensor::zeros({64, 80}, DType::f32, Category::weights, dev);
    const int64_t before = dev.pool().live(Category::optimizer_state);
    OptimizerOptions o;
    o.momentum = 0.9f;
    o.weight_decay = 0.1f;
    auto opt = make_optimizer(name, {&p}, o);
    opt->step(0.1f);
    EXPECT_EQ(dev.pool().live(Category::optimizer_state), before) << name;
    for (int64_t i = 0; i < p.value.numel(); ++i) ASSERT_EQ(p.value.data<float>()[i], 0.0f);
    if (name != "adamw") {  // "adamw" is adamw_torch's alias
      EXPECT_EQ(opt->name(), name);
    }
  }
}

}  // namespace optim_golden_test
}  // namespace
}  // namespace snug
