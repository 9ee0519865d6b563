// Parity with transformers for the causal families (llama, mistral, qwen2, gpt_neox) on the
// committed model folders of tests/data/hf/ (tests/golden/gen_hf_family_golden.py: odd sizes,
// GQA, llama3 rope scaling, biases, tied and untied heads, partial rotary, parallel and
// sequential residuals, a sharded folder, bf16 weights, both config.json spellings): snug
// resolves each folder's config.json, loads its weights, and its logits, loss and the gradient
// of every parameter equal transformers' (float64 references) within 1e-4 of max|reference|.
// No torch at run time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "models/registry.h"

namespace snug {
namespace {

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// max|a - ref| / max|ref|.
double rel_diff(const float* a, const std::vector<float>& ref) {
  double d = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - static_cast<double>(ref[i])));
  const double m = max_abs(ref);
  return m > 0 ? d / m : d;
}

// transformers 5 names GPT-NeoX's head lm_head in memory (the gradients' names) and embed_out
// in files (snug's name, the parameter's).
std::string reference_name(const std::string& model_type, const std::string& name) {
  if (model_type == "gpt_neox" && name == "embed_out.weight") return "lm_head.weight";
  return name;
}

class HfFamilyParity : public ::testing::TestWithParam<const char*> {};

TEST_P(HfFamilyParity, LogitsLossAndEveryGradientEqualTransformers) {
  const std::string folder = std::string(SNUG_TEST_DATA_DIR) + "/hf/" + GetParam();
  const SafetensorsFile expected(folder + "/expected.safetensors");
  const ModelConfig cfg = resolve_model(folder);
  ASSERT_EQ(cfg.shape.model_type, expected.metadata().at("model_type"));
  Device cpu(DeviceKind::cpu);
  const auto model = create_model(cfg, cpu);
  load_model_weights(*model, folder);
  model->set_attention(AttentionImpl::naive);

  const std::vector<int32_t> tokens = expected.read_i32("input_ids");
  const std::vector<int32_t> targets = expected.read_i32("targets");
  const auto& shape = expected.info("input_ids").shape;
  const int64_t B = shape[0], T = shape[1];
  constexpr double kTol = 1e-4;

  // Logits (a forward without targets keeps them, (B,T,V)).
  model->forward(tokens.data(), nullptr, B, T, /*for_backward=*/false);
  const std::vector<float> ref_logits = expected.read_f32("logits");
  ASSERT_EQ(model->logits().numel(), static_cast<int64_t>(ref_logits.size()));
  EXPECT_LT(rel_diff(model->logits().data<float>(), ref_logits), kTol) << "logits";
  model->free_activations();

  for (AttentionImpl impl : {AttentionImpl::naive, AttentionImpl::flash}) {
    SCOPED_TRACE(impl == AttentionImpl::naive ? "naive attention" : "flash attention");
    model->set_attention(impl);
    model->zero_grad();
    const float loss = model->forward(tokens.data(), targets.data(), B, T);
    const float ref_loss = expected.read_f32("loss")[0];
    EXPECT_LT(std::fabs(loss - ref_loss) / std::fabs(ref_loss), kTol)
        << "loss " << loss << " vs " << ref_loss;
    model->backward(1.0f);
    int checked = 0;
    for (const Parameter* p : model->parameters()) {
      const std::string ref = "grad/" + reference_name(cfg.shape.model_type, p->name);
      ASSERT_TRUE(expected.contains(ref)) << ref;
      ASSERT_TRUE(p->grad.defined()) << p->name;
      const std::vector<float> g = expected.read_f32(ref);
      ASSERT_EQ(p->grad.numel(), static_cast<int64_t>(g.size())) << p->name;
      EXPECT_LT(rel_diff(p->grad.data<float>(), g), kTol) << p->name;
      ++checked;
    }
    // Every gradient the fixture has is a parameter's.
    int refs = 0;
    for (const std::string& n : expected.names()) refs += n.rfind("grad/", 0) == 0 ? 1 : 0;
    EXPECT_EQ(checked, refs);
  }
}

INSTANTIATE_TEST_SUITE_P(Causal, HfFamilyParity,
                         ::testing::Values("llama_gqa_sharded", "llama_bias_tied", "mistral_gqa",
                                           "qwen2_bf16_tied", "neox_parallel", "neox_sequential"));

}  // namespace
}  // namespace snug
