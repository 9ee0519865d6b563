// The BERT checkpoints people start from are rarely of the task they train (models/bert,
// HfWeightRules::fresh_prefixes): bert-base-uncased is a pre-training checkpoint (MLM and
// next-sentence heads, a pooler, TF-era LayerNorm gamma/beta names), a sentence-transformers
// folder is a bare BertModel (no "bert." prefix, no head). As BertFor*.from_pretrained does, the
// task's head may be absent (initialized from the seed, named in the report), the other heads
// are dropped (named too), and the encoder must still be complete: the files here are built from
// the transformers fixtures (tests/fixtures/hf/bert_mlm, bert_cls) by renaming and dropping
// tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace bert_checkpoints_test {

namespace fs = std::filesystem;
using test::TempDir;

std::string fixture(const std::string& c) {
  return std::string(SNUG_TEST_DATA_DIR) + "/hf/" + c;
}

using Tensors = std::map<std::string, std::vector<float>>;  // name -> values (fp32)

Tensors read_all(const std::string& file) {
  const SafetensorsFile f(file);
  Tensors t;
  for (const std::string& n : f.names()) t[n] = f.read_f32(n);
  return t;
}

// Writes `t` (shapes from `shapes`) as one safetensors file.
void write_all(const std::string& file, const Tensors& t,
               const std::map<std::string, std::vector<int64_t>>& shapes) {
  Device cpu(cpu_backend());
  std::vector<Tensor> keep;
  keep.reserve(t.size());
  std::vector<std::pair<std::string, const Tensor*>> out;
  for (const auto& [name, v] : t) {
    keep.push_back(Tensor::empty(shapes.at(name), DType::f32, Category::weights, cpu));
    std::copy(v.begin(), v.end(), keep.back().data<float>());
    out.emplace_back(name, &keep.back());
  }
  save_safetensors(file, out, {{"format", "pt"}});
}

