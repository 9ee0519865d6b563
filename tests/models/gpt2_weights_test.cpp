// Hugging Face-named GPT-2 weights (models/gpt2/gpt2_weights.h): a saved model loads back bit for
// bit into a differently initialized one, Hub spellings load, and every mismatch is one clear error
// naming the file and the tensor.
#include "models/gpt2/gpt2_weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "support/param_bytes.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace gpt2_weights_test {

using test::TempDir;

GPT2Config tiny() {
  return resolve_gpt2("gpt2-tiny");
}

// Writes the model's parameters under rename(name) (skipping names mapped to ""), plus extras.
void save_renamed(const GPT2& m, const std::string& path, std::string (*rename)(const std::string&),
                  const std::vector<std::pair<std::string, const Tensor*>>& extra = {}) {
  std::vector<std::pair<std::string, const Tensor*>> t;
  for (const Parameter* p : m.parameters()) {
    const std::string n = rename(p->name);
    if (!n.empty()) t.emplace_back(n, &p->value);
  }
  t.insert(t.end(), extra.begin(), extra.end());
  save_safetensors(path, t);
}

std::string load_error(GPT2& m, const std::string& path) {
  try {
    load_gpt2_weights(m, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gpt2Weights, SaveThenLoadRestoresEveryParameterExactly) {
  TempDir tmp;
  Device dev(cpu_backend());
  GPT2 a(tiny(), dev), b(tiny(), dev);
  a.init_weights(42);
  b.init_weights(7);
  ASSERT_FALSE(test::same_values(a, b));
  save_gpt2_weights(a, tmp.path("w.safetensors"), {{"seed", "42"}});
  load_gpt2_weights(b, tmp.path("w.safetensors"));
  EXPECT_TRUE(test::same_values(a, b));

  const SafetensorsFile f(tmp.path("w.safetensors"));
  EXPECT_EQ(f.names().size(), a.parameters().size());  // no lm_head.weight: tied
  const auto meta = f.metadata();
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("n_embd"), "128");
  EXPECT_EQ(meta.at("n_head"), "4");
  EXPECT_EQ(meta.at("n_layer"), "4");
  EXPECT_EQ(meta.at("vocab_size"), "256");
  EXPECT_EQ(meta.at("n_positions"), "256");
  EXPECT_EQ(meta.at("layer_norm_epsilon"), "9.99999975e-06");
  EXPECT_EQ(meta.at("seed"), "42");
  // Conv1D layout: c_fc is (in, out) = (C, 4C).
  EXPECT_EQ(f.info("transformer.h.0.mlp.c_fc.weight").shape, (std::vector<int64_t>{128, 512}));
}

TEST(Gpt2Weights, HubSpellingsLoad) {
  // The original gpt2 checkpoints: no "transformer." prefix, causal-mask buffers, a tied
  // lm_head.weight equal to wte.
  TempDir tmp;
  Device dev(cpu_backend());
  GPT2 a(tiny(), dev), b(tiny(), dev);
  a.init_weights(1);
  b.init_weights(2);
  const Tensor mask = Tensor::zeros({1, 1, 4, 4}, DType::f32, Category::temporary, dev);
  save_renamed(a, tmp.path("hub.safetensors"),
               [](const std::string& n) { return n.substr(std::string("transformer.").size()); },
               {{"h.0.attn.bias", &mask},
                {"h.0.attn.masked_bias", &mask},
                {"lm_head.weight", &a.find("transformer.wte.weight")->value}});
  load_gpt2_weights(b, tmp.path("hub.safetensors"));
  EXPECT_TRUE(test::same_values(a, b));
}

TEST(Gpt2Weights, MismatchesAreClearErrors) {
  TempDir tmp;
  Device dev(cpu_backend());
  GPT2 a(tiny(), dev), b(tiny(), dev);
  a.init_weights(1);

  save_renamed(a, tmp.path("missing.safetensors"), [](const std::string& n) {
    return n == "transformer.h.3.ln_2.bias" ? std::string() : n;
  });
  std::string msg = load_error(b, tmp.path("missing.safetensors"));
  EXPECT_NE(msg.find("no tensor 'transformer.h.3.ln_2.bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing.safetensors"), std::string::npos) << msg;

  const Tensor extra = Tensor::zeros({3}, DType::f32, Category::temporary, dev);
  save_renamed(a, tmp.path("extra.safetensors"), [](const std::string& n) { return n; },
               {{"transformer.h.9.mlp.c_fc.weight", &extra}});
  msg = load_error(b, tmp.path("extra.safetensors"));
  EXPECT_NE(msg.find("'transformer.h.9.mlp.c_fc.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not have"), std::string::npos) << msg;

  // A gpt2-124m-shaped file into gpt2-tiny: the first mismatching shape is named.
  GPT2Config wide = tiny();
  wide.n_embd = 64;
  wide.n_head = 2;
  GPT2 w(wide, dev);
  w.init_weights(1);
  save_gpt2_weights(w, tmp.path("shape.safetensors"));
  msg = load_error(b, tmp.path("shape.safetensors"));
  EXPECT_NE(msg.find("has shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs"), std::string::npos) << msg;

  const Tensor other = Tensor::zeros(a.find("transformer.wte.weight")->value.shape(), DType::f32,
                                     Category::temporary, dev);
  save_renamed(a, tmp.path("untied.safetensors"), [](const std::string& n) { return n; },
               {{"lm_head.weight", &other}});
  msg = load_error(b, tmp.path("untied.safetensors"));
  EXPECT_NE(msg.find("'lm_head.weight' differs"), std::string::npos) << msg;
}

TEST(Gpt2Weights, ExportInitThenTrainInitFromStartsFromThoseWeights) {
  TempDir tmp;
  const std::string flags =
      " --model gpt2-tiny --per-device-train-batch-size 2 --seq-len 16 --max-steps 3 --threads 1";
  auto cli = test::run_snug("export-init" + flags + " -o " + tmp.path("s7.safetensors") +
                            " --seed 7 --batches-out " + tmp.path("b.tok"));
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  // 3 steps x 1 micro-batch x 2 windows of 17 tokens, in the order the loader yields them.
  const auto windows = open_dataset(tmp.path("b.tok"), 256, 0);
  ASSERT_EQ(windows->size(), 3 * 2 * 17);
  const auto builtin = open_dataset("builtin", 256, 7);
  DataLoader loader(*builtin, 2, 16, 7);
  std::vector<int32_t> in(32), tg(32);
  for (int64_t step = 0; step < 3; ++step) {
    loader.next(in.data(), tg.data());
    for (int64_t b = 0; b < 2; ++b) {
      const std::vector<int32_t> w = read_tokens(*windows, (step * 2 + b) * 17, 17);
      EXPECT_EQ(std::vector<int32_t>(w.begin(), w.begin() + 16),
                std::vector<int32_t>(in.begin() + b * 16, in.begin() + (b + 1) * 16));
      EXPECT_EQ(std::vector<int32_t>(w.begin() + 1, w.end()),
                std::vector<int32_t>(tg.begin() + b * 16, tg.begin() + (b + 1) * 16));
    }
  }

  // Seed 7's weights under seed 42's data order differ from the plain seed-42 run.
  auto train = [&](const std::string& extra, const std::string& report) {
    auto r = test::run_snug("train" + flags + extra + " --report-json " + tmp.path(report));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream file(tmp.path(report));
    return nlohmann::json::parse(file);
  };
  const auto plain42 = train("", "a.json");
  const auto init7 = train(" --init-from " + tmp.path("s7.safetensors"), "b.json");
  EXPECT_NE(plain42["loss"][0].get<double>(), init7["loss"][0].get<double>());
  EXPECT_EQ(init7["config"]["init_from"], tmp.path("s7.safetensors"));

  // Exporting seed 42 and starting from it changes nothing, bit for bit.
  cli = test::run_snug("export-init" + flags + " -o " + tmp.path("s42.safetensors"));
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  const auto init42 = train(" --init-from " + tmp.path("s42.safetensors"), "c.json");
  EXPECT_EQ(plain42["loss"], init42["loss"]);
  ASSERT_EQ(init42["step_end_s"].size(), 3u);
  EXPECT_LT(init42["step_end_s"][0].get<double>(), init42["step_end_s"][2].get<double>());

  cli = test::run_snug("train" + flags + " --init-from " + tmp.path("nope.safetensors"));
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find("nope.safetensors"), std::string::npos) << cli.err;
  cli = test::run_snug("train" + flags + " --init-from " + tmp.path("s42.safetensors") +
                       " --resume-from " + tmp.path("ckpt"));
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find("cannot be combined"), std::string::npos) << cli.err;
  cli = test::run_snug("export-init" + flags);
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find("-o FILE.safetensors"), std::string::npos) << cli.err;
}

}  // namespace gpt2_weights_test
}  // namespace
}  // namespace snug
