// Training flags parsed as `snug train` parses them: the commands' CLI11 registration
// (cli/commands.h), --device-memory converted as the commands convert it. Header-only: only
// snug_tests links snug_cli, and the slow and torch binaries compile every support/*.cpp.
#pragma once

#include <gtest/gtest.h>
#include <wordexp.h>

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "core/device.h"
#include "train/training_args.h"

namespace snug::test {

// The words of `line` as a POSIX shell splits them (quotes removed, no expansion).
inline std::vector<std::string> shell_split(const std::string& line) {
  wordexp_t w;
  EXPECT_EQ(wordexp(line.c_str(), &w, WRDE_NOCMD | WRDE_UNDEF), 0) << line;
  std::vector<std::string> words(w.we_wordv, w.we_wordv + w.we_wordc);
  wordfree(&w);
  return words;
}

// `words` on top of `a` (flags not given keep its values).
inline TrainingArguments parse_training_flags(const std::vector<std::string>& words,
                                              TrainingArguments a = {}) {
  CLI::App app;
  std::string device_memory;
  cli::add_training_flags(&app, a, device_memory);
  app.parse(std::vector<std::string>(words.rbegin(), words.rend()));
  if (!device_memory.empty()) a.device_memory = parse_device_memory(device_memory);
  return a;
}

// The same for a command line's flags, split as a shell splits them.
inline TrainingArguments parse_training_line(const std::string& line, TrainingArguments a = {}) {
  return parse_training_flags(shell_split(line), std::move(a));
}

}  // namespace snug::test
