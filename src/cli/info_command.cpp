// `snug info`: what this machine gives snug: CPU and ISA flags, the GPUs (or why none), oneDNN's
// ISA, the GEMM each dtype runs on (--gemm-path auto) and, with --gemm-peak, the measured peak of
// each of those GEMMs (the denominators of snug's MFU in bench/peers/run). --json FILE writes the
// same as JSON.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/parallel.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/gemm_path.h"
#include "kernels/peak.h"
#include "report/report.h"

namespace snug::cli {

namespace {

struct InfoArgs {
  bool gemm_peak = false;
  std::string json;
  int threads = 0;
};

int run_info(const InfoArgs& a) {
  set_num_threads(a.threads);
  nlohmann::json j = system_info("auto");
  j["version"] = SNUG_VERSION;
  const kernels::GemmPath bf16 = kernels::resolve_gemm_path("auto");
  std::printf("snug %s\n", SNUG_VERSION);
  std::printf("cpu          %s, %d threads\n", j["cpu"].get<std::string>().c_str(), num_threads());
  std::printf("OpenMP wait  %s%s\n",
              j["omp_wait_policy"].is_null() ? "runtime default (spins, then sleeps)"
                                             : j["omp_wait_policy"].get<std::string>().c_str(),
              j.contains("gomp_spincount")
                  ? (", GOMP_SPINCOUNT=" + j["gomp_spincount"].get<std::string>()).c_str()
                  : "");
  std::printf("oneDNN ISA   %s\n", kernels::onednn_cpu_isa().c_str());
  for (const char* dt : {"fp32", "bf16", "fp16"})
    std::printf("GEMM %-7s %s\n", dt, j["gemm_path"][dt].get<std::string>().c_str());
  if (!kernels::bf16_matmul_support().native)
    std::printf("             (%s)\n", kernels::bf16_matmul_support().reason.c_str());
  // The GPUs --device cuda:N can use, or why there is none.
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
    std::printf("GPU          none: %s\n", why.c_str());
    j["gpus"] = nlohmann::json::array();
    j["gpu_unavailable"] = why;
  } else {
    j["gpus"] = nlohmann::json::array();
    for (int i = 0; i < cuda_device_count(); ++i) {
      const CudaDeviceInfo g = cuda_device_info(i);
      std::printf(
          "GPU cuda:%d   %s, compute capability %d.%d, %d multiprocessors, %s, driver "
          "%d, runtime %d\n",
          i, g.name.c_str(), g.compute_major, g.compute_minor, g.multiprocessors,
          format_bytes(g.total_bytes).c_str(), g.driver_version, g.runtime_version);
      j["gpus"].push_back({{"device", "cuda:" + std::to_string(i)},
                           {"name", g.name},
                           {"compute_capability", std::to_string(g.compute_major) + "." +
                                                      std::to_string(g.compute_minor)},
                           {"multiprocessors", g.multiprocessors},
                           {"memory_bytes", g.total_bytes},
                           {"driver_version", g.driver_version},
                           {"runtime_version", g.runtime_version}});
    }
  }
  if (a.gemm_peak) {
    // Square 1024 and 2048 products, the better of the two, as bench/peers/run measures torch.
    auto peak = [](kernels::GemmPath p) {
      return std::max(kernels::measure_gemm_peak_flops(1024, 0.5, p),
                      kernels::measure_gemm_peak_flops(2048, 0.5, p));
    };
    const double f32 = peak(kernels::GemmPath::widen);
    const double b16 = bf16 == kernels::GemmPath::onednn_bf16 ? peak(bf16) : f32;
    j["gemm_peak_flops"] = {{"fp32", f32}, {"bf16", b16}};
    std::printf("GEMM peak    fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s (%s)\n", f32 / 1e9, b16 / 1e9,
                kernels::gemm_path_name(bf16));
  }
  if (!a.json.empty()) write_json_file(a.json, j);
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App* sub = app.add_subcommand(
      "info", "This machine as snug sees it: ISA, the GEMM path of each dtype, GEMM peaks");
  sub->add_flag("--gemm-peak", a->gemm_peak,
                "Measure the GEMM peak of each dtype's path (about 2 s per dtype)");
  sub->add_option("--json", a->json, "Also write everything as JSON to this file");
  add_number_flag(sub, "--threads", a->threads, NumberRange::integer(0, kMaxFlagThreads),
                  "CPU threads (0: OMP_NUM_THREADS or all cores)");
  return {sub, [a] { return run_info(*a); }};
}

}  // namespace snug::cli
