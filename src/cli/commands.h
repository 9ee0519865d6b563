// Each subcommand registers its flags on the app and returns how to run it once parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

namespace snug {
struct TrainingArguments;
}

namespace snug::cli {

// Registers every TrainingArguments flag on `sub`; --device-memory lands in `device_memory`
// (parsed later, so that presets and sizes share one message on error).
void add_training_flags(CLI::App* sub, TrainingArguments& a, std::string& device_memory);

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_train_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_bench_command(CLI::App& app);        // `snug bench seeds`
Command add_export_command(CLI::App& app);       // `snug export-init`
Command add_quantize_command(CLI::App& app);     // `snug quantize`
Command add_plot_memory_command(CLI::App& app);  // `snug plot-memory`
Command add_estimate_command(CLI::App& app);     // `snug estimate`
Command add_peft_export_command(CLI::App& app);  // `snug export` (--adapter, --merge)
Command add_info_command(CLI::App& app);         // `snug info`
Command add_tokenize_command(CLI::App& app);     // `snug tokenize`

}  // namespace snug::cli
