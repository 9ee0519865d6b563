// Kernel throughput at GPT-2 124M shapes. FLOPS counters are rates (FLOP/s); the context line
// "gemm_peak_gflops" is measure_gemm_peak_flops() for MFU-style comparisons.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/kernels.h"
#include "kernels/peak.h"
#include "optim/quant8.h"

namespace {

using snug::kernels::gemm_f32;

std::vector<float> filled(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = scale * std::sin(0.37f * static_cast<float>(i % 1009));
  return v;
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["FLOPS"] =
      benchmark::Counter(flops_per_iter, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: M, N, K.
void BM_Gemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const auto A = filled(M * K, 0.5f), B = filled(K * N, 0.5f);
  std::vector<float> C(static_cast<size_t>(M * N));
  for (auto _ : state) {
    gemm_f32(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, 2.0 * M * N * K);
}
BENCHMARK(BM_Gemm)->Args({768, 768, 768})->Args({1024, 3072, 768})->Unit(benchmark::kMillisecond);

// Args: N (rows = B*T), IC, OC. GPT-2 124M: c_attn is 768 -> 2304, c_fc 768 -> 3072.
void BM_LinearForward(benchmark::State& state) {
  const int64_t N = state.range(0), IC = state.range(1), OC = state.range(2);
  const auto inp = filled(N * IC, 1.0f), w = filled(IC * OC, 0.02f), b = filled(OC, 0.01f);
  std::vector<float> out(static_cast<size_t>(N * OC));
  for (auto _ : state) {
    snug::kernels::linear_forward(out.data(), inp.data(), w.data(), b.data(), N, IC, OC);
    benchmark::DoNotOptimize(out.data());
  }
  set_flops(state, 2.0 * N * IC * OC);
  state.SetItemsProcessed(state.iterations() * N);
}
BENCHMARK(BM_LinearForward)
    ->Args({1024, 768, 2304})
    ->Args({1024, 768, 3072})
    ->Unit(benchmark::kMillisecond);

void BM_LinearBackward(benchmark::State& state) {
  const int64_t N = state.range(0), IC = state.range(1), OC = state.range(2);
  const auto inp = filled(N * IC, 1.0f), w = filled(IC * OC, 0.02f), dout = filled(N * OC, 0.1f);
  std::vector<float> dinp(static_cast<size_t>(N * IC)), dw(static_cast<size_t>(IC * OC)),
      db(static_cast<size_t>(OC));
  for (auto _ : state) {
    snug::kernels::linear_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                                   w.data(), N, IC, OC);
    benchmark::DoNotOptimize(dw.data());
  }
  set_flops(state, 4.0 * N * IC * OC);
  state.SetItemsProcessed(state.iterations() * N);
}
BENCHMARK(BM_LinearBackward)->Args({1024, 768, 2304})->Unit(benchmark::kMillisecond);

// Args: B, NH, T, hs. FLOPs count the causal half of q k^T and att v (2 * 2 * T^2/2 * hs per
// head), the work actually needed.
void BM_AttentionForward(benchmark::State& state) {
  const int64_t B = state.range(0), NH = state.range(1), T = state.range(2), hs = state.range(3);
  const int64_t C = NH * hs;
  const auto qkv = filled(B * T * 3 * C, 1.0f);
  std::vector<float> out(static_cast<size_t>(B * T * C)), att(static_cast<size_t>(B * NH * T * T));
  for (auto _ : state) {
    snug::kernels::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    benchmark::DoNotOptimize(out.data());
  }
  set_flops(state, 2.0 * B * NH * static_cast<double>(T) * T * hs);
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_AttentionForward)->Args({4, 12, 256, 64})->Unit(benchmark::kMillisecond);

void BM_AttentionBackward(benchmark::State& state) {
  const int64_t B = state.range(0), NH = state.range(1), T = state.range(2), hs = state.range(3);
  const int64_t C = NH * hs;
  const auto qkv = filled(B * T * 3 * C, 1.0f), dout = filled(B * T * C, 0.1f);
  std::vector<float> out(static_cast<size_t>(B * T * C)), att(static_cast<size_t>(B * NH * T * T)),
      dqkv(static_cast<size_t>(B * T * 3 * C));
  for (auto _ : state) {
    state.PauseTiming();  // the backward consumes att
    snug::kernels::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    state.ResumeTiming();
    snug::kernels::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                                      NH);
    benchmark::DoNotOptimize(dqkv.data());
  }
  set_flops(state, 4.0 * B * NH * static_cast<double>(T) * T * hs);
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_AttentionBackward)->Args({4, 12, 256, 64})->Unit(benchmark::kMillisecond);

// Elementwise-type kernels at the GPT-2 activation sizes (N = 1024 rows).
void BM_LayerNormForward(benchmark::State& state) {
  const int64_t N = 1024, C = 768;
  const auto inp = filled(N * C, 1.0f), w = filled(C, 1.0f), b = filled(C, 0.1f);
  std::vector<float> out(static_cast<size_t>(N * C)), mean(N), rstd(N);
  for (auto _ : state) {
    snug::kernels::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(),
                                     b.data(), N, C, 1e-5f);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * N * C * 8);
}
BENCHMARK(BM_LayerNormForward)->Unit(benchmark::kMicrosecond);

