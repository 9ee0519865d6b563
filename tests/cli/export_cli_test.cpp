// `snug export --adapter / --merge` on a LoRA run's checkpoint: PEFT's key names, shapes and
// adapter_config.json; merged weights that load with --init-from into a plain model and give
// the adapted model's logits (issue 6, acceptance 5); and one clear message per mistake.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_weights.h"
#include "quant/weight_quant.h"
#include "support/lora_run.h"
#include "support/random.h"

namespace snug::test {
namespace {
namespace export_cli_test {

using ::testing::HasSubstr;

// gpt2-tiny: C = 128, 4 layers, vocabulary 256. "c_proj" adapts attn.c_proj and mlp.c_proj.
std::string run_flags(const std::string& alpha = "8",
                      const std::string& targets = "c_attn,c_proj") {
  return "--model gpt2-tiny --lora-r 4 --lora-alpha " + alpha + " --target-modules " + targets +
         " --seed 7 --seq-len 32 --per-device-train-batch-size 2 --learning-rate 1e-2";
}
const std::string kRun = run_flags();

LoraConfig run_lora() {
  LoraConfig c;
  c.r = 4;
  c.alpha = 8;
  c.target_modules = {"c_attn", "c_proj"};
  return c;
}

// One 3-step LoRA run shared by the tests of this suite.
class ExportCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    checkpoint_ = new std::string(train_lora_checkpoint(kRun, 3, dir_->path("run")));
  }
  static void TearDownTestSuite() {
    delete checkpoint_;
    delete dir_;
  }
  static TempDir* dir_;
  static std::string* checkpoint_;
};
TempDir* ExportCli::dir_ = nullptr;
std::string* ExportCli::checkpoint_ = nullptr;

TEST_F(ExportCli, AdapterHasPeftKeysShapesValuesAndConfig) {
  const std::string out = dir_->path("adapter");
  // An output dir resolves to its latest checkpoint, as --resume-from does.
  const CliResult r =
      run_snug("export --adapter -o " + out + " --checkpoint " + dir_->path("run") + " " + kRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("12 LoRA modules, r=4"));
  EXPECT_THAT(r.out, HasSubstr("checkpoint-3"));

  const SafetensorsFile f(out + "/adapter_model.safetensors");
  const SafetensorsFile ckpt(*checkpoint_ + "/model.safetensors");
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  std::vector<std::string> want;
  const char* modules[3] = {"attn.c_attn", "attn.c_proj", "mlp.c_proj"};
  const Shape a_shape[3] = {{4, 128}, {4, 128}, {4, 512}};
  const Shape b_shape[3] = {{384, 4}, {128, 4}, {128, 4}};
  for (int l = 0; l < 4; ++l)
    for (int m = 0; m < 3; ++m) {
      const std::string name = "transformer.h." + std::to_string(l) + "." + modules[m];
      for (const char* ab : {".lora_A.weight", ".lora_B.weight"}) {
        const std::string key = "base_model.model." + name + ab;
        want.push_back(key);
        ASSERT_TRUE(f.contains(key)) << key;
        EXPECT_EQ(f.info(key).dtype, "F32");
        EXPECT_EQ(f.info(key).shape, ab[6] == 'A' ? a_shape[m] : b_shape[m]) << key;
        // The checkpoint's trained values, bit for bit; B has left zero.
        const std::vector<float> v = f.read_f32(key);
        EXPECT_EQ(v, ckpt.read_f32(name + ab)) << key;
        if (ab[6] == 'B') {
          EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](float x) { return x != 0.0f; })) << key;
        }
      }
    }
  EXPECT_EQ(f.names(), want);

  std::ifstream in(out + "/adapter_config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_EQ(j["r"], 4);
  EXPECT_TRUE(j["lora_alpha"].is_number_integer());
  EXPECT_EQ(j["lora_alpha"], 8);
  EXPECT_EQ(j["lora_dropout"], 0.0);
  EXPECT_EQ(j["target_modules"], nlohmann::json::array({"c_attn", "c_proj"}));
  EXPECT_EQ(j["use_rslora"], false);
  EXPECT_EQ(j["fan_in_fan_out"], true);
  EXPECT_EQ(j["bias"], "none");
  EXPECT_EQ(j["inference_mode"], true);
  EXPECT_EQ(j["init_lora_weights"], true);
  EXPECT_EQ(j["use_dora"], false);
  EXPECT_EQ(j["modules_to_save"], nullptr);
  EXPECT_EQ(j["base_model_name_or_path"], nullptr);
  EXPECT_EQ(j.size(), 41u);  // every field PEFT 0.21's LoraConfig writes
}

