// snug's CLI11 app: every subcommand, in the order `snug --help` lists them. main() parses the
// command line with it; tests build the same app in-process (tests/cli/flag_range_test.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace snug::cli {

struct SnugApp {
  std::unique_ptr<CLI::App> app;
  std::vector<Command> commands;  // own the values the flags parse into
};
// Builds the app (and restarts number_flags(): they are this app's).
SnugApp build_app();

}  // namespace snug::cli
