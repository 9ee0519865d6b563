// Parity with Hugging Face transformers for every causal family of issue 17, without torch: each
// folder under tests/fixtures/hf/ (written by tests/golden/gen_hf_family_golden.py with
// save_pretrained: config.json, model.safetensors or shards + index, fp32 or bf16) is loaded as
// `--model DIR` loads it (resolve_model, create_model, load_model_weights), run on the batch of its
// expected.safetensors, and compared with transformers' logits, loss and every parameter
// gradient by max|snug - ref| / max|ref| <= 1e-4 (the references are float64 computations from
// the saved weights, so the measure is snug's own float32 error), with naive and with flash
// attention.
//
// The cases are the folders whose expected.safetensors holds `targets` (the BERT folders hold
// `labels` and are the BERT parity test's), so the script's list is the one list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/registry.h"

namespace snug {
namespace {
namespace hf_family_parity_test {

constexpr float kTolerance = 1e-4f;

std::string hf_dir() {
  return std::string(SNUG_TEST_DATA_DIR) + "/hf";
}

// Every causal case folder, by name, sorted.
std::vector<std::string> causal_cases() {
  std::vector<std::string> out;
  if (!std::filesystem::is_directory(hf_dir())) return out;
  for (const auto& e : std::filesystem::directory_iterator(hf_dir())) {
    const std::string expected = e.path().string() + "/expected.safetensors";
    if (e.is_directory() && std::filesystem::exists(expected) &&
        SafetensorsFile(expected).contains("targets"))
      out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// max|got - ref| / max|ref|, with where the largest difference is (NaN counts as the largest).
struct Diff {
  double rel = 0, max_abs_diff = 0, max_ref = 0;
  size_t worst = 0;
  float got = 0, ref = 0;
};

Diff compare(const float* got, const std::vector<float>& ref) {
  Diff d;
  for (size_t i = 0; i < ref.size(); ++i) {
    d.max_ref = std::max(d.max_ref, std::fabs(double(ref[i])));
    const double e = std::fabs(double(got[i]) - ref[i]);
    if (!(e <= d.max_abs_diff)) {
      d.max_abs_diff = std::isnan(e) ? INFINITY : e;
      d.worst = i;
    }
  }
  d.rel = d.max_abs_diff / std::max(d.max_ref, 1e-30);
  if (!ref.empty()) {
    d.got = got[d.worst];
    d.ref = ref[d.worst];
  }
  return d;
}

std::string describe(const Diff& d) {
  return "max|diff|/max|ref| = " + std::to_string(d.rel) + " (max|diff| " +
         std::to_string(d.max_abs_diff) + " at element " + std::to_string(d.worst) + ": " +
         std::to_string(d.got) + " vs " + std::to_string(d.ref) + "; max|ref| " +
         std::to_string(d.max_ref) + ")";
}

int64_t meta_int(const SafetensorsFile& f, const std::string& key) {
  const auto m = f.metadata();
  const auto it = m.find(key);
  if (it == m.end()) throw Error(f.path() + ": metadata lacks " + key);
  return std::stoll(it->second);
}

class HfFamilyParity : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return hf_dir() + "/" + GetParam(); }
};

TEST_P(HfFamilyParity, LogitsLossAndGradientsMatchTransformers) {
  const SafetensorsFile ex(dir() + "/expected.safetensors");
  const int64_t B = meta_int(ex, "batch"), T = meta_int(ex, "seq");
  const std::vector<int32_t> ids = ex.read_i32("input_ids"), targets = ex.read_i32("targets");
  ASSERT_EQ(ex.info("input_ids").shape, (std::vector<int64_t>{B, T}));
  ASSERT_EQ(ex.info("targets").shape, (std::vector<int64_t>{B, T}));

  // The folder, as --model DIR reads it.
  const ModelConfig cfg = resolve_model(dir());
  EXPECT_EQ(cfg.shape.model_type, ex.metadata().at("model_type"));
  Device cpu(cpu_backend());
  const std::unique_ptr<Model> model = create_model(cfg, cpu);
  load_model_weights(*model, dir());

  // Exactly transformers' named_parameters(), in any order (a tied head is the embedding).
  std::set<std::string> expected_names, model_names;
  for (const std::string& n : ex.names())
    if (n.rfind("grad/", 0) == 0) expected_names.insert(n.substr(5));
  for (const Parameter* p : model->parameters()) model_names.insert(p->name);
  ASSERT_EQ(model_names, expected_names);

  const std::vector<float> ref_logits = ex.read_f32("logits");
  const float ref_loss = ex.read_f32("loss").at(0);
  for (AttentionImpl impl : {AttentionImpl::naive, AttentionImpl::flash}) {
    const char* impl_name = impl == AttentionImpl::naive ? "naive" : "flash";
    SCOPED_TRACE(std::string(impl_name) + " attention");
    model->set_attention(impl);

    // Logits (a logits-only forward keeps them).
    model->forward(ids.data(), nullptr, B, T, /*for_backward=*/false);
    const Tensor& logits = model->logits();
    ASSERT_EQ(logits.numel(), static_cast<int64_t>(ref_logits.size()));
    const Diff dl = compare(logits.data<float>(), ref_logits);
    EXPECT_LE(dl.rel, kTolerance) << GetParam() << " logits: " << describe(dl);
    model->free_activations();

    // Loss and every gradient.
    model->zero_grad();
    const float loss = model->forward(ids.data(), targets.data(), B, T);
    EXPECT_EQ(model->last_valid_targets(), B * T - 1);  // one target is -100
    model->backward(1.0f);
    const double loss_rel = std::fabs(double(loss) - ref_loss) / std::fabs(double(ref_loss));
    EXPECT_LE(loss_rel, kTolerance) << GetParam() << " loss " << loss << " vs " << ref_loss;

    double worst_grad = 0;
    std::string worst_name;
    for (Parameter* p : model->parameters()) {
      ASSERT_TRUE(p->grad.defined()) << p->name << ": backward left no gradient";
      const std::vector<float> ref = ex.read_f32("grad/" + p->name);
      ASSERT_EQ(p->grad.numel(), static_cast<int64_t>(ref.size())) << p->name;
      ASSERT_EQ(p->grad.dtype(), DType::f32) << p->name;
      const Diff d = compare(p->grad.data<float>(), ref);
      EXPECT_LE(d.rel, kTolerance) << GetParam() << " grad/" << p->name << ": " << describe(d);
      if (!(d.rel <= worst_grad)) {
        worst_grad = d.rel;
        worst_name = p->name;
      }
    }
    std::printf("[%s, %s attention] logits %.3g, loss %.3g, worst gradient %.3g (%s)\n",
                GetParam().c_str(), impl_name, dl.rel, loss_rel, worst_grad, worst_name.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfFamilyParity, ::testing::ValuesIn(causal_cases()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The fixtures cover every causal family of issue 17 and one sharded and one bf16 folder, so a
// lost folder fails here instead of silently dropping a case.
TEST(HfFamilyParityFixtures, CoverEveryCausalFamilyShardedAndBf16) {
  std::set<std::string> types;
  bool sharded = false, bf16 = false;
  for (const std::string& c : causal_cases()) {
    const SafetensorsFile ex(hf_dir() + "/" + c + "/expected.safetensors");
    types.insert(ex.metadata().at("model_type"));
    bf16 = bf16 || ex.metadata().at("weights_dtype") == "bf16";
    sharded =
        sharded || std::filesystem::exists(hf_dir() + "/" + c + "/model.safetensors.index.json");
  }
  EXPECT_EQ(types, (std::set<std::string>{"gpt_neox", "llama", "mistral", "qwen2"}));
  EXPECT_TRUE(sharded);
  EXPECT_TRUE(bf16);
}

}  // namespace hf_family_parity_test
}  // namespace
}  // namespace snug
