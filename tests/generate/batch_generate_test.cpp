// Batched generation (generate/generate.h generate_batch) on the golden GPT-2 of
// tests/fixtures/generate: B prompts of one length give, row by row, what each prompt gives alone
// (greedy with rows stopping at eos at different steps, repetition penalty, and beam search in
// every early_stopping mode, whose single-prompt tokens equal transformers'); a batch is one
// cache of B (x beams) rows; and the errors. Plus plan --inference's library side
// (plan/inference_plan.h): the KV cache is seed 004's formula to the byte for a batch, beams and
// GQA, --bf16 holds the seeds' fp32 + 16-bit weights, and the refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "generate/generate.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "plan/inference_plan.h"

namespace snug {
namespace {
namespace batch_generate_test {

const std::string kDir = std::string(SNUG_TEST_DATA_DIR) + "/generate/gpt2";

std::vector<std::vector<int32_t>> golden_prompts_of_length(size_t n) {
  std::ifstream f(kDir + "/expected.json");
  const nlohmann::json e = nlohmann::json::parse(f);
  // The golden prompts (5, 9 and 3 tokens), cut or extended to n tokens.
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : e["prompts"]) {
    std::vector<int32_t> v = p.get<std::vector<int32_t>>();
    for (size_t i = v.size(); i < n; ++i) v.push_back(static_cast<int32_t>((11 + 13 * i) % 96 + 1));
    v.resize(n);
    out.push_back(v);
  }
  return out;
}

// Row b of generate_batch equals generate() of prompt b alone, and the cache has rows x context.
void expect_rows_equal_alone(Model& m, const std::vector<std::vector<int32_t>>& prompts,
                             const GenerationConfig& g) {
  std::vector<std::vector<int32_t>> streamed(prompts.size());
  const BatchGenerationResult r = generate_batch(
      m, prompts, g, [&](int64_t b, int32_t t) { streamed[static_cast<size_t>(b)].push_back(t); });
  ASSERT_EQ(r.sequences.size(), prompts.size());
  const int64_t rows = static_cast<int64_t>(prompts.size()) * g.num_beams;
  // 2 x rows x layers x heads x head_dim x (prompt + new) x 4 bytes
  EXPECT_EQ(r.kv_cache_bytes, 2 * rows * 2 * 4 * 8 *
                                  (static_cast<int64_t>(prompts[0].size()) + g.max_new_tokens) * 4);
  for (size_t b = 0; b < prompts.size(); ++b) {
    const GenerationResult alone = generate(m, prompts[b], g);
    EXPECT_EQ(r.sequences[b].tokens, alone.tokens) << "row " << b;
    EXPECT_EQ(r.sequences[b].stopped_at_eos, alone.stopped_at_eos) << "row " << b;
    EXPECT_EQ(streamed[b], alone.tokens) << "row " << b;
  }
}

class BatchGenerate : public ::testing::Test {
 protected:
  BatchGenerate() : m_(create_model(resolve_model(kDir + "/config.json"), dev_)) {
    load_model_weights(*m_, kDir + "/model.safetensors");
  }
  Device dev_{cpu_backend()};
  std::unique_ptr<Model> m_;
};

TEST_F(BatchGenerate, GreedyRowsEqualEachPromptAlone) {
  GenerationConfig g;
  g.max_new_tokens = 14;
  expect_rows_equal_alone(*m_, golden_prompts_of_length(5), g);
  // Rows that reach eos at different steps: the finished ones get the pad token while the others
  // go on (an eos that some row picks: token 64 is greedy_eos's repeated token of the golden file).
  g.eos_token_ids = {64, 31};
  const auto prompts = golden_prompts_of_length(9);
  bool some_stopped = false, some_ran_on = false;
  const BatchGenerationResult r = generate_batch(*m_, prompts, g);
  for (const GeneratedSequence& s : r.sequences) {
    some_stopped = some_stopped || s.stopped_at_eos;
    some_ran_on = some_ran_on || static_cast<int64_t>(s.tokens.size()) > 1;
  }
  EXPECT_TRUE(some_stopped);
  EXPECT_TRUE(some_ran_on);
  expect_rows_equal_alone(*m_, prompts, g);
  g = {};
  g.max_new_tokens = 10;
  g.repetition_penalty = 1.7;
  expect_rows_equal_alone(*m_, golden_prompts_of_length(4), g);
}

TEST_F(BatchGenerate, BeamSearchRowsEqualEachPromptAlone) {
  // The golden beam configurations (tests/golden/gen_generate_golden.py), on 3 prompts at once.
  GenerationConfig g;
  g.max_new_tokens = 12;
  g.num_beams = 3;
  g.eos_token_ids = {64};
  expect_rows_equal_alone(*m_, golden_prompts_of_length(5), g);
  g.early_stopping = EarlyStopping::always;
  expect_rows_equal_alone(*m_, golden_prompts_of_length(3), g);
  g = {};
  g.max_new_tokens = 10;
  g.num_beams = 4;
  g.eos_token_ids = {35, 89};
  g.length_penalty = 2.0;
  expect_rows_equal_alone(*m_, golden_prompts_of_length(9), g);
  g = {};
  g.max_new_tokens = 8;
  g.num_beams = 2;
  g.eos_token_ids = {40};
  g.early_stopping = EarlyStopping::never;
  g.length_penalty = 0.5;
  expect_rows_equal_alone(*m_, golden_prompts_of_length(5), g);
}

TEST_F(BatchGenerate, PromptsOfDifferentLengthsAreRefused) {
  GenerationConfig g;
  try {
    generate_batch(*m_, {{1, 2, 3}, {4, 5}}, g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a batch of prompts of 3 and 2 tokens"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(generate_batch(*m_, {}, g), Error);
}

TEST(InferencePlan, KvCacheIsTheSeedFormulaForABatchBeamsAndGqa) {
  for (const char* model : {"gpt2-124m", "llama-70b", "mistral-7b"}) {
    SCOPED_TRACE(model);
    TrainingArguments a;
    a.model = model;
    const ModelConfig cfg = a.model_config();
    // llama-70b: 80 layers, 8 kv heads of 128; mistral-7b: 32 layers, 8 of 128; gpt2: 12 x 12 x 64.
    const int64_t layers = cfg.shape.n_layer;
    const int64_t kv_heads = std::string(model) == "gpt2-124m" ? 12 : 8;
    const int64_t head_dim = std::string(model) == "gpt2-124m" ? 64 : 128;
    for (const int64_t beams : {1, 3}) {
      a.per_device_eval_batch_size = 4;
      a.seq_len = 100;
      const InferenceShape s = inference_shape(a, 36, beams);
      EXPECT_EQ(s.prompt_tokens, 64);
      const InferencePlan p = inference_dry_run(a, s);
      const int64_t want = 2 * (4 * beams) * layers * kv_heads * head_dim * 100 * 4;
      EXPECT_EQ(p.kv_cache_bytes, want);
      EXPECT_EQ(p.kv.layers, layers);
      EXPECT_EQ(p.kv.kv_heads, kv_heads);
      EXPECT_EQ(p.kv.head_dim, head_dim);
      // The cache category: the cache itself, and while beam search reorders it one layer's
      // fresh key (or value) tensor beside it.
      const int64_t layer_tensor = want / (2 * layers);
      EXPECT_EQ(p.memory.max_by_category[static_cast<size_t>(Category::kv_cache)],
                beams == 1 ? want : want + layer_tensor);
      EXPECT_EQ(p.forwards, 36);
      EXPECT_NE(kv_cache_formula(s, p.kv).find(std::to_string(want) + " bytes"), std::string::npos);
    }
  }
}

TEST(InferencePlan, MixedPrecisionHoldsFp32WeightsAndTheirSixteenBitCopies) {
  TrainingArguments a;
  a.model = "llama-7b";
  a.per_device_eval_batch_size = 1;
  a.seq_len = 128;
  const InferenceShape s = inference_shape(a, 64, 1);
  const InferencePlan fp32 = inference_dry_run(a, s);
  a.bf16 = true;
  a.torch_dtype = "float32";  // fp32 weights under bf16 autocast
  const InferencePlan bf16 = inference_dry_run(a, s);
  const auto weights = [](const InferencePlan& p) {
    return p.memory.max_by_category[static_cast<size_t>(Category::weights)];
  };
  EXPECT_EQ(fp32.params, 6738415616);  // Llama-2-7b
  EXPECT_EQ(weights(fp32), 4 * fp32.params);
  // Every GEMM weight (the layers' Linears and the head; not the embedding table, which is looked
  // up, nor the norms): 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 32000 x 4096.
  EXPECT_EQ(bf16.compute_copy_params,
            32 * (4 * 4096LL * 4096 + 3 * 4096LL * 11008) + 32000 * 4096LL);
  EXPECT_EQ(weights(bf16), 4 * bf16.params + 2 * bf16.compute_copy_params);
  EXPECT_NE(weights_formula(a, bf16).find("5.96 bytes per parameter"), std::string::npos)
      << weights_formula(a, bf16);
  // The copies live for the whole generation, so they are part of the peak.
  EXPECT_EQ(bf16.memory.peak_by_category[static_cast<size_t>(Category::weights)], weights(bf16));
}

// Issue 26 point 5: generation in 16 bits (--bf16, --bf16-full, --fp16, --torch-dtype) holds the
// weights in that dtype, 2 bytes per parameter with no fp32 master and no compute copy, and the
// KV cache in it: 2 bytes per element.
TEST(InferencePlan, SixteenBitGenerationHoldsTwoBytesPerParameterAndASixteenBitCache) {
  const auto weights = [](const InferencePlan& p) {
    return p.memory.max_by_category[static_cast<size_t>(Category::weights)];
  };
  const auto kv = [](const InferencePlan& p) {
    return p.memory.max_by_category[static_cast<size_t>(Category::kv_cache)];
  };
  const int64_t P = 6738415616;  // Llama-2-7b
  // 2 x 1 x 32 layers x 32 kv heads x 128 x 128 positions
  const int64_t kv_elems = 2LL * 1 * 32 * 32 * 128 * 128;
  struct Flags {
    bool bf16, bf16_full, fp16;
    std::string torch_dtype;
    DType dtype;
  };
  for (const Flags& f :
       {Flags{true, false, false, "", DType::bf16}, Flags{false, true, false, "", DType::bf16},
        Flags{false, false, true, "", DType::f16},
        Flags{false, false, false, "bfloat16", DType::bf16},
        Flags{false, false, false, "float16", DType::f16}}) {
    TrainingArguments a;
    a.model = "llama-7b";
    a.per_device_eval_batch_size = 1;
    a.seq_len = 128;
    a.bf16 = f.bf16;
    a.bf16_full = f.bf16_full;
    a.fp16 = f.fp16;
    a.torch_dtype = f.torch_dtype;
    SCOPED_TRACE(dtype_name(f.dtype) + std::string(" ") + f.torch_dtype);
    const InferencePlan p = inference_dry_run(a, inference_shape(a, 64, 1));
    EXPECT_EQ(p.params, P);
    EXPECT_EQ(p.half_params, P);
    EXPECT_EQ(p.half_dtype, f.dtype);
    EXPECT_EQ(p.f32_params, 0);
    EXPECT_EQ(p.compute_copy_params, 0);
    EXPECT_EQ(weights(p), 2 * P);
    EXPECT_EQ(p.memory.peak_by_category[static_cast<size_t>(Category::weights)], 2 * P);
    EXPECT_EQ(p.kv.dtype, f.dtype);
    EXPECT_EQ(p.kv_cache_bytes, 2 * kv_elems);
    EXPECT_EQ(kv(p), 2 * kv_elems);
    const std::string half = f.dtype == DType::f16 ? "fp16" : "bf16";
    EXPECT_EQ(weights_formula(a, p), "2 x 6738.42M (" + half + ") = " + std::to_string(2 * P) +
                                         " bytes, 2.00 bytes per parameter");
    EXPECT_NE(kv_cache_formula(inference_shape(a, 64, 1), p.kv).find("x 2 (bytes, " + half + ")"),
              std::string::npos);
    EXPECT_EQ(inference_json(inference_shape(a, 64, 1), p)["kv_cache"]["bytes_per_element"], 2);
  }
  // LoRA adapters on the bf16 base stay fp32: 2 bytes per base parameter, 4 per adapter one.
  TrainingArguments a;
  a.model = "llama-7b";
  a.per_device_eval_batch_size = 1;
  a.seq_len = 128;
  a.bf16 = true;
  a.lora_r = 8;  // PEFT's default targets for llama: q_proj, v_proj
  const InferencePlan p = inference_dry_run(a, inference_shape(a, 64, 1));
  const int64_t adapters = 32 * 2 * (8 * 4096 + 4096 * 8);
  EXPECT_EQ(p.f32_params, adapters);
  EXPECT_EQ(p.half_params, P);
  EXPECT_EQ(weights(p), 2 * P + 4 * adapters);
  EXPECT_NE(weights_formula(a, p).find("2 x 6738.42M (bf16) + 4 x 4.19M (fp32 LoRA adapters)"),
            std::string::npos)
      << weights_formula(a, p);
}

TEST(InferencePlan, RefusesAnEmptyPromptAndAnEncoder) {
  TrainingArguments a;
  a.seq_len = 64;
  try {
    inference_shape(a, 64, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("leaves the prompt 0 tokens"), std::string::npos)
        << e.what();
  }
  a.model = "bert-tiny";
  a.seq_len = 32;
  try {
    inference_dry_run(a, inference_shape(a, 8, 1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert-tiny (bert) cannot generate"), std::string::npos)
        << e.what();
  }
}

}  // namespace batch_generate_test
}  // namespace
}  // namespace snug