TEST_F(ExportCli, MergedWeightsLoadIntoAPlainModelAndGiveTheAdaptedLogits) {
  const std::string out = dir_->path("merged.safetensors");
  const CliResult r =
      run_snug("export --merge -o " + out + " --checkpoint " + *checkpoint_ + " " + kRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("12 LoRA modules merged"));

  Device cpu(cpu_backend());
  const GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  // The adapted model with the checkpoint's values, and a plain model from the merged file
  // through --init-from's loader (strict: it rejects any LoRA key or missing parameter).
  GPT2 adapted(cfg, cpu);
  adapted.init_weights(7);
  adapted.add_lora(run_lora(), 7);
  load_by_name(adapted, *checkpoint_ + "/model.safetensors");
  GPT2 plain(cfg, cpu);
  load_gpt2_weights(plain, out);
  GPT2 base(cfg, cpu);  // the frozen base alone
  base.init_weights(7);

  const int64_t B = 2, T = 32;
  const std::vector<int32_t> tokens = random_ints(B * T, 11, 0, 255);
  const std::vector<float> want = eval_logits(adapted, tokens, B, T);
  EXPECT_LE(max_abs_diff(eval_logits(plain, tokens, B, T), want), 1e-5);
  EXPECT_GT(max_abs_diff(eval_logits(base, tokens, B, T), want), 1e-3);  // the adapters matter

  // The file itself: GPT2LMHeadModel's names in order, the merged c_attn, untouched c_fc.
  const SafetensorsFile f(out);
  std::vector<std::string> names;
  for (const Parameter* p : base.parameters()) names.push_back(p->name);
  EXPECT_EQ(f.names(), names);
  EXPECT_EQ(f.metadata().at("n_layer"), "4");
  auto values = [&](const std::string& name) {
    const Parameter* p = base.find(name);
    return std::vector<float>(p->value.data<float>(), p->value.data<float>() + p->numel());
  };
  EXPECT_NE(f.read_f32("transformer.h.0.attn.c_attn.weight"),
            values("transformer.h.0.attn.c_attn.weight"));
  EXPECT_EQ(f.read_f32("transformer.h.0.mlp.c_fc.weight"),
            values("transformer.h.0.mlp.c_fc.weight"));

  // And `snug train --init-from` takes it.
  const CliResult t =
      run_snug("train --model gpt2-tiny --max-steps 1 --seq-len 32 --init-from " + out);
  EXPECT_EQ(t.exit_code, 0) << t.err;
}

// QLoRA-style base: the checkpoint holds no quantized weight, the export rebuilds the 4-bit base
// from the seed and writes it dequantized, adapters merged in.
TEST_F(ExportCli, MergedFromA4BitBaseGivesTheQuantizedModelsLogits) {
  const std::string flags = kRun + " --load-in-4bit --bnb-4bit-quant-type nf4";
  const std::string checkpoint = train_lora_checkpoint(flags, 2, dir_->path("q4"));
  const std::string out = dir_->path("q4-merged.safetensors");
  const CliResult r =
      run_snug("export --merge -o " + out + " --checkpoint " + checkpoint + " " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  Device cpu(cpu_backend());
  const GPT2Config cfg = resolve_gpt2("gpt2-tiny");
  WeightQuantConfig nf4;
  nf4.format = quant::Format::nf4;
  GPT2 adapted(cfg, cpu, DType::f32, nf4);
  adapted.init_weights(7);
  adapted.add_lora(run_lora(), 7);
  load_by_name(adapted, checkpoint + "/model.safetensors");
  GPT2 plain(cfg, cpu);
  load_gpt2_weights(plain, out);
  const int64_t B = 2, T = 32;
  const std::vector<int32_t> tokens = random_ints(B * T, 12, 0, 255);
  EXPECT_LE(max_abs_diff(eval_logits(plain, tokens, B, T), eval_logits(adapted, tokens, B, T)),
            1e-5);
  // A quantized weight without an adapter is written dequantized.
  const Parameter* fc = adapted.find("transformer.h.1.mlp.c_fc.weight");
  ASSERT_TRUE(fc->quantized());
  std::vector<float> dq(static_cast<size_t>(fc->numel()));
  adapted.read_values(*fc, dq.data());
  EXPECT_EQ(SafetensorsFile(out).read_f32(fc->name), dq);
}

TEST_F(ExportCli, WithoutCheckpointTheFreshAdaptersAreWritten) {
  const std::string out = dir_->path("fresh");
  const CliResult r = run_snug("export --adapter -o " + out + " " + kRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("freshly initialized adapters (seed 7)"));
  const SafetensorsFile f(out + "/adapter_model.safetensors");
  const std::vector<float> b =
      f.read_f32("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight");
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](float x) { return x == 0.0f; }));
}

TEST_F(ExportCli, MistakesGetOneClearMessage) {
  const std::string o = " -o " + dir_->path("x") + " ";
  // Command line: exactly one of --merge/--adapter, and -o (exit 2).
  CliResult r = run_snug("export --merge --adapter" + o + kRun);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--merge"));
  r = run_snug("export" + o + kRun);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--adapter"));
  r = run_snug("export --adapter " + kRun);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--output"));
  // No LoRA configured.
  r = run_snug("export --adapter" + o + "--model gpt2-tiny");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--lora-r"));
  // Flags that differ from the run's: named with both values.
  r = run_snug("export --merge" + o + "--checkpoint " + *checkpoint_ + " " + run_flags("16"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("trainer_state.json: the run was trained with --lora-alpha 8.0 "
                               "but this export has --lora-alpha 16.0"));
  r = run_snug("export --merge" + o + "--checkpoint " + *checkpoint_ + " " +
               run_flags("8", "c_attn"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--target-modules \"c_attn,c_proj\""));
  // No checkpoint there.
  r = run_snug("export --merge" + o + "--checkpoint " + dir_->path("nowhere") + " " + kRun);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--checkpoint " + dir_->path("nowhere") + ": no such directory"));
  r = run_snug("export --merge" + o + "--checkpoint " + dir_->path("") + " " + kRun);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--checkpoint "));
  EXPECT_THAT(r.err, HasSubstr("neither a checkpoint"));
}

}  // namespace export_cli_test
}  // namespace
}  // namespace snug::test
