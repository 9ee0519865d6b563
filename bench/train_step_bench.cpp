// One training step (forward + backward + clip + AdamW) of GPT-2 on dummy tokens, fp32 or --bf16
// (on this CPU's bf16 GEMM path, kernels/gemm_path.h).
// Counters: tokens/s, achieved model FLOP/s and MFU against the measured GEMM peak of the
// library and dtype the step runs on (kernels::measure_gemm_peak_flops), since a CPU has no
// datasheet "peak" that a library reaches. Model FLOPs per token, as in PaLM (Chowdhery et al.
// 2022, appendix B):
//   6 N (N = non-embedding parameters + the tied LM head's V*C) + 12 L T C (attention scores).
// Reproduce: build/release/bench/train_step_bench --benchmark_filter=gpt2_124m
#include <benchmark/benchmark.h>

#include <string>

#include "core/device.h"
#include "core/parallel.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "kernels/peak.h"
#include "models/gpt2/gpt2.h"
#include "train/trainer.h"

namespace {

double model_flops_per_token(const snug::GPT2Config& c, int64_t T) {
  const double C = static_cast<double>(c.n_embd), L = static_cast<double>(c.n_layer);
  const double n = L * (12 * C * C + 13 * C) + 2 * C + static_cast<double>(c.vocab_size) * C;
  return 6 * n + 12 * L * static_cast<double>(T) * C;
}

void BM_TrainStep(benchmark::State& state, const std::string& model, int64_t B, int64_t T,
                  bool bf16) {
  const snug::GPT2Config cfg = snug::resolve_gpt2(model);
  snug::Device dev(snug::cpu_backend());
  snug::GPT2 gpt(cfg, dev);
  gpt.init_weights(42);
  snug::TrainingArguments args;
  args.model = model;
  args.data = "dummy";
  args.per_device_train_batch_size = B;
  args.seq_len = T;
  args.max_steps = 1;
  args.bf16 = bf16;
  auto data = snug::open_dataset("dummy", cfg.vocab_size, 42);
  snug::Trainer trainer(args, gpt, data.get());
  trainer.train();  // warm-up: allocates optimizer state, pages in weights
  for (auto _ : state) trainer.train();
  const double tokens = static_cast<double>(B * T);
  state.counters["tokens_per_s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["model_FLOPS"] = benchmark::Counter(tokens * model_flops_per_token(cfg, T),
                                                     benchmark::Counter::kIsIterationInvariantRate);
  const snug::kernels::GemmPath path =
      bf16 ? snug::kernels::resolve_gemm_path("auto") : snug::kernels::GemmPath::widen;
  const double peak = snug::kernels::measure_gemm_peak_flops(1024, 0.5, path);
  state.counters["gemm_peak_GFLOPS"] = peak / 1e9;
  // A rate of (FLOPs / peak) per second is the fraction of the peak achieved: MFU.
  state.counters["MFU"] = benchmark::Counter(tokens * model_flops_per_token(cfg, T) / peak,
                                             benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flops_per_step"] = tokens * model_flops_per_token(cfg, T);
  state.counters["peak_bytes"] = static_cast<double>(dev.pool().stats().peak_total);
}

BENCHMARK_CAPTURE(BM_TrainStep, gpt2_tiny_B8_T128, "gpt2-tiny", 8, 128, false)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_TrainStep, gpt2_124m_B4_T256, "gpt2-124m", 4, 256, false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_TrainStep, gpt2_124m_B4_T256_bf16, "gpt2-124m", 4, 256, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("threads", std::to_string(snug::num_threads()));
  benchmark::AddCustomContext(
      "gemm", snug::kernels::gemm_summary(snug::kernels::resolve_gemm_path("auto")));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
