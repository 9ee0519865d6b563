// snug's command line. Subcommands live in their own files (train_command.cpp, ...); this file
// wires them into one CLI11 app and turns errors into one clear message and an exit status:
//   0 success, 1 a run failed (bad data, non-finite loss, a flag value that parses but cannot
//   work, ...), 2 a command line that does not parse (CLI11), 3 out of (modelled) device memory.
// Values are 1, not 2, because they are checked where they meet the model and data (README.md).
// Any other exception (std::bad_alloc, a library's error) is still one message and status 1,
// never an abort: snug must not die by a signal on any input (issue 15).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <vector>

#include "cli/commands.h"
#include "cli/omp_wait_policy.h"
#include "core/error.h"
#include "kernels/gemm_path.h"

int main(int argc, char** argv) {
  snug::cli::apply_default_wait_policy(argv);
  CLI::App app{
      "snug: train and fine-tune transformer language models in the memory you have.\n"
      "Run `snug <command> --help` for the flags of a command."};
  app.require_subcommand(1);
  // The version, and what runs the GEMMs of each dtype on this machine (--gemm-path auto).
  app.set_version_flag("--version", [] {
    return std::string("snug ") + SNUG_VERSION + "\n" +
           snug::kernels::gemm_summary(snug::kernels::resolve_gemm_path("auto"));
  });
  // Every subcommand, in the order `snug --help` lists them.
  const std::vector<snug::cli::Command> commands = {
      snug::cli::add_train_command(app),    snug::cli::add_plan_command(app),
      snug::cli::add_bench_command(app),    snug::cli::add_export_init_command(app),
      snug::cli::add_quantize_command(app), snug::cli::add_plot_memory_command(app),
      snug::cli::add_estimate_command(app), snug::cli::add_peft_export_command(app),
      snug::cli::add_info_command(app),     snug::cli::add_tokenize_command(app),
      snug::cli::add_generate_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    for (const snug::cli::Command& c : commands)
      if (c.sub->parsed()) return c.run();
  } catch (const snug::OutOfMemoryError& e) {
    std::fprintf(stderr, "snug: %s\n", e.what());
    return 3;
  } catch (const snug::Error& e) {
    std::fprintf(stderr, "snug: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc& e) {
    std::fprintf(stderr, "snug: error: out of host memory (%s)\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "snug: internal error (a bug in snug): %s\n", e.what());
    return 1;
  }
  return 0;
}
