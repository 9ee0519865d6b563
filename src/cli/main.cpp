// snug's command line. Subcommands live in their own files (train_command.cpp, ...); this file
// wires them into one CLI11 app and turns errors into one clear message and an exit status:
//   0 success, 1 a run failed (bad data, non-finite loss, a flag value that parses but cannot
//   work, ...), 2 a command line that does not parse (CLI11), 3 out of (modelled) device memory.
// Values are 1, not 2, because they are checked where they meet the model and data (README.md).
// Any other exception (std::bad_alloc, a library's error) is still one message and status 1,
// never an abort: snug must not die by a signal on any input (issue 15).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/omp_wait_policy.h"
#include "core/error.h"

int main(int argc, char** argv) {
  snug::cli::apply_default_wait_policy(argv);
  // A write past `ulimit -f` fails with EFBIG ("File too large", one message and exit 1) instead
  // of killing snug by SIGXFSZ in the middle of a checkpoint.
  std::signal(SIGXFSZ, SIG_IGN);
  snug::cli::SnugApp built = snug::cli::build_app();
  CLI::App& app = *built.app;
  const std::vector<snug::cli::Command>& commands = built.commands;
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
  } catch (const snug::Error& e) {
    // A flag value that parses but is out of its declared range (cli/number_flag.h).
    std::fprintf(stderr, "snug: error: %s\n", snug::cli::bounded_message(e.what()).c_str());
    return 1;
  }
  try {
    for (const snug::cli::Command& c : commands)
      if (c.sub->parsed()) return c.run();
  } catch (const snug::OutOfMemoryError& e) {
    std::fprintf(stderr, "snug: %s\n", snug::cli::bounded_message(e.what()).c_str());
    return 3;
  } catch (const snug::Error& e) {
    std::fprintf(stderr, "snug: error: %s\n", snug::cli::bounded_message(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc& e) {
    std::fprintf(stderr, "snug: error: out of host memory (%s)\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "snug: internal error (a bug in snug): %s\n",
                 snug::cli::bounded_message(e.what()).c_str());
    return 1;
  }
  return 0;
}
