// LM head + cross-entropy at GPT-2 124M, B=4, T=512 (N=2048, C=768, V=50257): the unchunked
// path (materialized (N,V) logits: gemm + softmax_xent_forward [+ softmax_xent_backward + the
// two backward gemms]) against the chunked kernel of kernels/lm_head.h, forward only and
// forward+backward. A training step with the chunked kernel costs ChunkedForward (loss in the
// model's forward) + ChunkedForwardBackward (recompute + backward); without it,
// UnchunkedForwardBackward. Counters: scratch_bytes (the logits buffer, resp. the chunk
// scratch), FLOPS (GEMM FLOPs per wall-clock second), chunk (rows per chunk). The CPU column
// is the whole process's CPU time (all threads), steadier than wall time on a busy machine.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/kernels.h"
#include "kernels/lm_head.h"

namespace {

namespace K = snug::kernels;

constexpr int64_t kN = 2048, kC = 768, kV = 50257;

std::vector<float> filled(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = scale * std::sin(0.37f * static_cast<float>(i % 1009));
  return v;
}

struct Data {
  std::vector<float> lnf = filled(kN * kC, 1.0f);
  std::vector<float> wte = filled(kV * kC, 0.05f);
  std::vector<int32_t> targets;
  std::vector<float> losses = std::vector<float>(kN);
  std::vector<float> dlnf = std::vector<float>(kN * kC);
  std::vector<float> dwte = std::vector<float>(kV * kC, 0.0f);
  float scale = 1.0f / static_cast<float>(kN);
  Data() : targets(kN) {
    for (int64_t i = 0; i < kN; ++i) targets[i] = static_cast<int32_t>((i * 7919) % kV);
  }
};

void set_counters(benchmark::State& state, int gemms, int64_t scratch_floats, int64_t chunk) {
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * gemms * kN * kV * kC, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["scratch_bytes"] = static_cast<double>(scratch_floats) * sizeof(float);
  state.counters["chunk"] = static_cast<double>(chunk);
}

void BM_LmHeadUnchunkedForward(benchmark::State& state) {
  Data d;
  std::vector<float> logits(static_cast<size_t>(kN * kV));
  for (auto _ : state) {
    K::gemm_f32(false, true, kN, kV, kC, 1.0f, d.lnf.data(), kC, d.wte.data(), kC, 0.0f,
                logits.data(), kV);
    benchmark::DoNotOptimize(K::softmax_xent_forward(d.losses.data(), logits.data(), logits.data(),
                                                     d.targets.data(), kN, kV));
  }
  set_counters(state, 1, kN * kV, kN);
}
BENCHMARK(BM_LmHeadUnchunkedForward)
    ->Iterations(2)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_LmHeadUnchunkedForwardBackward(benchmark::State& state) {
  Data d;
  std::vector<float> logits(static_cast<size_t>(kN * kV));
  for (auto _ : state) {
    K::gemm_f32(false, true, kN, kV, kC, 1.0f, d.lnf.data(), kC, d.wte.data(), kC, 0.0f,
                logits.data(), kV);
    benchmark::DoNotOptimize(K::softmax_xent_forward(d.losses.data(), logits.data(), logits.data(),
                                                     d.targets.data(), kN, kV));
    K::softmax_xent_backward(logits.data(), logits.data(), d.targets.data(), d.scale, kN, kV);
    K::gemm_f32(false, false, kN, kC, kV, 1.0f, logits.data(), kV, d.wte.data(), kC, 0.0f,
                d.dlnf.data(), kC);
    K::gemm_f32(true, false, kV, kC, kN, 1.0f, logits.data(), kV, d.lnf.data(), kC, 1.0f,
                d.dwte.data(), kC);
    benchmark::DoNotOptimize(d.dwte.data());
  }
  set_counters(state, 3, kN * kV, kN);
}
BENCHMARK(BM_LmHeadUnchunkedForwardBackward)
    ->Iterations(2)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Arg: rows per chunk, 0 = lm_head_default_chunk.
int64_t chunk_of(const benchmark::State& state) {
  return state.range(0) > 0 ? state.range(0) : K::lm_head_default_chunk(kN, kV);
}

void BM_LmHeadChunkedForward(benchmark::State& state) {
  Data d;
  const int64_t chunk = chunk_of(state);
  const int64_t sf = K::lm_head_scratch_floats(kN, kV, chunk);
  std::vector<float> scratch(static_cast<size_t>(sf));
  for (auto _ : state)
    benchmark::DoNotOptimize(K::lm_head_xent(d.losses.data(), nullptr, nullptr, d.lnf.data(),
                                             d.wte.data(), d.targets.data(), kN, kC, kV, d.scale,
                                             scratch.data(), chunk));
  set_counters(state, 1, sf, chunk);
}
BENCHMARK(BM_LmHeadChunkedForward)
    ->Arg(0)
    ->Arg(64)
    ->Arg(512)
    ->Iterations(2)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_LmHeadChunkedForwardBackward(benchmark::State& state) {
  Data d;
  const int64_t chunk = chunk_of(state);
  const int64_t sf = K::lm_head_scratch_floats(kN, kV, chunk);
  std::vector<float> scratch(static_cast<size_t>(sf));
  for (auto _ : state) {
    benchmark::DoNotOptimize(K::lm_head_xent(d.losses.data(), d.dlnf.data(), d.dwte.data(),
                                             d.lnf.data(), d.wte.data(), d.targets.data(), kN, kC,
                                             kV, d.scale, scratch.data(), chunk));
    benchmark::DoNotOptimize(d.dwte.data());
  }
  set_counters(state, 3, sf, chunk);
}
BENCHMARK(BM_LmHeadChunkedForwardBackward)
    ->Arg(0)
    ->Arg(64)
    ->Arg(512)
    ->Iterations(2)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("gemm_library", snug::kernels::gemm_library());
  benchmark::AddCustomContext("threads", std::to_string(snug::num_threads()));
  benchmark::AddCustomContext("shape", "N=2048 (B=4,T=512) C=768 V=50257");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
