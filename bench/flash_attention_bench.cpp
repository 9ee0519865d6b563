// Naive (materialized att) vs memory-efficient (tiled, online-softmax) causal attention, forward
// and backward, at B=4, NH=12, hs=64 and T = 256, 1024. FLOPS counters are rates (FLOP/s) of the
// work actually needed with the causal mask, the same count for both implementations:
// forward 2 matmuls (q k^T, p v) over the causal half = 2 * B * NH * T^2 * hs;
// backward 4 matmuls (dv, dp, dq, dk) = 4 * B * NH * T^2 * hs. The flash backward also
// recomputes q k^T (a fifth matmul), which is not counted: it is the price of not saving att.
// The "saved_MB" counter is what each forward keeps for its backward, besides qkv and out.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/flash_attention.h"
#include "kernels/kernels.h"

namespace {

std::vector<float> filled(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = scale * std::sin(0.37f * static_cast<float>(i % 1009));
  return v;
}

void set_counters(benchmark::State& state, double flops_per_iter, double saved_floats) {
  state.counters["FLOPS"] =
      benchmark::Counter(flops_per_iter, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["saved_MB"] = saved_floats * 4.0 / 1e6;
}

struct Dims {
  int64_t B, NH, T, hs, C;
  explicit Dims(const benchmark::State& state)
      : B(state.range(0)),
        NH(state.range(1)),
        T(state.range(2)),
        hs(state.range(3)),
        C(state.range(1) * state.range(3)) {}
  double fwd_flops() const { return 2.0 * B * NH * static_cast<double>(T) * T * hs; }
};

// Args: B, NH, T, hs.
void BM_NaiveAttentionForward(benchmark::State& state) {
  const Dims d(state);
  const auto qkv = filled(d.B * d.T * 3 * d.C, 1.0f);
  std::vector<float> out(static_cast<size_t>(d.B * d.T * d.C)),
      att(static_cast<size_t>(d.B * d.NH * d.T * d.T));
  for (auto _ : state) {
    snug::kernels::attention_forward(out.data(), att.data(), qkv.data(), d.B, d.T, d.C, d.NH);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, d.fwd_flops(), static_cast<double>(att.size()));
}

void BM_FlashAttentionForward(benchmark::State& state) {
  const Dims d(state);
  const auto qkv = filled(d.B * d.T * 3 * d.C, 1.0f);
  std::vector<float> out(static_cast<size_t>(d.B * d.T * d.C)),
      lse(static_cast<size_t>(d.B * d.NH * d.T));
  for (auto _ : state) {
    snug::kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.C, d.NH);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, d.fwd_flops(), static_cast<double>(lse.size()));
}

void BM_NaiveAttentionBackward(benchmark::State& state) {
  const Dims d(state);
  const auto qkv = filled(d.B * d.T * 3 * d.C, 1.0f), dout = filled(d.B * d.T * d.C, 0.1f);
  std::vector<float> out(static_cast<size_t>(d.B * d.T * d.C)),
      att(static_cast<size_t>(d.B * d.NH * d.T * d.T)),
      dqkv(static_cast<size_t>(d.B * d.T * 3 * d.C));
  for (auto _ : state) {
    state.PauseTiming();  // the backward consumes att
    snug::kernels::attention_forward(out.data(), att.data(), qkv.data(), d.B, d.T, d.C, d.NH);
    state.ResumeTiming();
    snug::kernels::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), d.B, d.T,
                                      d.C, d.NH);
    benchmark::DoNotOptimize(dqkv.data());
  }
  set_counters(state, 2.0 * d.fwd_flops(), static_cast<double>(att.size()));
}

void BM_FlashAttentionBackward(benchmark::State& state) {
  const Dims d(state);
  const auto qkv = filled(d.B * d.T * 3 * d.C, 1.0f), dout = filled(d.B * d.T * d.C, 0.1f);
  std::vector<float> out(static_cast<size_t>(d.B * d.T * d.C)),
      lse(static_cast<size_t>(d.B * d.NH * d.T)), dqkv(static_cast<size_t>(d.B * d.T * 3 * d.C));
  snug::kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.C, d.NH);
  for (auto _ : state) {
    snug::kernels::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(),
                                            lse.data(), d.B, d.T, d.C, d.NH);
    benchmark::DoNotOptimize(dqkv.data());
  }
  set_counters(state, 2.0 * d.fwd_flops(), static_cast<double>(lse.size()));
}

// Wall-clock time (the kernels are multi-threaded); on a shared machine compare the "_min"
// rows of --benchmark_repetitions=N, which the noise of other processes only ever inflates
// (their counters are minima too: FLOPS there is the slowest rate, not the rate of the min time).
#define SNUG_ATTENTION_SHAPES(bm)                                                             \
  BENCHMARK(bm)                                                                               \
      ->Args({4, 12, 256, 64})                                                                \
      ->Args({4, 12, 1024, 64})                                                               \
      ->UseRealTime()                                                                         \
      ->ComputeStatistics(                                                                    \
          "min",                                                                              \
          [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }) \
      ->Unit(benchmark::kMillisecond)
SNUG_ATTENTION_SHAPES(BM_NaiveAttentionForward);
SNUG_ATTENTION_SHAPES(BM_FlashAttentionForward);
SNUG_ATTENTION_SHAPES(BM_NaiveAttentionBackward);
SNUG_ATTENTION_SHAPES(BM_FlashAttentionBackward);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("gemm_library", snug::kernels::gemm_library());
  benchmark::AddCustomContext("threads", std::to_string(snug::num_threads()));
  benchmark::AddCustomContext("flash_tile", std::to_string(snug::kernels::kFlashTile));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
