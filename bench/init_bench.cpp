// Start-up costs per value (issue 31): the normal generator (its definition, ref::normal_fill,
// against the fast fill that equals it), the nf4 + double-quantization op, and one quantized
// parameter initialized as a model does (nn::fill_values_indexed: fp32 values in parallel chunks,
// then quantized). Items are values; the multi-threaded ones report the process's CPU time (all
// threads), the per-value cost on a shared host. Run with --benchmark_repetitions=5
// --benchmark_enable_random_interleaving=true so that old and new alternate on a shared host.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/parallel.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "nn/init.h"
#include "nn/param_fill.h"
#include "quant/weight_quant.h"

namespace {

using namespace snug;

// Arg: 0 the definition (libm, one value at a time), 1 the fast fill. One thread.
void BM_NormalFill(benchmark::State& state) {
  const int64_t n = int64_t{1} << 20;
  std::vector<float> out(static_cast<size_t>(n));
  uint64_t seed = 1;
  for (auto _ : state) {
    NormalGenerator g(seed++);
    if (state.range(0) != 0)
      g.fill(out.data(), n, 0.0f, 0.02f);
    else
      ref::normal_fill(g, out.data(), n, 0.0f, 0.02f);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_NormalFill)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// QLoRA's storage (nf4, blocks of 64, double quantization) of a rows x cols weight: the cpu
// device's quantize_weight_codes op, all threads. Args: rows, cols (llama-13b's MLP: 13824 x 5120).
void BM_Nf4DoubleQuant(benchmark::State& state) {
  const int64_t n = state.range(0) * state.range(1);
  std::vector<float> w(static_cast<size_t>(n));
  NormalGenerator(3).fill(w.data(), n, 0.0f, 0.02f);
  const int64_t nb = n / 64;
  std::vector<uint8_t> codes(static_cast<size_t>(n / 2)), dq_codes(static_cast<size_t>(nb));
  std::vector<float> absmax(static_cast<size_t>(nb)), dq_absmax(static_cast<size_t>(nb / 256 + 1));
  float offset = 0.0f;
  Device dev(cpu_backend());
  for (auto _ : state) {
    dev.ops().quantize_weight_codes(codes.data(), absmax.data(), dq_codes.data(), dq_absmax.data(),
                                    &offset, w.data(), n, quant::Format::nf4, 64, true);
    benchmark::DoNotOptimize(codes.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Nf4DoubleQuant)
    ->Args({13824, 5120})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

// One quantized parameter initialized as DecoderLM::init_normal_weights does it: the fp32 values
// of the whole tensor in parallel chunks, then quantized into its storage. Args: rows, cols.
void BM_InitQuantizedParameter(benchmark::State& state) {
  const Shape shape{state.range(0), state.range(1)};
  Device dev(cpu_backend());
  Parameter p;
  p.name = "w";
  p.requires_grad = false;
  p.quant = std::make_shared<QuantizedWeight>(
      empty_quantized_weight(shape, WeightQuantConfig{quant::Format::nf4, true, 64}, dev));
  uint64_t seed = 1;
  for (auto _ : state) {
    nn::fill_values_indexed(p, [&](float* d, int64_t begin, int64_t cnt) {
      NormalGenerator::at(seed, begin).fill(d, cnt, 0.0f, 0.02f);
    });
    ++seed;
  }
  state.SetItemsProcessed(state.iterations() * p.numel());
}
BENCHMARK(BM_InitQuantizedParameter)
    ->Args({13824, 5120})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("threads", std::to_string(snug::num_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
