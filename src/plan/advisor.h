// The fit advisor (`snug plan --advise`): given a model, a target effective batch and a device
// capacity, try every combination of the memory switches, keep those whose exact dry-run peak
// fits, and rank them by estimated step time. The top row is the command to run.
//
// The switches are dimensions, each a list of choices (flags + how they change the
// TrainingArguments), read from the one list of switches that the what-if table also reads
// (plan/switches.h); the search is their Cartesian product. Today: the batch/accumulation split
// of the target batch, the checkpoint policy, the optimizer (LOMO and AdaLOMO among them: with
// --bf16-full the least memory of any full fine-tune), the precision (fp32, --bf16,
// --bf16-full) and, for a LoRA run, the base's storage (fp32, --load-in-8bit, 4-bit nf4 with
// double quantization: QLoRA). Full fine-tuning is not offered LoRA (a different task). A
// combination a real run would refuse (LOMO with accumulation, --bf16-full with Adafactor, an
// optimizer a ZeRO stage cannot shard) is refused by the same rule in its dry run and skipped.
//
// Step time = FLOPs of one optimizer step / GEMM rate (FLOP/s: measured on this build with
// kernels::measure_gemm_peak_flops, or --gemm-gflops), the rate of the GEMMs the configuration's
// precision runs on: fp32 on gemm_f32 (dnnl_sgemm, or cblas_sgemm without oneDNN); --bf16 and
// --bf16-full on the run's --gemm-path (kernels/gemm_path.h): oneDNN's bf16 matmul, measured on
// its own (faster where the CPU has bf16 units, so 16 bits rank first there), or the widen path,
// whose products are fp32's and whose conversion passes (16-bit operands widened, outputs rounded,
// the compute copies cast) are charged as kWidenedStepOverhead of the step: a widened 16-bit step
// never ranks ahead of fp32 at the same FLOPs, only where it saves more (the recompute of
// checkpointing that fp32 needs to fit, say). Per token, with N = 12*L*C^2 + V*C the GEMM
// parameters (the layers' four Linear weights and the tied LM head) and causal attention (each
// token's scores and weighted sum over (T+1)/2 keys on average: 2*T*C per layer):
//   forward   2N + 2*L*T*C
//   training  3 x forward (backward = 2 x forward)
//   recompute every-layer, every-k, sqrt: + one forward of the layers (24*L*C^2 + 2*L*T*C);
//             selective: + the attention forward with --attention naive (it recomputes the
//             softmax), nothing with flash (only element-wise ops, no GEMM FLOPs)
//   LOMO, AdaLOMO with clipping (--max-grad-norm > 0) or --fp16: x 2 (a pass for the global
//             norm, then the updating one; train/fused_step.h). The tied head's recomputed
//             logits (one more N x V x C product) are not counted.
// With LoRA the frozen weights get no weight gradient: backward is 1 x forward for them plus the
// adapters' small GEMMs, not counted. Optimizer updates, element-wise kernels and dequantization
// are not counted (memory-bound, small next to the GEMMs for these shapes). Among equal times,
// the choices listed first in their dimensions rank first (the fewest departures from the run's
// own switches: its optimizer, then the one closest to AdamW; fp32 before 16 bits; its base
// storage, then fp32, int8, 4-bit), then fewer
// micro-batches (bigger GEMMs run closer to the peak rate), then a lower peak.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/gemm_path.h"
#include "plan/dry_run.h"
#include "train/training_args.h"

namespace snug {

struct SwitchChoice {
  std::string flags;  // what it adds to the command line ("" for the dimension's "off")
  std::function<void(TrainingArguments&)> apply;
};
struct SwitchDimension {
  std::string name;
  std::vector<SwitchChoice> choices;
};

// The dimensions searched for `base` and an effective batch of `target_batch` sequences: the
// switch groups with an advisor_rank, in its order, each with its `advisor` choices.
std::vector<SwitchDimension> advisor_dimensions(const TrainingArguments& base,
                                                int64_t target_batch);

// FLOPs of one optimizer step of `a` (see above).
double step_flops(const TrainingArguments& a);

// What --bf16 --gemm-path widen costs a step over fp32 at the same FLOPs: the conversion passes
// around every GEMM (kernels/gemm_path.h). Measured on gpt2-124m, B=4, T=256 (AMD EPYC family 26,
// 2 threads): 4% with oneDNN's AVX-512 sgemm, 1.5% with its AVX2 one (docs/mixed-precision.md);
// charged at 5%, so the estimate errs against 16 bits where they gain nothing.
inline constexpr double kWidenedStepOverhead = 0.05;

struct AdvisorOptions {
  int64_t target_batch = 0;  // sequences per optimizer step (0: base B x accumulation)
  int64_t capacity = 0;      // bytes
  int64_t overhead = 0;      // runtime bytes on top of the tensors (CUDA context)
  double gemm_flops = 0;     // FLOP/s of fp32 GEMMs
  // The GEMMs of --bf16 and --bf16-full: the path the run's --gemm-path resolves to here, and
  // its FLOP/s (0: gemm_flops, which the widen path always uses).
  kernels::GemmPath bf16_path = kernels::GemmPath::widen;
  double bf16_gemm_flops = 0;
  int64_t max_configs = 4096;
  DryRunData data;  // what each dry run replays (plan/dry_run.h; none: full rows)
};

// Estimated seconds of one optimizer step of `a` (see above).
double step_seconds(const TrainingArguments& a, const AdvisorOptions& o);

struct Advice {
  TrainingArguments args;
  std::string flags;  // the switches' flags, in dimension order
  int64_t peak_bytes = 0;
  double flops = 0;
  double step_s = 0;
  int64_t preference = 0;  // sum of the choices' positions in their dimensions (0: first)
};

struct AdvisorResult {
  std::vector<Advice> fitting;  // ranked, fastest first
  int64_t tried = 0;            // dry runs
  int64_t refused = 0;          // combinations whose dry run refused them (not in tried)
  int64_t target_batch = 0;
  int world_size = 1;  // each dry run was rank 0 of this many (AdvisorOptions::data)
};

AdvisorResult advise(const TrainingArguments& base, const AdvisorOptions& o);

// `snug train ...` for `a`: the flags whose entry in train/flag_table.h shows them (the model,
// the shape, and those that change memory or the run where they differ from the default), in
// table order, then --device when the plan was for a GPU (a.kernels_device(); a plan itself
// runs on meta) and --device-memory as the user gave it; under `mpirun -np N` for a world of N
// ranks.
std::string train_command_line(const TrainingArguments& a, const std::string& device_memory,
                               int world_size = 1);

std::string advice_table(const AdvisorResult& r, int64_t capacity, int64_t overhead, size_t top);
nlohmann::json advice_json(const AdvisorResult& r, const std::string& device_memory, size_t top);

}  // namespace snug
