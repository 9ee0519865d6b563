// What a run reports: the JSON written by --report-json (keys are a contract, see
// docs/report.md), the Trainer-style summary lines, and the memory table by category.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/memory.h"
#include "models/model.h"
#include "train/trainer.h"
#include "train/training_args.h"

namespace snug {

// {"threads", "cpu", "isa": {"avx2": bool, ...}, "gemm_library", "gemm_path": {"fp32", "bf16",
// "fp16"}, "onednn_isa"} of this machine, with the bf16 GEMM path that --gemm-path `gemm_path`
// takes here.
// device: the run's --device (a GPU's bf16 products run on its own GEMMs: kernels/gemm_path.h).
nlohmann::json system_info(std::string_view gemm_path = "auto", std::string_view device = "cpu");
// Peak resident set size of this process in bytes (getrusage).
int64_t peak_rss_bytes();
// {"peak_bytes", "peak_phase", "peak_by_category", "max_by_category", "final_by_category",
//  "capacity_bytes", "alloc_count", "peak_rss_bytes"}.
nlohmann::json memory_json(const MemoryStats& s, std::optional<int64_t> capacity);
nlohmann::json make_report(const TrainingArguments& args, const Model& model,
                           const TrainResult& result, const MemoryStats& mem,
                           std::optional<int64_t> capacity);
// "Time: 12.34\nSamples/second: 64.83\nMemory occupied: 123 MB\n" (the seeds' print_summary,
// with device-pool peak bytes in place of nvidia-smi's reading).
std::string summary_lines(const TrainResult& result, const MemoryStats& mem);
// A table with one row per category: bytes at the global peak, the category's own maximum,
// and the final live bytes, with the share of the peak.
std::string memory_table(const MemoryStats& mem, std::optional<int64_t> capacity);
// Writes `j` to `path` as io/output_file.h writes (beside the target, renamed onto a regular file;
// a symlink's target gets it, a device is written directly); throws snug::Error naming the path.
void write_json_file(const std::string& path, const nlohmann::json& j);

}  // namespace snug
