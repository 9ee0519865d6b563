// What the torch-labelled tests share: the interpreter that has torch (the environment's
// SNUG_PYTHON, else the CMake cache's, compiled in as SNUG_PYTHON) and reading a script's log.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace snug::test {

inline std::string python() {
  const char* p = std::getenv("SNUG_PYTHON");
  return p != nullptr && *p != '\0' ? p : SNUG_PYTHON;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace snug::test