void BM_GeluForward(benchmark::State& state) {
  const int64_t n = 1024 * 3072;
  const auto inp = filled(n, 2.0f);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    snug::kernels::gelu_forward(out.data(), inp.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_GeluForward)->Unit(benchmark::kMicrosecond);

void BM_SoftmaxXentForward(benchmark::State& state) {
  const int64_t N = 256, V = 50257;
  const auto logits = filled(N * V, 5.0f);
  std::vector<float> probs(static_cast<size_t>(N * V)), losses(N);
  std::vector<int32_t> targets(N);
  for (int64_t i = 0; i < N; ++i) targets[i] = static_cast<int32_t>((i * 7919) % V);
  for (auto _ : state) {
    benchmark::DoNotOptimize(snug::kernels::softmax_xent_forward(
        losses.data(), probs.data(), logits.data(), targets.data(), N, V));
  }
  state.SetItemsProcessed(state.iterations() * N * V);
}
BENCHMARK(BM_SoftmaxXentForward)->Unit(benchmark::kMillisecond);

// The optimizer's pass over every parameter, at 16M parameters (GPT-2 124M takes 7.4 such calls a
// step). Memory-bound once it vectorizes: 28 bytes an element in fp32 (p, g, m, v read; p, m, v
// written), 14 in --bf16-full; bytes/s against the machine's stream rate says how close.
constexpr int64_t kOptimBenchElems = int64_t{1} << 24;

void BM_AdamWUpdate(benchmark::State& state) {
  const int64_t n = kOptimBenchElems;
  auto p = filled(n, 0.5f), m = filled(n, 0.01f), v = filled(n, 0.0f);
  const auto g = filled(n, 0.02f);
  int64_t t = 0;
  for (auto _ : state) {
    snug::kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-4f, 0.9f, 0.999f,
                                1e-8f, 0.01f, ++t);
    benchmark::DoNotOptimize(p.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 28);
}
BENCHMARK(BM_AdamWUpdate)->Unit(benchmark::kMillisecond);

void BM_AdamWUpdateBf16(benchmark::State& state) {
  const int64_t n = kOptimBenchElems;
  std::vector<uint16_t> p(static_cast<size_t>(n), 0x3f00), g(static_cast<size_t>(n), 0x3c00),
      m(static_cast<size_t>(n), 0), v(static_cast<size_t>(n), 0);
  int64_t t = 0;
  for (auto _ : state) {
    ++t;
    snug::kernels::adamw_update_bf16(p.data(), g.data(), m.data(), v.data(), n, 1e-4f, 0.9f, 0.999f,
                                     1e-8f, 0.01f, t, static_cast<uint64_t>(t), 0);
    benchmark::DoNotOptimize(p.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 14);
}
BENCHMARK(BM_AdamWUpdateBf16)->Unit(benchmark::kMillisecond);

// The 8-bit optimizers' code search, per element (normalized states in [-1, 1]): the fast
// bucket-table path (arg 1) against the binary search it must equal (arg 0).
void BM_Quant8Nearest(benchmark::State& state) {
  const snug::quant8::Code& code = snug::quant8::signed_code();
  const auto x = filled(1 << 20, 1.0f);
  std::vector<uint8_t> q(x.size());
  const bool fast = state.range(0) != 0;
  for (auto _ : state) {
    for (size_t i = 0; i < x.size(); ++i)
      q[i] = fast ? code.nearest(x[i]) : code.nearest_reference(x[i]);
    benchmark::DoNotOptimize(q.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(x.size()));
}
BENCHMARK(BM_Quant8Nearest)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("gemm_library", snug::kernels::gemm_library());
  benchmark::AddCustomContext("threads", std::to_string(snug::num_threads()));
  benchmark::AddCustomContext("gemm_peak_gflops",
                              std::to_string(snug::kernels::measure_gemm_peak_flops() / 1e9));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
