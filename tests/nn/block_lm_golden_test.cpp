// The model composed from src/nn blocks (tests/support/block_lm.h) against golden values from
// transformers' LlamaForCausalLM (tests/golden/gen_block_lm_golden.py ->
// tests/fixtures/block_lm_golden.safetensors): a tiny random Llama (V=19, C=16, 2 layers, 4 query
// heads over 2 kv heads, rotary with rope_theta 100, SwiGLU, untied head), B=2, T=7, one ignored
// target. Loss and every parameter gradient, on the fast and on the reference op table.
// Measured: the loss within 1e-7 relative of the float64 golden, every gradient within 1.1e-5 of
// its tensor's largest golden value (the bounds below are 2e-6 and 1e-4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "support/block_lm.h"

namespace snug {
namespace {
namespace block_lm_golden_test {

int64_t meta_int(const SafetensorsFile& f, const std::string& key) {
  const auto m = f.metadata();
  const auto it = m.find(key);
  if (it == m.end()) throw Error("block_lm_golden.safetensors: metadata lacks " + key);
  return std::stoll(it->second);
}

double meta_double(const SafetensorsFile& f, const std::string& key) {
  const auto m = f.metadata();
  const auto it = m.find(key);
  if (it == m.end()) throw Error("block_lm_golden.safetensors: metadata lacks " + key);
  return std::stod(it->second);
}

TEST(GoldenBlockLM, LossAndGradientsMatchLlamaForCausalLM) {
  const SafetensorsFile f(std::string(SNUG_TEST_DATA_DIR) + "/block_lm_golden.safetensors");
  test::BlockLMConfig c;
  c.vocab = meta_int(f, "vocab_size");
  c.hidden = meta_int(f, "hidden_size");
  c.layers = meta_int(f, "num_hidden_layers");
  c.heads = meta_int(f, "num_attention_heads");
  c.kv_heads = meta_int(f, "num_key_value_heads");
  c.intermediate = meta_int(f, "intermediate_size");
  c.rope_theta = static_cast<float>(meta_double(f, "rope_theta"));
  c.norm_eps = static_cast<float>(meta_double(f, "rms_norm_eps"));
  const int64_t B = meta_int(f, "batch"), T = meta_int(f, "seq");
  const std::vector<int32_t> ids = f.read_i32("input_ids"), targets = f.read_i32("targets");
  const double golden_loss = meta_double(f, "loss_f64");  // the float64 value (loss is F32)

  for (const OpTable* ops : {&fast_op_table(), &ref_op_table()}) {
    Device dev(cpu_backend(), ops);
    test::BlockLM m(test::llama_style(c), dev);
    // The file holds exactly the model's parameters (plus gradients and the batch).
    std::set<std::string> in_file;
    for (const std::string& n : f.names())
      if (n.rfind("grad/", 0) != 0 && n != "input_ids" && n != "targets" && n != "loss")
        in_file.insert(n);
    ASSERT_EQ(in_file.size(), m.params().list().size());
    for (Parameter* p : m.params().list()) {
      ASSERT_TRUE(in_file.count(p->name)) << "golden file lacks " << p->name;
      f.read_into(p->name, p->value);
    }
    const double loss = m.forward(ids.data(), targets.data(), B, T, true);
    m.backward();
    EXPECT_NEAR(loss, golden_loss, 2e-6 * golden_loss) << ops->impl;
    for (Parameter* p : m.params().list()) {
      ASSERT_TRUE(p->grad.defined()) << p->name;
      const std::vector<float> golden = f.read_f32("grad/" + p->name);
      ASSERT_EQ(static_cast<int64_t>(golden.size()), p->numel()) << p->name;
      const float* g = p->grad.data<float>();
      double gmax = 0.0, err = 0.0;
      size_t worst = 0;
      for (size_t i = 0; i < golden.size(); ++i) {
        gmax = std::max(gmax, static_cast<double>(std::fabs(golden[i])));
        const double e = std::fabs(static_cast<double>(g[i]) - golden[i]);
        if (!(e <= err)) {
          err = e;
          worst = i;
        }
      }
      EXPECT_GT(gmax, 1e-2) << p->name;
      EXPECT_LE(err / gmax, 1e-4) << ops->impl << " " << p->name << ": max |grad - golden| " << err
                                  << " at " << worst << " (got " << g[worst] << ", golden "
                                  << golden[worst] << "), max |golden| " << gmax;
    }
  }
}

}  // namespace block_lm_golden_test
}  // namespace
}  // namespace snug
