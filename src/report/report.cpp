#include "report/report.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "core/parallel.h"
#include "io/output_file.h"
#include "kernels/backends.h"
#include "kernels/gemm_library.h"
#include "kernels/kernels.h"

namespace snug {

namespace {
nlohmann::json by_category(const ByCategory& b) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumCategories; ++i) j[category_name(category_at(i))] = b[i];
  return j;
}

std::string mb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", mib(bytes));
  return buf;
}
}  // namespace

nlohmann::json system_info(std::string_view gemm_path, std::string_view device) {
  nlohmann::json j;
  j["threads"] = num_threads();
  // What OpenMP's waiting threads do (the snug executable sets PASSIVE unless the environment
  // says otherwise: cli/omp_wait_policy.cpp); null when neither variable is set.
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  j["omp_wait_policy"] = policy ? nlohmann::json(policy) : nlohmann::json(nullptr);
  if (spin) j["gomp_spincount"] = spin;
  std::string model, flags;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    auto value = [&] {
      const size_t colon = line.find(':');
      std::string_view v = colon == std::string::npos ? std::string_view()
                                                      : std::string_view(line).substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      return v;
    };
    if (model.empty() && line.rfind("model name", 0) == 0) model = std::string(value());
    if (flags.empty() && line.rfind("flags", 0) == 0) {
      flags = " ";
      flags += value();
      flags += ' ';
    }
  }
  j["cpu"] = model;
  nlohmann::json isa = nlohmann::json::object();
  for (const char* f : {"avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile",
                        "amx_bf16", "amx_int8"}) {
    std::string needle(1, ' ');
    needle.append(f);
    needle.push_back(' ');
    isa[f] = flags.find(needle) != std::string::npos;
  }
  j["isa"] = isa;
  j["gemm_library"] = kernels::gemm_library();
  // The GEMM each dtype's products run on in this run (kernels/gemm_path.h), and the highest
  // ISA oneDNN uses here ("avx512_core_amx", "avx512_core_bf16", "avx2", ...).
  kernels::GemmPath bf16 = kernels::GemmPath::widen;
  try {
    bf16 = kernels::resolve_gemm_path(gemm_path, device);
  } catch (const Error&) {
    // an unavailable forced path: the run failed in setup and says why; report the fallback
  }
  const bool gpu = cuda_index(std::string(device)).has_value();
  const std::string fp32 = gpu ? std::string("cuBLASLt fp32 (no TF32)") : kernels::sgemm_name();
  std::string bf16_taken = kernels::gemm_path_taken(bf16);
  if (gpu)
    bf16_taken = bf16 == kernels::GemmPath::widen ? "widen (bf16 widened to fp32, " + fp32 + ")"
                                                  : "cuBLASLt bf16 (fp32 accumulation)";
  j["gemm_path"] = {
      {"fp32", fp32}, {"bf16", bf16_taken}, {"fp16", "widen (fp16 widened to fp32, " + fp32 + ")"}};
  j["onednn_isa"] = kernels::onednn_cpu_isa();
  return j;
}

int64_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

nlohmann::json memory_json(const MemoryStats& s, std::optional<int64_t> capacity) {
  nlohmann::json j;
  j["peak_bytes"] = s.peak_total;
  j["peak_phase"] = s.peak_phase;
  j["peak_by_category"] = by_category(s.peak_by_category);
  j["max_by_category"] = by_category(s.max_by_category);
  j["final_by_category"] = by_category(s.live);
  j["capacity_bytes"] = capacity ? nlohmann::json(*capacity) : nlohmann::json(nullptr);
  j["alloc_count"] = s.alloc_count;
  j["peak_rss_bytes"] = peak_rss_bytes();
  if (s.pages) {
    const PageArenaStats& p = *s.pages;
    j["pages"] = {{"page_bytes", p.page_bytes},
                  {"reserved_bytes", p.reserved_bytes()},
                  {"mapped_bytes", p.mapped_pages * p.page_bytes},
                  {"virtual_bytes", p.virtual_bytes},
                  {"max_live_bytes", p.max_live_bytes},
                  {"page_maps", p.maps},
                  {"page_unmaps", p.unmaps},
                  {"take_backs", p.take_backs}};
  }
  return j;
}

