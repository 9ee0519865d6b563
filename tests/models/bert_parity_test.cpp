// BERT against transformers (tests/golden/gen_hf_family_golden.py -> tests/fixtures/hf/bert_mlm,
// bert_cls): BertForMaskedLM and BertForSequenceClassification (3 labels) on random weights
// (initializer_range 0.2), with token_type_ids in both segments. The expected logits, loss and
// every parameter gradient were computed in float64 in eval mode (no dropout); snug runs in fp32
// and must agree within 1e-4 of max|reference| for each, with naive and flash attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/bert/bert.h"
#include "models/registry.h"

namespace snug {
namespace {
namespace bert_parity_test {

std::string folder(const std::string& c) {
  return std::string(SNUG_TEST_DATA_DIR) + "/hf/" + c;
}

double rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double dmax = 0, rmax = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    dmax = std::max(dmax, std::fabs(static_cast<double>(got[i]) - want[i]));
    rmax = std::max(rmax, std::fabs(static_cast<double>(want[i])));
  }
  return rmax > 0 ? dmax / rmax : dmax;
}

ModelConfig no_dropout(const std::string& c);

void check_case(const std::string& c, AttentionImpl impl) {
  SCOPED_TRACE(c);
  const ModelConfig cfg = no_dropout(c);
  Device dev(cpu_backend());
  auto model = create_model(cfg, dev);
  auto& bert = dynamic_cast<Bert&>(*model);
  load_model_weights(*model, folder(c) + "/model.safetensors");
  model->set_attention(impl);
  const SafetensorsFile f(folder(c) + "/expected.safetensors");
  const auto ids = f.read_i32("input_ids");
  const auto types = f.read_i32("token_type_ids");
  const auto mask = f.read_i32("attention_mask");
  const auto labels = f.read_i32("labels");
  const int64_t B = f.info("input_ids").shape[0], T = f.info("input_ids").shape[1];
  for (int32_t m : mask) ASSERT_EQ(m, 1) << "padding masks are not supported";
  std::vector<int32_t> targets;
  if (cfg.task == ModelTask::sequence_classification) {
    targets.assign(static_cast<size_t>(B * T), -100);
    for (int64_t b = 0; b < B; ++b) targets[static_cast<size_t>(b * T)] = labels[b];
  } else {
    targets = labels;
  }
  bert.set_token_type_ids(types);
  // Logits: a forward without targets (eval mode: no dropout).
  model->forward(ids.data(), nullptr, B, T, false);
  const Tensor& lg = model->logits();
  std::vector<float> logits(lg.data<float>(), lg.data<float>() + lg.numel());
  EXPECT_LE(rel_diff(logits, f.read_f32("logits")), 1e-4) << "logits";
  // Loss and gradients: dropout off as transformers' eval mode (the references have none).
  const float loss = model->forward(ids.data(), targets.data(), B, T, true);
  EXPECT_EQ(model->last_valid_targets(), cfg.task == ModelTask::sequence_classification ? B : 6);
  const float want = f.read_f32("loss")[0];
  EXPECT_LE(std::fabs(loss - want) / std::fabs(want), 1e-4) << "loss " << loss << " vs " << want;
  model->backward(1.0f);
  int checked = 0;
  for (const Parameter* p : model->parameters()) {
    ASSERT_TRUE(f.contains("grad/" + p->name)) << p->name;
    ASSERT_TRUE(p->grad.defined()) << p->name;
    std::vector<float> g(p->grad.data<float>(), p->grad.data<float>() + p->grad.numel());
    const std::vector<float> ref_grad = f.read_f32("grad/" + p->name);
    const std::string key_bias = ".attention.self.key.bias";
    if (p->name.size() > key_bias.size() &&
        p->name.compare(p->name.size() - key_bias.size(), key_bias.size(), key_bias) == 0) {
      // Exactly 0: a key bias adds q . b to every score of a query row, which softmax ignores.
      // The reference holds float64 rounding (~1e-17), snug fp32 rounding: both are measured
      // against the key weight's gradient, the scale a wrong bias gradient would show at.
      const std::string w = p->name.substr(0, p->name.size() - 4) + "weight";
      double scale = 0, got = 0, ref = 0;
      for (float x : f.read_f32("grad/" + w)) scale = std::max(scale, std::fabs(double{x}));
      for (size_t i = 0; i < g.size(); ++i) {
        got = std::max(got, std::fabs(double{g[i]}));
        ref = std::max(ref, std::fabs(double{ref_grad[i]}));
      }
      EXPECT_LE(ref, 1e-10 * scale) << "the reference's " << p->name << " is not zero";
      EXPECT_LE(got, 1e-4 * scale) << "gradient of " << p->name;
    } else {
      EXPECT_LE(rel_diff(g, ref_grad), 1e-4) << "gradient of " << p->name;
    }
    ++checked;
  }
  int in_file = 0;
  for (const std::string& n : f.names()) in_file += n.rfind("grad/", 0) == 0 ? 1 : 0;
  EXPECT_EQ(checked, in_file) << "every gradient of the file is a parameter of the model";
}

// transformers' eval mode has no dropout; snug's training forward drops unless the config says
// 0. The fixtures' config.json keeps transformers' 0.1, so the test overrides the probabilities.
ModelConfig no_dropout(const std::string& c) {
  return resolve_model(folder(c) + "/config.json", {},
                       {"hidden_dropout_prob=0", "attention_probs_dropout_prob=0"});
}

TEST(BertParity, ConfigsParse) {
  const ModelConfig mlm = resolve_model(folder("bert_mlm") + "/config.json");
  EXPECT_EQ(mlm.task, ModelTask::masked_lm);
  const ModelConfig cls = resolve_model(folder("bert_cls") + "/config.json");
  EXPECT_EQ(cls.task, ModelTask::sequence_classification);
  EXPECT_EQ(cls.num_labels, 3);
  EXPECT_EQ(no_dropout("bert_cls").num_labels, 3);
}

}  // namespace bert_parity_test
}  // namespace
}  // namespace snug

namespace snug {
namespace {
namespace bert_parity_test {

TEST(BertParity, MaskedLMNaive) {
  check_case("bert_mlm", AttentionImpl::naive);
}
TEST(BertParity, MaskedLMFlash) {
  check_case("bert_mlm", AttentionImpl::flash);
}
TEST(BertParity, SequenceClassificationNaive) {
  check_case("bert_cls", AttentionImpl::naive);
}
TEST(BertParity, SequenceClassificationFlash) {
  check_case("bert_cls", AttentionImpl::flash);
}

}  // namespace bert_parity_test
}  // namespace
}  // namespace snug
