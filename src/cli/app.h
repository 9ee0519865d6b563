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
// `m`, or its first 3000 and last 1000 bytes where longer. Every message snug prints goes
// through it (issue 29, item 6): the places that quote input quote an excerpt, and this is the
// net under them, so that no input makes snug print megabytes (CLI11's own messages included).
std::string bounded_message(const std::string& m);

}  // namespace snug::cli
