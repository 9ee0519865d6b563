// `snug generate --adapter DIR` (peft/peft_adapter.h): the adapter `snug export --adapter` writes
// from a LoRA run's checkpoint, put back on the same base, decodes greedily to the very tokens
// `generate --checkpoint` of that run gives (plain LoRA, LoRA on a bf16 base, and QLoRA on a
// 4-bit base), and the base alone does not; the adapter's r/alpha/targets replace the LoRA flags
// (a conflicting one is refused by name); every bad adapter folder is one message naming the file
// and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "support/run_cli.h"

namespace snug {
namespace {
namespace generate_adapter_cli_test {

namespace fs = std::filesystem;
using test::CliResult;
using test::read_json;
using test::run_snug;
using test::TempDir;

const std::string kGen = " --prompt 'Once upon a time' --max-new-tokens 24 --threads 1";

// Trains `run` for 6 steps into tmp/out (checkpoint-6) and exports its adapter to tmp/adapter.
void train_and_export(const TempDir& tmp, const std::string& run) {
  CliResult r = run_snug("train " + run +
                             " --max-steps 6 --per-device-train-batch-size 4 --learning-rate 1e-2 "
                             "--threads 1 --save-steps 6 --output-dir " +
                             tmp.path("out"),
                         300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_snug(
      "export --adapter -o " + tmp.path("adapter") + " --checkpoint " + tmp.path("out") + " " + run,
      120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(GenerateAdapterCli, AdapterGivesTheCheckpointsGreedyTokens) {
  struct Case {
    const char* name;
    std::string run;   // the training run's flags
    std::string base;  // generate --adapter's: the base as the run loaded it, no LoRA flags
  };
  const Case cases[] = {
      {"lora",
       "--model gpt2-tiny --seed 5 --seq-len 32 --lora-r 4 --lora-alpha 8 "
       "--target-modules c_attn,c_fc --use-rslora",
       "--model gpt2-tiny --seed 5 --seq-len 32"},
      {"lora on a bf16 base",
       "--model gpt2-tiny --seed 5 --seq-len 32 --bf16-full --lora-r 4 --lora-alpha 8 "
       "--target-modules c_attn,c_fc",
       "--model gpt2-tiny --seed 5 --seq-len 32 --bf16-full"},
      {"qlora", "--model gpt2-tiny --seed 7 --seq-len 32 --qlora --target-modules all-linear",
       "--model gpt2-tiny --seed 7 --seq-len 32 --load-in-4bit --bnb-4bit-quant-type nf4 "
       "--bnb-4bit-use-double-quant --bnb-4bit-compute-dtype bf16"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir tmp;
    train_and_export(tmp, c.run);
    if (HasFatalFailure()) return;
    const CliResult ckpt =
        run_snug("generate --checkpoint " + tmp.path("out") + " " + c.run + kGen, 120);
    ASSERT_EQ(ckpt.exit_code, 0) << ckpt.err;
    const CliResult ad =
        run_snug("generate --adapter " + tmp.path("adapter") + " " + c.base + kGen, 120);
    ASSERT_EQ(ad.exit_code, 0) << ad.err;
    EXPECT_EQ(ad.out, ckpt.out);
    EXPECT_NE(ad.err.find("24 new tokens"), std::string::npos) << ad.err;
    EXPECT_NE(ad.err.find("from the adapter " + tmp.path("adapter")), std::string::npos) << ad.err;
    // The adapters matter: the base alone continues differently.
    const CliResult base =
        run_snug("generate " + c.base +
                     (c.run.find("--qlora") != std::string::npos ? " --lora-r 8" : "") + kGen,
                 120);
    ASSERT_EQ(base.exit_code, 0) << base.err;
    EXPECT_NE(base.out, ad.out);
  }
}

TEST(GenerateAdapterCli, TheAdaptersLoraSettingsReplaceTheFlags) {
  TempDir tmp;
  const std::string run =
      "--model gpt2-tiny --seed 5 --seq-len 32 --lora-r 4 --lora-alpha 8 "
      "--target-modules c_attn,c_fc";
  train_and_export(tmp, run);
  if (HasFatalFailure()) return;
  const std::string gen = "generate --adapter " + tmp.path("adapter") + " --seed 5" + kGen;
  // The same values given again are accepted (in any order for the targets).
  CliResult r = run_snug(gen + " --lora-r 4 --lora-alpha 8 --target-modules c_fc,c_attn", 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_snug(gen + " --lora-r 8", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--lora-r 8 conflicts with --adapter " + tmp.path("adapter")),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("r 4"), std::string::npos) << r.err;
  r = run_snug(gen + " --lora-alpha 16", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--lora-alpha 16 conflicts"), std::string::npos) << r.err;
  r = run_snug(gen + " --target-modules c_attn", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--target-modules c_attn conflicts"), std::string::npos) << r.err;
  r = run_snug(gen + " --use-rslora", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--use-rslora true conflicts"), std::string::npos) << r.err;
  r = run_snug(gen + " --checkpoint " + tmp.path("out"), 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--adapter and --checkpoint are exclusive"), std::string::npos) << r.err;
}

TEST(GenerateAdapterCli, BadAdapterFoldersAreOneClearMessage) {
  TempDir tmp;
  const std::string run =
      "--model gpt2-tiny --seed 5 --seq-len 32 --lora-r 4 --target-modules c_attn,c_fc";
  train_and_export(tmp, run);
  if (HasFatalFailure()) return;
  const std::string good = tmp.path("adapter");
  const nlohmann::json config = read_json(good + "/adapter_config.json");
  int n = 0;
  // A copy of the good adapter with `edit` applied to its config (and `drop` removed).
  auto variant = [&](const std::function<void(nlohmann::json&)>& edit,
                     const std::string& drop = "") {
    const std::string dir = tmp.path("bad" + std::to_string(n++));
    fs::create_directories(dir);
    for (const char* f : {"adapter_config.json", "adapter_model.safetensors"})
      fs::copy_file(good + "/" + f, dir + "/" + f);
    nlohmann::json j = config;
    edit(j);
    std::ofstream(dir + "/adapter_config.json") << j.dump(2);
    if (!drop.empty()) fs::remove(dir + "/" + drop);
    return dir;
  };
  auto expect_error = [&](const std::string& dir, const std::string& what) {
    const CliResult r = run_snug("generate --adapter " + dir + " --seed 5" + kGen, 60);
    EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  };
  auto same = [](nlohmann::json&) {};
  expect_error(tmp.path("nonexistent"),
               "--adapter " + tmp.path("nonexistent") + ": no such directory");
  expect_error(variant(same, "adapter_model.safetensors"), "no adapter_model.safetensors");
  expect_error(variant(same, "adapter_config.json"), "no adapter_config.json");
  // Wrong shape: the tensors are rank 4, the config says 2.
  expect_error(variant([](nlohmann::json& j) { j["r"] = 2; }),
               "adapter_model.safetensors: tensor "
               "'base_model.model.transformer.h.0.attn.c_attn.lora_A.weight' has shape (4,128)");
  // A target that adapts nothing in gpt2-tiny, and one the file has no tensors for.
  expect_error(variant([](nlohmann::json& j) { j["target_modules"].push_back("q_proj"); }),
               "adapter_config.json: target_modules 'q_proj' matches no Linear of gpt2-tiny");
  expect_error(variant([](nlohmann::json& j) { j["target_modules"].push_back("c_proj"); }),
               "adapter_model.safetensors: no tensor "
               "'base_model.model.transformer.h.0.attn.c_proj.lora_A.weight'");
  expect_error(variant([](nlohmann::json& j) { j["target_modules"] = ".*c_attn"; }),
               "adapter_config.json: target_modules \".*c_attn\": a regular expression");
  expect_error(variant([](nlohmann::json& j) { j["bias"] = "all"; }),
               "adapter_config.json: bias \"all\": only \"none\" is supported");
  expect_error(variant([](nlohmann::json& j) { j["modules_to_save"] = {"lm_head"}; }),
               "adapter_config.json: modules_to_save [\"lm_head\"]");
  expect_error(variant([](nlohmann::json& j) { j["use_dora"] = true; }),
               "adapter_config.json: use_dora true: DoRA");
  expect_error(variant([](nlohmann::json& j) { j["peft_type"] = "IA3"; }),
               "adapter_config.json: peft_type \"IA3\"");
  expect_error(variant([](nlohmann::json& j) { j.erase("r"); }), "adapter_config.json: r null");
  // A tensor that is no adapter of the model.
  {
    const std::string dir = variant(same);
    fs::copy_file(tmp.path("out") + "/checkpoint-6/model.safetensors",
                  dir + "/adapter_model.safetensors", fs::copy_options::overwrite_existing);
    expect_error(dir, "is not a LoRA weight of gpt2-tiny with target_modules c_attn,c_fc");
  }
}

}  // namespace generate_adapter_cli_test
}  // namespace
}  // namespace snug
