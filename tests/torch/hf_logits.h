// transformers' logits for a model folder (tests/torch/hf_folder_logits.py), optionally with a
// PEFT adapter on top or loaded in a 16-bit dtype, measured against snug's: shared by the torch
// tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "support/run_cli.h"
#include "torch/torch_python.h"

namespace snug::test {

struct Compared {
  int status = -1;        // the script's exit status
  double rel = INFINITY;  // max|snug - hf| / max|hf|
  double max_ref = 0;
  std::string log;
};

// Runs transformers on `dir` for `tokens` (loaded in `dtype`: float32, bfloat16 or float16) and
// compares with snug's `logits`; prints the measured difference under `tag`.
inline Compared compare_with_transformers(const std::string& dir,
                                          const std::vector<int32_t>& tokens, int64_t B, int64_t T,
                                          const std::vector<float>& logits, const TempDir& tmp,
                                          const std::string& tag, const std::string& adapter = "",
                                          bool by_architectures = false,
                                          const std::string& dtype = "float32") {
  Device cpu(cpu_backend());
  Tensor tok = Tensor::empty({B, T}, DType::i32, Category::input_data, cpu);
  std::copy(tokens.begin(), tokens.end(), tok.data<int32_t>());
  std::string file = tag;  // the tag as a file name
  for (char& ch : file)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  const std::string tok_path = tmp.path(file + "-tokens.safetensors");
  const std::string out_path = tmp.path(file + "-hf.safetensors");
  const std::string log = tmp.path(file + ".log");
  save_safetensors(tok_path, {{"tokens", &tok}});
  const std::string script = std::string(SNUG_TEST_DATA_DIR) + "/../torch/hf_folder_logits.py";
  Compared c;
  const std::string with = !adapter.empty()   ? " --adapter '" + adapter + "'"
                           : by_architectures ? " --architectures"
                                              : "";
  const int raw =
      std::system(("'" + python() + "' " + script + " --model '" + dir + "'" + with + " --dtype " +
                   dtype + " --tokens " + tok_path + " --out " + out_path + " >" + log + " 2>&1")
                      .c_str());
  c.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  c.log = slurp(log);
  if (c.status != 0) return c;
  const std::vector<float> ref = SafetensorsFile(out_path).read_f32("logits");
  EXPECT_EQ(ref.size(), logits.size()) << tag;
  double diff = 0;
  for (size_t i = 0; i < std::min(ref.size(), logits.size()); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(ref[i]) - logits[i]));
    c.max_ref = std::max(c.max_ref, std::fabs(static_cast<double>(ref[i])));
  }
  c.rel = diff / c.max_ref;
  std::printf("%s: max|diff| %.3g, max|reference| %.3g, ratio %.3g\n", tag.c_str(), diff, c.max_ref,
              c.rel);
  return c;
}

}  // namespace snug::test
