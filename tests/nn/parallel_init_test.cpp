// Start-up that scales (issue 31): initialization fills each parameter's chunks in parallel from
// the one normal stream, each chunk from its offset (NormalGenerator::at), so that
//  - the values are those of the serial stream, bit for bit, at any thread count, in fp32, bf16
//    and quantized storage (where only one tensor's fp32 values are ever held);
//  - a progress line reports the elements filled.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/parallel.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "nn/init.h"
#include "nn/init_progress.h"
#include "nn/param_fill.h"

namespace snug {
namespace {
namespace parallel_init_test {

TEST(ParallelInit, GeneratorAtKIsTheKthNormalOfTheStream) {
  NormalGenerator serial(77);
  std::vector<double> stream(2003);
  for (double& x : stream) x = serial.next();
  for (int64_t k : {0, 1, 2, 3, 10, 999, 1000, 2001}) {
    NormalGenerator g = NormalGenerator::at(77, k);
    EXPECT_EQ(g.next(), stream[static_cast<size_t>(k)]) << k;
    EXPECT_EQ(g.next(), stream[static_cast<size_t>(k) + 1]) << k;
  }
}

// Every parameter's values as fp32 (widened or dequantized).
std::vector<float> init_values(const std::string& preset, DType dtype, bool quantized,
                               int threads) {
  const int before = num_threads();
  set_num_threads(threads);
  Device dev(cpu_backend());
  std::optional<WeightQuantConfig> q;
  if (quantized) q = WeightQuantConfig{quant::Format::nf4, true, 0};
  auto model = create_model(resolve_model(preset), dev, dtype, q);
  model->init_weights(42);
  std::vector<float> out;
  for (const Parameter* p : model->parameters()) {
    std::vector<float> v(static_cast<size_t>(p->numel()));
    nn::read_values(*p, v.data());
    out.insert(out.end(), v.begin(), v.end());
  }
  set_num_threads(before);
  return out;
}

TEST(ParallelInit, ValuesDoNotDependOnTheThreadCount) {
  for (const char* preset : {"llama-tiny", "gpt2-tiny"})
    for (const auto& [dtype, quantized] :
         {std::pair{DType::f32, false}, std::pair{DType::bf16, false},
          std::pair{DType::f32, true}}) {
      const std::vector<float> one = init_values(preset, dtype, quantized, 1);
      const std::vector<float> two = init_values(preset, dtype, quantized, 2);
      const std::vector<float> three = init_values(preset, dtype, quantized, 3);
      ASSERT_EQ(one.size(), two.size());
      EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
          << preset << " " << dtype_name(dtype) << " quantized " << quantized;
      EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0) << preset;
    }
}

TEST(ParallelInit, LlamaValuesAreTheSerialStream) {
  // The serial definition: one NormalGenerator(seed) over the weight matrices in parameter
  // order (std 0.02); norms 1.
  Device dev(cpu_backend());
  auto model = create_model(resolve_model("llama-tiny"), dev);
  model->init_weights(42);
  NormalGenerator rng(42);
  for (const Parameter* p : model->parameters()) {
    const bool norm = p->name.find("norm") != std::string::npos;
    std::vector<float> want(static_cast<size_t>(p->numel()), 1.0f);
    if (!norm) rng.fill(want.data(), p->numel(), 0.0f, 0.02f);
    ASSERT_EQ(std::memcmp(want.data(), p->value.data<float>(), want.size() * sizeof(float)), 0)
        << p->name;
  }
}

TEST(ParallelInit, ProgressLineReportsTheElementsFilled) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  int64_t P = 0;
  {
    Device dev(cpu_backend());
    auto model = create_model(resolve_model("llama-tiny"), dev);
    for (const Parameter* p : model->parameters()) P += p->numel();
    const nn::InitProgress progress(f, P, "initializing");
    model->init_weights(1);
    EXPECT_EQ(progress.done(), P);
  }
  std::rewind(f);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string text(buf, n);
  // Not a terminal: one line at the end (the run takes less than 2 s).
  EXPECT_EQ(text.rfind("initializing 0.00B parameters: 100% (0.00B) ", 0), 0u) << text;
  EXPECT_EQ(text.back(), '\n') << text;
  // Nothing is reported without a live InitProgress.
  nn::init_progress_add(5);
}

}  // namespace parallel_init_test
}  // namespace
}  // namespace snug