std::map<std::string, std::vector<int64_t>> shapes_of(const std::string& file) {
  const SafetensorsFile f(file);
  std::map<std::string, std::vector<int64_t>> s;
  for (const std::string& n : f.names()) s[n] = f.info(n).shape;
  return s;
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

std::vector<float> values(const Parameter& p) {
  return std::vector<float>(p.value.data<float>(), p.value.data<float>() + p.value.numel());
}

// The fixtures' shape with `task`'s head (3 labels for a classifier).
ModelConfig config(ModelTask task) {
  return with_task(resolve_model(fixture("bert_mlm") + "/config.json"), task,
                   task == ModelTask::sequence_classification ? 3 : 0);
}

// A model of the fixtures' shape for `task`, loaded from `file` with --seed 7.
struct Loaded {
  Device dev{cpu_backend()};
  std::unique_ptr<Model> model;
  HfLoadReport report;
  Loaded(ModelTask task, const std::string& file) {
    model = create_model(config(task), dev);
    report = load_model_weights(*model, file, 7);
  }
};

// The values init_weights(7) gives the same model (what a fresh head must hold).
std::map<std::string, std::vector<float>> initialized(ModelTask task) {
  Device dev(cpu_backend());
  const auto m = create_model(config(task), dev);
  m->init_weights(7);
  std::map<std::string, std::vector<float>> v;
  for (const Parameter* p : m->parameters()) v[p->name] = values(*p);
  return v;
}

// Every parameter of `l` holds init_weights(7)'s value when its name starts with `head` (the
// head the file lacked), else `file_value(name)`.
template <class FileValue>
void expect_values(const Loaded& l, ModelTask task, const std::string& head,
                   const FileValue& file_value) {
  const auto fresh = initialized(task);
  for (const Parameter* p : l.model->parameters()) {
    if (!head.empty() && starts_with(p->name, head))
      EXPECT_EQ(values(*p), fresh.at(p->name)) << p->name << ": init_weights(--seed)'s values";
    else
      EXPECT_EQ(values(*p), file_value(p->name)) << p->name << ": the file's values";
  }
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// bert-base-uncased's layout: the MLM fixture plus a pooler and a next-sentence head, with
// LayerNorm weights spelled gamma/beta.
struct PretrainingFile {
  TempDir tmp;
  std::string file = tmp.path("model.safetensors");
  Tensors t;  // as written
  PretrainingFile() {
    const std::string src = fixture("bert_mlm") + "/model.safetensors";
    const Tensors in = read_all(src);
    std::map<std::string, std::vector<int64_t>> shapes = shapes_of(src);
    const std::map<std::string, std::vector<int64_t>> in_shapes = shapes;
    shapes.clear();
    for (const auto& [name, v] : in) {
      std::string n = name;
      if (n.size() > 16 && n.compare(n.size() - 16, 16, "LayerNorm.weight") == 0)
        n = n.substr(0, n.size() - 6) + "gamma";
      else if (n.size() > 14 && n.compare(n.size() - 14, 14, "LayerNorm.bias") == 0)
        n = n.substr(0, n.size() - 4) + "beta";
      t[n] = v;
      shapes[n] = in_shapes.at(name);
    }
    const int64_t C = 36;
    for (const auto& [n, shape] :
         std::map<std::string, std::vector<int64_t>>{{"bert.pooler.dense.weight", {C, C}},
                                                     {"bert.pooler.dense.bias", {C}},
                                                     {"cls.seq_relationship.weight", {2, C}},
                                                     {"cls.seq_relationship.bias", {2}}}) {
      int64_t n_el = 1;
      for (int64_t d : shape) n_el *= d;
      std::vector<float> v(static_cast<size_t>(n_el));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
      t[n] = v;
      shapes[n] = shape;
    }
    write_all(file, t, shapes);
  }
  // The file's value of a parameter, under its gamma/beta spelling when it has one.
  const std::vector<float>& of(const std::string& param) const {
    if (const auto it = t.find(param); it != t.end()) return it->second;
    std::string n = param;
    if (n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0)
      n = n.substr(0, n.size() - 6) + "gamma";
    else
      n = n.substr(0, n.size() - 4) + "beta";
    return t.at(n);
  }
};

TEST(BertCheckpoints, PretrainingCheckpointLoadsForClassificationWithAFreshClassifier) {
  const PretrainingFile f;
  const Loaded l(ModelTask::sequence_classification, f.file);
  expect_values(l, ModelTask::sequence_classification, "classifier.",
                [&](const std::string& n) { return f.of(n); });
  EXPECT_EQ(l.report.initialized,
            (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  // Dropped: the MLM head (4 tensors + bias) and the next-sentence head (2).
  EXPECT_EQ(sorted(l.report.unused),
            (std::vector<std::string>{
                "cls.predictions.bias", "cls.predictions.transform.LayerNorm.beta",
                "cls.predictions.transform.LayerNorm.gamma", "cls.predictions.transform.dense.bias",
                "cls.predictions.transform.dense.weight", "cls.seq_relationship.bias",
                "cls.seq_relationship.weight"}));
  const std::string line = l.report.describe();
  EXPECT_NE(line.find("2 parameter(s) not in the checkpoint, newly initialized from --seed 7"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("7 checkpoint tensor(s) of another head, not used"), std::string::npos)
      << line;
}

TEST(BertCheckpoints, PretrainingCheckpointLoadsForMaskedLMWhole) {
  const PretrainingFile f;
  const Loaded l(ModelTask::masked_lm, f.file);
  expect_values(l, ModelTask::masked_lm, "", [&](const std::string& n) { return f.of(n); });
  EXPECT_TRUE(l.report.initialized.empty());
  EXPECT_EQ(sorted(l.report.unused),
            (std::vector<std::string>{"bert.pooler.dense.bias", "bert.pooler.dense.weight",
                                      "cls.seq_relationship.bias", "cls.seq_relationship.weight"}));
}

// A sentence-transformers folder: BertModel's names (no "bert." prefix), a pooler, no head.
TEST(BertCheckpoints, BareEncoderLoadsForEitherTask) {
  TempDir tmp;
  const std::string src = fixture("bert_cls") + "/model.safetensors";
  const Tensors in = read_all(src);
  const auto in_shapes = shapes_of(src);
  Tensors t;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, v] : in) {
    if (!starts_with(name, "bert.")) continue;
    t[name.substr(5)] = v;
    shapes[name.substr(5)] = in_shapes.at(name);
  }
  const std::string file = tmp.path("model.safetensors");
  write_all(file, t, shapes);

  // The file's names are the parameters' without "bert.".
  const auto in_file = [&](const std::string& n) { return t.at(n.substr(5)); };
  const Loaded cls(ModelTask::sequence_classification, file);
  expect_values(cls, ModelTask::sequence_classification, "classifier.", in_file);
  EXPECT_EQ(cls.report.initialized,
            (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(cls.report.unused.empty());

  const Loaded mlm(ModelTask::masked_lm, file);
  expect_values(mlm, ModelTask::masked_lm, "cls.", in_file);
  EXPECT_EQ(mlm.report.initialized.size(), 5U);  // cls.predictions.{bias,transform.*}
  EXPECT_EQ(sorted(mlm.report.unused),
            (std::vector<std::string>{"pooler.dense.bias", "pooler.dense.weight"}));
}

// Only heads are relaxed: a missing encoder tensor or a stray one is still an error by name, and a
// checkpoint of the task itself reports nothing.
TEST(BertCheckpoints, TheEncoderStaysStrict) {
  TempDir tmp;
  const std::string src = fixture("bert_cls") + "/model.safetensors";
  Tensors t = read_all(src);
  auto shapes = shapes_of(src);
  const Loaded same(ModelTask::sequence_classification, src);
  EXPECT_TRUE(same.report.initialized.empty());
  EXPECT_TRUE(same.report.unused.empty());
  EXPECT_EQ(same.report.describe(), "");

  const std::string gone = "bert.encoder.layer.0.attention.self.key.weight";
  Tensors missing = t;
  missing.erase(gone);
  write_all(tmp.path("missing.safetensors"), missing, shapes);
  try {
    const Loaded l(ModelTask::sequence_classification, tmp.path("missing.safetensors"));
    ADD_FAILURE() << "an encoder without " << gone << " loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor '" + gone + "'"), std::string::npos)
        << e.what();
  }

  t["bert.encoder.layer.0.adapter.weight"] = std::vector<float>(36, 0.0f);
  shapes["bert.encoder.layer.0.adapter.weight"] = {36};
  write_all(tmp.path("stray.safetensors"), t, shapes);
  try {
    const Loaded l(ModelTask::sequence_classification, tmp.path("stray.safetensors"));
    ADD_FAILURE() << "a stray tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert.encoder.layer.0.adapter.weight"), std::string::npos)
        << e.what();
  }
}

// `--task` on a folder keeps the folder (its weights are the run's start): it used to lose it.
TEST(BertCheckpoints, TaskOfAFolderKeepsTheFolder) {
  const ModelConfig in = resolve_model(fixture("bert_mlm"));
  for (const ModelTask t : {ModelTask::masked_lm, ModelTask::sequence_classification}) {
    const ModelConfig c = with_task(in, t, t == ModelTask::sequence_classification ? 3 : 0);
    EXPECT_EQ(c.folder, fixture("bert_mlm"));
    EXPECT_EQ(c.config_path, fixture("bert_mlm") + "/config.json");
  }
}

// The command line says what it initialized and dropped (stderr, as transformers warns), and
// the run trains.
TEST(BertCheckpoints, TrainFromAPretrainingFolderSaysWhatItInitialized) {
  const PretrainingFile f;
  fs::copy_file(fixture("bert_mlm") + "/config.json", f.tmp.path("config.json"));
  const test::CliResult r = test::run_snug(
      "train --model " + f.tmp.path("") + " --task sequence-classification " +
      "--num-labels 3 --data dummy --seq-len 8 --max-steps 2 --seed 7 --output-dir " +
      f.tmp.path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("newly initialized from --seed 7 (train them before use): "
                       "'classifier.weight', 'classifier.bias'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("of another head, not used: 'cls.predictions.bias'"), std::string::npos)
      << r.err;
}

}  // namespace bert_checkpoints_test
}  // namespace
}  // namespace snug
