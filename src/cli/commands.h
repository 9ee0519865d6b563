// Each subcommand registers its flags on the app and returns how to run it once parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace snug::cli {

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_train_command(CLI::App& app);
Command add_bench_command(CLI::App& app);  // `snug bench seeds`

}  // namespace snug::cli
