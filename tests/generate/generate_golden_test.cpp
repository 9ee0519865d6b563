// Generation (generate/generate.h) against transformers' generate() on a small random GPT-2
// (tests/golden/gen_generate_golden.py): greedy, repetition penalty, eos, and beam search with
// each early_stopping mode and length penalties give the same tokens. Plus what transformers
// cannot tell us: a generation on meta allocates exactly what it does on cpu (plan --inference's
// contract), the processors' arithmetic, sampling's determinism, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "generate/generate.h"
#include "generate/logits_process.h"
#include "kernels/backends.h"
#include "models/registry.h"

namespace snug {
namespace {
namespace generate_golden_test {

const std::string kDir = std::string(SNUG_TEST_DATA_DIR) + "/generate/gpt2";

nlohmann::json expected() {
  std::ifstream f(kDir + "/expected.json");
  return nlohmann::json::parse(f);
}

GenerationConfig config_of(const nlohmann::json& c) {
  GenerationConfig g;
  g.max_new_tokens = c["max_new_tokens"];
  g.eos_token_ids = c["eos_token_ids"].get<std::vector<int32_t>>();
  g.num_beams = c["num_beams"];
  g.repetition_penalty = c["repetition_penalty"];
  g.length_penalty = c["length_penalty"];
  const std::string es = c["early_stopping"];
  g.early_stopping = es == "always"  ? EarlyStopping::always
                     : es == "never" ? EarlyStopping::never
                                     : EarlyStopping::heuristic;
  return g;
}

TEST(GenerateGolden, TokensEqualTransformersGenerate) {
  Device dev(cpu_backend());
  auto m = create_model(resolve_model(kDir + "/config.json"), dev);
  load_model_weights(*m, kDir + "/model.safetensors");
  const nlohmann::json e = expected();
  ASSERT_EQ(e["cases"].size(), 7u);
  for (const auto& c : e["cases"]) {
    const auto prompt = e["prompts"][c["prompt"].get<size_t>()].get<std::vector<int32_t>>();
    std::vector<int32_t> streamed;
    const GenerationResult r =
        generate(*m, prompt, config_of(c), [&](int32_t t) { streamed.push_back(t); });
    const auto want = c["new_tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(r.tokens, want) << c["name"];
    EXPECT_EQ(streamed, want) << c["name"];
    EXPECT_EQ(dev.pool().stats().live[static_cast<size_t>(Category::kv_cache)], 0) << c["name"];
  }
}

TEST(GenerateGolden, MetaRunAllocatesWhatTheCpuRunDoes) {
  // No eos, so the cpu run goes to max_new_tokens as the dry run does.
  for (const int64_t beams : {1, 3}) {
    Device cpu(cpu_backend()), meta(meta_backend());
    const ModelConfig cfg = resolve_model(kDir + "/config.json");
    auto a = create_model(cfg, cpu);
    auto b = create_model(cfg, meta);
    load_model_weights(*a, kDir + "/model.safetensors");
    GenerationConfig g;
    g.max_new_tokens = 9;
    g.num_beams = beams;
    const std::vector<int32_t> prompt{5, 6, 7, 8, 9, 10};
    const GenerationResult ra = generate(*a, prompt, g);
    const GenerationResult rb = generate(*b, prompt, g);
    EXPECT_EQ(ra.forwards, rb.forwards);
    EXPECT_EQ(ra.kv_cache_bytes, rb.kv_cache_bytes);
    // 2 x beams x layers x heads x head_dim x (prompt + new) x 4 bytes
    EXPECT_EQ(ra.kv_cache_bytes, 2 * beams * 2 * 4 * 8 * (6 + 9) * 4);
    const MemoryStats sa = cpu.pool().stats(), sb = meta.pool().stats();
    EXPECT_EQ(sa.peak_total, sb.peak_total) << "beams " << beams;
    EXPECT_EQ(sa.peak_by_category, sb.peak_by_category) << "beams " << beams;
    EXPECT_EQ(sa.peak_by_category[static_cast<size_t>(Category::kv_cache)], ra.kv_cache_bytes);
  }
}

TEST(LogitsProcess, EachProcessorAsTransformersComputesIt) {
  std::vector<float> s{2.0f, -1.0f, 0.5f, 3.0f};
  const std::vector<int32_t> seen{0, 1, 1};
  apply_repetition_penalty(s, seen, 2.0);
  EXPECT_EQ(s, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}));
  apply_temperature(s, 0.5);
  EXPECT_EQ(s, (std::vector<float>{2.0f, -4.0f, 1.0f, 6.0f}));
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> k = s;
  apply_top_k(k, 2);
  EXPECT_EQ(k, (std::vector<float>{2.0f, -inf, -inf, 6.0f}));
  // softmax(2, -4, 1, 6): p(6) = 0.9756..., so top_p 0.9 keeps only it; 0.99 keeps 6 and 2.
  std::vector<float> p = s;
  apply_top_p(p, 0.9);
  EXPECT_EQ(p, (std::vector<float>{-inf, -inf, -inf, 6.0f}));
  p = s;
  apply_top_p(p, 0.99);
  EXPECT_EQ(p, (std::vector<float>{2.0f, -inf, -inf, 6.0f}));
  std::vector<float> l{1.0f, 2.0f, 3.0f};
  log_softmax(l);
  double z = 0;
  for (float x : l) z += std::exp(static_cast<double>(x));
  EXPECT_NEAR(z, 1.0, 1e-6);
  EXPECT_NEAR(l[2] - l[1], 1.0f, 1e-6f);
  EXPECT_EQ(argmax(std::vector<float>{1, 5, 5, 2}), 1);
  EXPECT_EQ(sample_from(std::vector<float>{-inf, 0.0f, -inf}, 0.999), 1);
  EXPECT_EQ(sample_from(std::vector<float>{0.0f, 0.0f}, 0.25), 0);
  EXPECT_EQ(sample_from(std::vector<float>{0.0f, 0.0f}, 0.75), 1);
}

TEST(GenerateGolden, SamplingIsDeterministicPerSeedAndRespectsTopK) {
  Device dev(cpu_backend());
  auto m = create_model(resolve_model(kDir + "/config.json"), dev);
  load_model_weights(*m, kDir + "/model.safetensors");
  GenerationConfig g;
  g.do_sample = true;
  g.max_new_tokens = 20;
  g.top_k = 1;  // top_k 1 is greedy whatever the draws
  const std::vector<int32_t> prompt{44, 35, 67, 16, 36};
  GenerationConfig greedy;
  greedy.max_new_tokens = 20;
  EXPECT_EQ(generate(*m, prompt, g).tokens, generate(*m, prompt, greedy).tokens);
  g.top_k = 0;
  g.temperature = 1.5;
  g.seed = 7;
  const auto a = generate(*m, prompt, g).tokens, b = generate(*m, prompt, g).tokens;
  EXPECT_EQ(a, b);
  g.seed = 8;
  EXPECT_NE(generate(*m, prompt, g).tokens, a);
}

TEST(GenerateGolden, BadRequestsAreClearErrors) {
  Device dev(cpu_backend());
  auto m = create_model(resolve_model(kDir + "/config.json"), dev);
  m->init_weights(1);
  auto message = [&](const GenerationConfig& g, std::vector<int32_t> prompt) {
    try {
      generate(*m, prompt, g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  GenerationConfig g;
  EXPECT_NE(message(g, {}).find("the prompt has no tokens"), std::string::npos);
  g.max_new_tokens = 60;  // 10 + 60 > 64 positions
  EXPECT_NE(message(g, std::vector<int32_t>(10, 1)).find("exceed the model's context of 64"),
            std::string::npos);
  g = {};
  g.top_p = 0;
  EXPECT_NE(message(g, {1}).find("--top-p"), std::string::npos);
  g = {};
  g.do_sample = true;
  g.num_beams = 2;
  EXPECT_NE(message(g, {1}).find("beam sampling"), std::string::npos);
  g = {};
  g.max_new_tokens = 4;
  EXPECT_NE(message(g, {1, 200}).find("token id 200"), std::string::npos);
}

}  // namespace generate_golden_test
}  // namespace
}  // namespace snug
