// peft/peft_export.h without the CLI: loading by name with one message per mismatch (file and
// tensor), adapter_config.json for PEFT's shorthands and float alphas, and the merged weights
// against a plain triple loop W + s A^T B^T.
#include "peft/peft_export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "models/registry.h"
#include "support/configs.h"
#include "support/random.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace peft_export_test {

LoraConfig lora(int64_t r, const std::vector<std::string>& targets) {
  LoraConfig c;
  c.r = r;
  c.alpha = 8;
  c.target_modules = targets;
  return c;
}

// Writes every parameter of `model` (base and adapters) as a checkpoint's model.safetensors does.
void save_all(const GPT2& model, const std::string& path) {
  std::vector<std::pair<std::string, const Tensor*>> t;
  for (const Parameter* p : model.parameters()) t.emplace_back(p->name, &p->value);
  save_safetensors(path, t);
}

std::string error_of(GPT2& model, const std::string& path) {
  try {
    load_values_by_name(model, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(PeftExport, LoadByNameNamesTheFileAndTensorOfEachMismatch) {
  Device cpu(cpu_backend());
  const GPT2Config cfg = test::odd_config();  // C = 48, 3 layers
  test::TempDir tmp;
  const std::string path = tmp.path("model.safetensors");
  GPT2 src(cfg, cpu);
  src.init_weights(1);
  src.add_lora(lora(4, {"c_attn"}), 1);
  for (const auto& ad : src.lora_adapters())
    std::fill_n(ad.B->value.data<float>(), ad.B->value.numel(), 0.25f);
  save_all(src, path);

  GPT2 same(cfg, cpu);
  same.init_weights(2);  // other base values: the file's replace them
  same.add_lora(lora(4, {"c_attn"}), 2);
  EXPECT_EQ(load_values_by_name(same, path), static_cast<int64_t>(src.parameters().size()));
  for (size_t i = 0; i < src.parameters().size(); ++i) {
    const Tensor& a = src.parameters()[i]->value;
    const Tensor& b = same.parameters()[i]->value;
    EXPECT_EQ(std::vector<float>(a.data<float>(), a.data<float>() + a.numel()),
              std::vector<float>(b.data<float>(), b.data<float>() + b.numel()));
  }

  GPT2 rank8(cfg, cpu);
  rank8.add_lora(lora(8, {"c_attn"}), 1);
  EXPECT_EQ(error_of(rank8, path),
            path +
                ": tensor 'transformer.h.0.attn.c_attn.lora_A.weight' has shape (4,48), odd "
                "needs (8,48) (--lora-r, --model and the shape flags must be the run's)");
  GPT2 other(cfg, cpu);
  other.add_lora(lora(4, {"c_proj"}), 1);
  EXPECT_NE(
      error_of(other, path)
          .find(path + ": tensor 'transformer.h.0.attn.c_attn.lora_A.weight' is not a parameter"),
      std::string::npos);
  GPT2 more(cfg, cpu);
  more.add_lora(lora(4, {"c_attn", "c_fc"}), 1);
  EXPECT_EQ(error_of(more, path),
            path +
                ": no tensor 'transformer.h.0.mlp.c_fc.lora_A.weight': the run had no LoRA "
                "adapter on transformer.h.0.mlp.c_fc (--lora-r and --target-modules must be the "
                "run's)");
}

TEST(PeftExport, AdaptersOnlyFileKeepsTheBase) {
  Device cpu(cpu_backend());
  const GPT2Config cfg = test::odd_config();
  test::TempDir tmp;
  GPT2 model(cfg, cpu);
  model.init_weights(3);
  model.add_lora(lora(2, {"c_fc"}), 3);
  std::vector<std::pair<std::string, const Tensor*>> t;
  Tensor b = Tensor::empty({192, 2}, DType::f32, Category::weights, cpu);
  std::fill_n(b.data<float>(), b.numel(), 0.5f);
  for (const auto& ad : model.lora_adapters()) {
    t.emplace_back(ad.A->name, &ad.A->value);
    t.emplace_back(ad.B->name, &b);
  }
  save_safetensors(tmp.path("a.safetensors"), t);
  const float wte0 = model.parameters()[0]->value.data<float>()[0];
  EXPECT_EQ(load_values_by_name(model, tmp.path("a.safetensors")), 6);
  EXPECT_EQ(model.parameters()[0]->value.data<float>()[0], wte0);
  EXPECT_EQ(model.lora_adapters()[2].B->value.data<float>()[5], 0.5f);
}

TEST(PeftExport, AdapterConfigResolvesAllLinearAndKeepsFloatAlpha) {
  Device meta(meta_backend());
  GPT2 model(test::odd_config(), meta);
  LoraConfig c = lora(4, {"all-linear"});
  c.alpha = 3.5;
  c.dropout = 0.1;
  c.use_rslora = true;
  model.add_lora(c, 1);
  const nlohmann::json j = peft_adapter_config(model);
  EXPECT_EQ(j["lora_alpha"], 3.5);
  EXPECT_EQ(j["lora_dropout"], 0.1);
  EXPECT_EQ(j["use_rslora"], true);
  EXPECT_EQ(j["peft_version"], kPeftFormatVersion);
  ASSERT_EQ(j["target_modules"].size(), 12u);  // 3 layers x 4 Linears, sorted as names
  EXPECT_EQ(j["target_modules"][0], "transformer.h.0.attn.c_attn");
  EXPECT_EQ(j["target_modules"][3], "transformer.h.0.mlp.c_proj");
  EXPECT_EQ(j["target_modules"][11], "transformer.h.2.mlp.c_proj");

  GPT2 none(test::odd_config(), meta);
  EXPECT_THROW(peft_adapter_config(none), Error);
}

// The merged file against W[i][o] + s sum_k A[k][i] B[o][k], in double, with rsLoRA scaling.
TEST(PeftExport, MergedWeightsAreBasePlusScaledLowRankProduct) {
  Device cpu(cpu_backend());
  const GPT2Config cfg = test::odd_config();
  test::TempDir tmp;
  GPT2 model(cfg, cpu);
  model.init_weights(5);
  LoraConfig c = lora(3, {"c_attn", "mlp.c_proj"});
  c.alpha = 5;
  c.use_rslora = true;
  model.add_lora(c, 5);
  uint64_t seed = 10;
  for (const auto& ad : model.lora_adapters()) {
    const auto v = test::random_floats(ad.B->value.numel(), seed++, -0.3f, 0.3f);
    std::copy(v.begin(), v.end(), ad.B->value.data<float>());
  }
  const std::string path = tmp.path("merged.safetensors");
  save_merged_weights(model, path, {{"extra", "1"}});
  const SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("extra"), "1");
  EXPECT_EQ(f.metadata().at("n_embd"), "48");
  EXPECT_EQ(f.names().size(), model.parameters().size() - 12);  // no LoRA keys
  const double s = 5.0 / std::sqrt(3.0);
  for (const auto& ad : model.lora_adapters()) {
    const int64_t in = ad.A->value.dim(1), out = ad.B->value.dim(0);
    const float* W = ad.base->value.data<float>();
    const float* A = ad.A->value.data<float>();
    const float* Bm = ad.B->value.data<float>();
    const std::vector<float> got = f.read_f32(ad.base->name);
    double worst = 0.0;
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) {
        double d = 0.0;
        for (int64_t k = 0; k < 3; ++k) d += static_cast<double>(A[k * in + i]) * Bm[o * 3 + k];
        const double want = W[i * out + o] + s * d;
        worst = std::max(worst, std::fabs(want - got[static_cast<size_t>(i * out + o)]));
      }
    EXPECT_LT(worst, 1e-6) << ad.module;
  }
  // Parameters without an adapter are written as they are.
  const Parameter* fc = model.find("transformer.h.1.mlp.c_fc.weight");
  EXPECT_EQ(f.read_f32(fc->name),
            std::vector<float>(fc->value.data<float>(), fc->value.data<float>() + fc->numel()));
}

// PEFT's task types: a classifier's adapter is SEQ_CLS with the classifier trainable beside the
// adapters and written whole (modules_to_save), a masked LM's has no task type, a decoder's is
// CAUSAL_LM with nothing but the adapters.
TEST(PeftExport, TaskTypeAndModulesToSaveArePeftsPerTask) {
  Device cpu(cpu_backend());
  LoraConfig lc;
  lc.r = 2;
  lc.alpha = 4;
  lc.target_modules = {"query", "value"};
  struct Case {
    const char* task;
    nlohmann::json task_type, modules_to_save;
    std::vector<std::string> trainable_base;
  };
  const nlohmann::json null;
  for (const Case& c : {Case{"sequence-classification",
                             "SEQ_CLS",
                             {"classifier", "score"},
                             {"classifier.weight", "classifier.bias"}},
                        Case{"masked-lm", null, null, {}}}) {
    SCOPED_TRACE(c.task);
    const ModelTask task = parse_task(c.task, "test");
    const ModelConfig cfg = with_task(resolve_model("bert-tiny"), task,
                                      task == ModelTask::sequence_classification ? 3 : 0);
    auto m = create_model(cfg, cpu);
    m->init_weights(1);
    m->add_lora(lc, 2);
    std::vector<std::string> trainable;
    for (const Parameter* p : m->parameters())
      if (p->requires_grad && p->name.find("lora_") == std::string::npos)
        trainable.push_back(p->name);
    EXPECT_EQ(trainable, c.trainable_base);
    const nlohmann::json j = peft_adapter_config(*m);
    EXPECT_EQ(j["task_type"], c.task_type);
    EXPECT_EQ(j["modules_to_save"], c.modules_to_save);
    test::TempDir tmp;
    save_peft_adapter(*m, tmp.path("a"));
    const SafetensorsFile f(tmp.path("a") + "/adapter_model.safetensors");
    const size_t adapters = 2 * m->lora_adapters().size();
    EXPECT_EQ(f.names().size(), adapters + c.trainable_base.size());
    for (const std::string& n : c.trainable_base) {
      ASSERT_TRUE(f.contains("base_model.model." + n)) << n;
      std::vector<float> v(static_cast<size_t>(m->find(n)->numel()));
      m->read_values(*m->find(n), v.data());
      EXPECT_EQ(f.read_f32("base_model.model." + n), v) << n;
    }
  }
  auto llama = create_model(resolve_model("llama-tiny"), cpu);
  llama->init_weights(1);
  LoraConfig ll = lc;
  ll.target_modules = {"q_proj", "v_proj"};
  llama->add_lora(ll, 2);
  const nlohmann::json j = peft_adapter_config(*llama);
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_TRUE(j["modules_to_save"].is_null());
  for (const Parameter* p : llama->parameters())
    EXPECT_EQ(p->requires_grad, p->name.find("lora_") != std::string::npos) << p->name;
}

}  // namespace peft_export_test
}  // namespace
}  // namespace snug
