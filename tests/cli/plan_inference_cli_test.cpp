// `snug plan --inference` (cli/plan_inference.h) as a user runs it: its --json peak and
// per-category maxima equal a real cpu generation's to the byte (the model built as `snug
// generate` builds it, the same generate_batch), for a GPT-2 and a Llama shape (GQA), greedy with
// 1 and 3 prompts, 2 beams, 16-bit weights and cache (--bf16, --fp16, --bf16-full, LoRA adapters
// on a bf16 base), fp32 weights with bf16 compute copies (--torch-dtype float32 --bf16) and
// --load-in-4bit; the printed weights and KV cache formulas; the JSON keys;
// --find-max-seq-len/--find-max-batch answers that fit where one more does not; and the refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <wordexp.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/device.h"
#include "generate/generate.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "plan/inference_plan.h"
#include "support/run_cli.h"
#include "support/training_flags.h"
#include "train/model_setup.h"

namespace snug::test {
namespace {
namespace plan_inference_cli_test {

using ::testing::HasSubstr;

// `line` (training flags) parsed as `snug generate` and `snug plan` parse them.
TrainingArguments parse(const std::string& line) {
  return parse_training_line(line);
}

// A real generation on cpu: the model as `snug generate` builds it, prompts of varied tokens,
// no eos (so it runs to max_new_tokens, as the plan does).
MemoryStats real_generation(const TrainingArguments& args, const InferenceShape& s) {
  Device dev(cpu_backend());
  const ModelConfig cfg = args.model_config();
  auto model = create_model(cfg, dev, args.generation_param_dtype(), args.weight_quant());
  load_initial_weights(*model, args, cfg);
  prepare_generation(*model, args);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < s.batch; ++b) {
    std::vector<int32_t> p;
    for (int64_t t = 0; t < s.prompt_tokens; ++t)
      p.push_back(static_cast<int32_t>((b * 31 + t * 7 + 3) % cfg.shape.vocab_size));
    prompts.push_back(p);
  }
  GenerationConfig g;
  g.max_new_tokens = s.max_new_tokens;
  g.num_beams = s.num_beams;
  const BatchGenerationResult r = generate_batch(*model, prompts, g);
  EXPECT_EQ(r.sequences[0].tokens.size(), static_cast<size_t>(s.max_new_tokens));
  return dev.pool().stats();
}

struct Case {
  std::string model;  // training flags of the model
  int64_t batch, beams;
  int64_t kv_width = 0;  // kv heads x head_dim: gpt2-tiny 4 x 32, llama-tiny 2 x 32 (GQA)
  int64_t kv_bytes = 4;  // per cache element: 2 when the model computes in 16 bits
};

TEST(PlanInferenceCli, PeakEqualsARealGenerationsPeakToTheByte) {
  TempDir tmp;
  const std::vector<Case> cases = {
      {"--model gpt2-tiny", 1, 1, 128},
      {"--model gpt2-tiny", 3, 1, 128},
      {"--model gpt2-tiny", 2, 2, 128},
      {"--model gpt2-tiny --bf16", 3, 1, 128, 2},
      {"--model gpt2-tiny --fp16", 2, 2, 128, 2},
      {"--model gpt2-tiny --torch-dtype float32 --bf16", 2, 1, 128, 2},
      {"--model gpt2-tiny --load-in-4bit", 2, 1, 128},
      {"--model llama-tiny", 1, 1, 64},
      {"--model llama-tiny", 3, 1, 64},
      {"--model llama-tiny", 2, 2, 64},
      {"--model llama-tiny --bf16", 2, 2, 64, 2},
      {"--model llama-tiny --bf16-full", 1, 1, 64, 2},
      {"--model llama-tiny --torch-dtype float16", 2, 1, 64, 2},
      {"--model llama-tiny --bf16 --lora-r 4 --target-modules all-linear", 2, 2, 64, 2},
      {"--model llama-tiny --load-in-4bit --bnb-4bit-compute-dtype bf16", 3, 1, 64},
      {"--model llama-tiny --bf16 --load-in-4bit --bnb-4bit-compute-dtype bf16", 2, 1, 64, 2},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string shape =
        " --per-device-eval-batch-size " + std::to_string(c.batch) + " --seq-len 24";
    SCOPED_TRACE(c.model + shape + " --num-beams " + std::to_string(c.beams));
    const std::string path = tmp.path("plan" + std::to_string(i++) + ".json");
    const CliResult r =
        run_snug("plan --inference " + c.model + shape + " --max-new-tokens 6 --num-beams " +
                     std::to_string(c.beams) + " --json " + path,
                 120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = read_json(path);
    const TrainingArguments args = parse(c.model + shape);
    const InferenceShape s = inference_shape(args, 6, c.beams);
    const MemoryStats real = real_generation(args, s);
    const nlohmann::json want = cli::dry_run_memory_json(real);
    EXPECT_EQ(j["memory"]["peak_bytes"], want["peak_bytes"]);
    EXPECT_EQ(j["memory"]["max_by_category"], want["max_by_category"]);
    EXPECT_EQ(j["memory"]["peak_by_category"], want["peak_by_category"]);
    EXPECT_EQ(j["inference"]["batch"], c.batch);
    EXPECT_EQ(j["inference"]["prompt_tokens"], 18);
    EXPECT_EQ(j["inference"]["max_new_tokens"], 6);
    EXPECT_EQ(j["inference"]["num_beams"], c.beams);
    // 2 x rows x 4 layers x (kv heads x head_dim) x 24 positions x 4 (or 2) bytes
    EXPECT_EQ(j["inference"]["kv_cache_bytes"],
              2 * c.batch * c.beams * 4 * c.kv_width * 24 * c.kv_bytes);
    EXPECT_EQ(j["inference"]["kv_cache"]["bytes_per_element"], c.kv_bytes);
  }
}

TEST(PlanInferenceCli, PrintsTheFormulasAndWritesTheTrainingPlansKeys) {
  TempDir tmp;
  const std::string path = tmp.path("plan.json");
  const CliResult r = run_snug(
      "plan --inference --model gpt2-124m --bf16 --per-device-eval-batch-size 4 --seq-len 1024 "
      "--max-new-tokens 128 --device-memory 2GB --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 2 x 4 x 12 x 12 x 64 x 1024 x 2: the cache in the model's bf16
  EXPECT_THAT(r.out, HasSubstr("2 x 4 (batch) x 12 (layers) x 12 (kv heads) x 64 (head_dim) x "
                               "1024 (context) x 2 (bytes, bf16) = 150994944 bytes"));
  // bf16 weights, no fp32 master: 2 x 124,439,808 bytes.
  EXPECT_THAT(r.out, HasSubstr("2 x 124.44M (bf16) = 248879616 bytes, 2.00 bytes per parameter"));
  EXPECT_THAT(r.out, HasSubstr("bf16 weights and KV cache"));
  EXPECT_THAT(r.out, HasSubstr("batch 4 x (prompt 896 + 128 new tokens = context 1024)"));
  EXPECT_THAT(r.out, HasSubstr("2GB"));
  const nlohmann::json j = read_json(path);
  for (const char* key : {"config", "memory", "devices", "what_if", "inference"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["inference"]["kv_cache_bytes"], 150994944);
  EXPECT_EQ(j["inference"]["kv_cache"]["bytes_per_element"], 2);
  EXPECT_EQ(j["inference"]["kv_cache"]["dtype"], "bf16");
  EXPECT_EQ(j["inference"]["param_dtype"], "bf16");
  EXPECT_EQ(j["inference"]["compute_copy_params"], 0);
  EXPECT_EQ(j["inference"]["context"], 1024);
  EXPECT_EQ(j["memory"]["max_by_category"]["kv_cache"], 150994944);
  EXPECT_EQ(j["memory"]["max_by_category"]["weights"], 2 * 124439808);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["need_bytes"], j["memory"]["peak_bytes"]);

  // fp32 weights with bf16 autocast (the mixed precision of training): 4 + 2 bytes per GEMM
  // weight, and still a bf16 cache (autocast's projections are bf16).
  const CliResult m = run_snug(
      "plan --inference --model gpt2-124m --torch-dtype float32 --bf16 "
      "--per-device-eval-batch-size 4 --seq-len 1024 --max-new-tokens 128");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_THAT(m.out, HasSubstr("4 x 124.44M (fp32 master) + 2 x 123.53M (bf16 compute copies of "
                               "the GEMM weights)"));
  EXPECT_THAT(m.out, HasSubstr("bf16 mixed precision (fp32 weights + bf16 compute copies"));
  EXPECT_THAT(m.out, HasSubstr("x 2 (bytes, bf16) = 150994944 bytes"));
  // fp32: 4 bytes, an fp32 cache.
  const CliResult f = run_snug(
      "plan --inference --model gpt2-124m --per-device-eval-batch-size 4 --seq-len 1024 "
      "--max-new-tokens 128");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.out, HasSubstr("4 x 124.44M (fp32) = 497759232 bytes, 4.00 bytes per parameter"));
  EXPECT_THAT(f.out, HasSubstr("x 4 (bytes, fp32) = 301989888 bytes"));
}

// Issue 26, acceptance 5: generation in bf16 is 2 bytes per parameter of weights and a 16-bit
// cache, as a transformers model loaded with torch_dtype=bfloat16 holds them.
TEST(PlanInferenceCli, Llama7bInBf16IsTwoBytesPerParameterAndASixteenBitCache) {
  TempDir tmp;
  const std::string path = tmp.path("plan.json");
  const CliResult r = run_snug(
      "plan --inference --bf16 --model llama-7b --per-device-eval-batch-size 4 --seq-len 2048 "
      "--max-new-tokens 256 --device-memory rtx4090-24gb --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t P = 6738415616;  // Llama-2-7b
  EXPECT_THAT(r.out, HasSubstr("2 x 6738.42M (bf16) = " + std::to_string(2 * P) +
                               " bytes, 2.00 bytes per parameter"));
  // 2 x 4 x 32 x 32 x 128 x 2048 x 2
  EXPECT_THAT(r.out, HasSubstr("x 2048 (context) x 2 (bytes, bf16) = 4294967296 bytes"));
  const nlohmann::json j = read_json(path);
  EXPECT_EQ(j["memory"]["max_by_category"]["weights"], 2 * P);
  EXPECT_EQ(j["memory"]["peak_by_category"]["weights"], 2 * P);
  EXPECT_EQ(j["memory"]["max_by_category"]["kv_cache"], 4294967296LL);
  EXPECT_EQ(j["inference"]["param_dtype"], "bf16");
}

TEST(PlanInferenceCli, FindMaxAnswersFitAndOneMoreDoesNot) {
  // llama-tiny (3.2 MB of fp32 weights, 2 KB of cache per row and position) within 7 MB:
  // 16 prompts reach it before the model's 256 positions.
  TempDir tmp;
  const std::string path = tmp.path("find.json");
  const CliResult r = run_snug(
      "plan --inference --model llama-tiny --max-new-tokens 16 --per-device-eval-batch-size 16 "
      "--seq-len 64 --device-memory 7MB --find-max-seq-len --find-max-batch --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(path);
  const int64_t capacity = j["max_seq_len_search"]["capacity_bytes"];
  auto peak_of = [&](const std::string& flags) {
    const std::string p = tmp.path("probe.json");
    const CliResult pr = run_snug("plan --inference --model llama-tiny --max-new-tokens 16 " +
                                  flags + " --json " + p);
    EXPECT_EQ(pr.exit_code, 0) << pr.err;
    return read_json(p)["memory"]["peak_bytes"].get<int64_t>();
  };
  const int64_t seq = j["max_seq_len"];
  ASSERT_GT(seq, 16);
  ASSERT_LT(seq, 256) << "the answer must be below n_positions for this check";
  EXPECT_EQ(j["max_seq_len_search"]["above"], seq + 1);
  EXPECT_LE(peak_of("--per-device-eval-batch-size 16 --seq-len " + std::to_string(seq)), capacity);
  EXPECT_GT(peak_of("--per-device-eval-batch-size 16 --seq-len " + std::to_string(seq + 1)),
            capacity);
  const int64_t batch = j["max_batch"];
  ASSERT_GT(batch, 0);
  EXPECT_LE(peak_of("--seq-len 64 --per-device-eval-batch-size " + std::to_string(batch)),
            capacity);
  EXPECT_GT(peak_of("--seq-len 64 --per-device-eval-batch-size " + std::to_string(batch + 1)),
            capacity);
  EXPECT_THAT(r.out, HasSubstr("largest --seq-len (prompt + 16 new tokens) that fits 7MB: " +
                               std::to_string(seq)));
}

TEST(PlanInferenceCli, RefusalsNameTheProblem) {
  CliResult r = run_snug("plan --inference --model bert-tiny --seq-len 32 --max-new-tokens 8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("bert-tiny (bert) cannot generate"));
  r = run_snug("plan --inference --seq-len 64 --max-new-tokens 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--seq-len 64 is the whole context"));
  EXPECT_THAT(r.err, HasSubstr("leaves the prompt 0 tokens"));
  r = run_snug("plan --max-new-tokens 8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--inference"));
  r = run_snug("plan --inference --advise --device-memory 1GB");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--advise searches training configurations"));
}

}  // namespace plan_inference_cli_test
}  // namespace
}  // namespace snug::test