nlohmann::json make_report(const TrainingArguments& args, const Model& model, const TrainResult& r,
                           const MemoryStats& mem, std::optional<int64_t> capacity) {
  nlohmann::json j;
  const ModelSummary m = model.summary();
  j["model"] = {{"name", m.name},
                {"n_params", count_params(model.parameters())},
                {"n_trainable_params", count_params(model.parameters(), true)},
                {"n_layer", m.n_layer},
                {"n_embd", m.n_embd},
                {"n_head", m.n_head},
                {"vocab_size", m.vocab_size},
                {"n_positions", m.n_positions},
                {"task", task_name(args.model_config().task)}};
  j["config"] = args.to_json();
  // With --freeze, config.freeze lists the patterns and this counts what they left training.
  j["config"]["trainable_params"] = count_params(model.parameters(), true);
  j["device"] = model.device().name();
  j["steps"] = r.steps;
  j["total_steps"] = r.total_steps;
  j["train_runtime"] = r.runtime_s;
  const double t = r.runtime_s > 0 ? r.runtime_s : 1.0;
  j["train_samples_per_second"] = static_cast<double>(r.samples) / t;
  j["tokens_per_second"] = static_cast<double>(r.tokens) / t;
  j["loss"] = r.loss;
  j["grad_norm"] = r.grad_norm;
  j["learning_rate"] = r.learning_rate;
  // Mixed precision: compute dtype; with --fp16, optimizer steps skipped for overflowed
  // gradients and the dynamic loss scale at the end (null without a loss scaler).
  const ComputeDType compute = args.compute_dtype();
  j["compute_dtype"] = compute == ComputeDType::f16    ? "fp16"
                       : compute == ComputeDType::bf16 ? "bf16"
                                                       : "fp32";
  // The parameters' storage: "bf16" under --bf16-full or --torch-dtype bfloat16 (a LoRA run's
  // frozen base; its adapters are f32), "f16" under --torch-dtype float16, else "f32".
  j["param_dtype"] = dtype_name(model.param_dtype());
  // Evaluation (docs/report.md): the last eval_loss and perplexity = exp(eval_loss), as the
  // Trainer's metrics and run_clm name them, eval_accuracy for sequence classification, and
  // every evaluation in "eval_history".
  if (!r.evals.empty()) {
    j["eval_loss"] = r.evals.back().eval_loss;
    j["perplexity"] = r.evals.back().perplexity;
    if (r.evals.back().accuracy) j["eval_accuracy"] = *r.evals.back().accuracy;
    nlohmann::json h = nlohmann::json::array();
    for (const EvalLog& e : r.evals) {
      nlohmann::json rec = {{"step", e.step},
                            {"eval_loss", e.eval_loss},
                            {"perplexity", e.perplexity},
                            {"eval_samples", e.samples}};
      if (e.accuracy) rec["eval_accuracy"] = *e.accuracy;
      h.push_back(rec);
    }
    j["eval_history"] = h;
  }
  if (!r.best_model_checkpoint.empty()) {
    j["best_model_checkpoint"] = r.best_model_checkpoint;
    j["best_metric"] = r.best_metric;
  }
  j["skipped_steps"] = r.skipped_steps;
  j["loss_scale"] = r.loss_scale > 0 ? nlohmann::json(r.loss_scale) : nlohmann::json(nullptr);
  j["final_loss"] = r.loss.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.loss.back());
  j["memory"] = memory_json(mem, capacity);
  j["system"] = system_info(args.gemm_path, args.device);
  j["error"] = r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error);
  return j;
}

std::string summary_lines(const TrainResult& r, const MemoryStats& mem) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "Time: %.2f\nSamples/second: %.2f\nMemory occupied: %lld MiB\n",
                r.runtime_s, r.runtime_s > 0 ? static_cast<double>(r.samples) / r.runtime_s : 0.0,
                static_cast<long long>(mem.peak_total / (1024 * 1024)));
  return buf;
}

std::string memory_table(const MemoryStats& mem, std::optional<int64_t> capacity) {
  std::ostringstream os;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-16s %12s %7s %12s %12s\n", "category", "at peak MiB", "share",
                "max MiB", "final MiB");
  os << buf;
  for (int i = 0; i < kNumCategories; ++i) {
    const double share = mem.peak_total > 0 ? 100.0 * static_cast<double>(mem.peak_by_category[i]) /
                                                  static_cast<double>(mem.peak_total)
                                            : 0.0;
    std::snprintf(buf, sizeof buf, "%-16s %12s %6.1f%% %12s %12s\n", category_name(category_at(i)),
                  mb(mem.peak_by_category[i]).c_str(), share, mb(mem.max_by_category[i]).c_str(),
                  mb(mem.live[i]).c_str());
    os << buf;
  }
  std::snprintf(buf, sizeof buf, "%-16s %12s %6.1f%% %12s %12s\n", "total",
                mb(mem.peak_total).c_str(), 100.0, "", mb(mem.live_total).c_str());
  os << buf;
  os << "peak " << format_bytes(mem.peak_total) << " (" << mem.peak_total << " bytes) during '"
     << mem.peak_phase << "'";
  if (capacity)
    os << ", " << mb(*capacity) << " MiB device capacity ("
       << (100.0 * static_cast<double>(mem.peak_total) / static_cast<double>(*capacity))
       << "% used)";
  os << "\n";
  return os.str();
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_output_file(path, j.dump(2) + "\n", "'" + path + "'");
}

}  // namespace snug
