#include "cli/app.h"

#include <string>

#include "cli/number_flag.h"
#include "kernels/gemm_path.h"

namespace snug::cli {

std::string bounded_message(const std::string& m) {
  constexpr size_t kHead = 3000, kTail = 1000;
  if (m.size() <= kHead + kTail) return m;
  return m.substr(0, kHead) + " ... (" + std::to_string(m.size() - kHead - kTail) +
         " bytes left out) ... " + m.substr(m.size() - kTail);
}

SnugApp build_app() {
  clear_number_flags();
  SnugApp a;
  a.app = std::make_unique<CLI::App>(
      "snug: train and fine-tune transformer language models in the memory you have.\n"
      "Run `snug <command> --help` for the flags of a command.");
  CLI::App& app = *a.app;
  app.require_subcommand(1);
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    return bounded_message(CLI::FailureMessage::simple(failed, e));
  });
  // The version, and what runs the GEMMs of each dtype on this machine (--gemm-path auto).
  app.set_version_flag("--version", [] {
    return std::string("snug ") + SNUG_VERSION + "\n" +
           kernels::gemm_summary(kernels::resolve_gemm_path("auto"));
  });
  a.commands = {
      add_train_command(app),       add_plan_command(app),        add_bench_command(app),
      add_export_init_command(app), add_quantize_command(app),    add_plot_memory_command(app),
      add_estimate_command(app),    add_peft_export_command(app), add_info_command(app),
      add_tokenize_command(app),    add_generate_command(app)};
  return a;
}

}  // namespace snug::cli
