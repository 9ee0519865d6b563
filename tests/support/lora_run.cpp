#include "support/lora_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"

namespace snug::test {

std::string train_lora_checkpoint(const std::string& flags, int64_t steps,
                                  const std::string& out_dir) {
  const std::string n = std::to_string(steps);
  const CliResult r = run_snug("train " + flags + " --max-steps " + n + " --save-steps " + n +
                               " --output-dir " + out_dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out_dir + "/checkpoint-" + n;
}

void load_by_name(GPT2& model, const std::string& path) {
  const SafetensorsFile f(path);
  for (const std::string& name : f.names()) {
    Parameter* p = model.find(name);
    if (p == nullptr) throw Error("load_by_name: no parameter " + name);
    f.read_into(name, p->value);
  }
}

std::vector<float> eval_logits(GPT2& model, const std::vector<int32_t>& tokens, int64_t B,
                               int64_t T) {
  model.set_logits_mode(LogitsMode::full);
  model.forward(tokens.data(), nullptr, B, T, /*for_backward=*/false);
  const Tensor& l = model.logits();
  std::vector<float> out(l.data<float>(), l.data<float>() + l.numel());
  model.free_activations();
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

}  // namespace snug::test
