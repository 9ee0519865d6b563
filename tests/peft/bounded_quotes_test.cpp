// An adapter folder is untrusted (issue 29, item 6): a value of adapter_config.json that is
// nearly a megabyte (the file's limit is one), or a megabyte tensor name in
// adapter_model.safetensors, is quoted as a short excerpt in every refusal, which still names the
// file and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "peft/peft_adapter.h"
#include "support/bounded_quote.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace peft_bounded_quotes_test {

namespace fs = std::filesystem;
using nlohmann::json;

const json kConfig = {
    {"peft_type", "LORA"}, {"task_type", "CAUSAL_LM"}, {"r", 2},
    {"lora_alpha", 4},     {"bias", "none"},           {"target_modules", {"c_attn"}},
    {"use_rslora", false}, {"fan_in_fan_out", false},  {"modules_to_save", nullptr}};

// An adapter folder: kConfig with `patch` merged in, and adapter_model.safetensors of `tensors`.
std::string adapter(const TempDir& tmp, const std::string& name, const json& patch,
                    const std::vector<std::pair<std::string, const Tensor*>>& tensors = {}) {
  const fs::path dir = tmp.path(name);
  fs::create_directories(dir);
  json c = kConfig;
  for (const auto& [k, v] : patch.items()) c[k] = v;
  std::ofstream(dir / kPeftConfigFile) << c.dump();
  save_safetensors((dir / kPeftWeightsFile).string(), tensors);
  return dir.string();
}

TEST(BoundedQuotes, AdapterConfigFields) {
  TempDir tmp;
  const std::string big(900'000, 'x');  // adapter_config.json is read up to 1 MiB
  auto refuses = [&](const std::string& key, const json& value, const std::string& says) {
    const std::string dir = adapter(tmp, key, {{key, value}});
    return refuses_bounded([dir] { (void)read_peft_adapter_config(dir); },
                           {dir + "/adapter_config.json", key, says});
  };
  EXPECT_TRUE(refuses("peft_type", big, "only LoRA adapters"));
  EXPECT_TRUE(refuses("task_type", big, "causal LM adapters"));
  EXPECT_TRUE(refuses("bias", big, "only \"none\""));
  EXPECT_TRUE(refuses("modules_to_save", {big}, "not supported"));
  EXPECT_TRUE(refuses("use_dora", big, "not supported"));
  EXPECT_TRUE(refuses("r", big, "positive integer"));
  EXPECT_TRUE(refuses("lora_alpha", big, "must be a number"));
  EXPECT_TRUE(refuses("use_rslora", big, "true or false"));
  EXPECT_TRUE(refuses("fan_in_fan_out", big, "true or false"));
  EXPECT_TRUE(refuses("target_modules", big, "regular expression"));
  EXPECT_TRUE(refuses("target_modules", json::object({{big, 1}}), "non-empty list"));
  EXPECT_TRUE(refuses("target_modules", {big + ","}, "must be a module name"));
  EXPECT_TRUE(refuses("target_modules", {"c_attn", json::array({big})}, "must be a module name"));
}

// The adapter's target_modules and tensor names reach the messages of the load.
TEST(BoundedQuotes, AdapterTargetsAndTensorNames) {
  TempDir tmp;
  const std::string big(900'000, 'x');
  Device dev{cpu_backend()};
  auto load = [&](const std::string& dir) {
    return [&dev, dir] {
      const PeftAdapterConfig a = read_peft_adapter_config(dir);
      TrainingArguments args;
      adopt_peft_adapter(args, a, [](const std::string&) { return false; });
      std::unique_ptr<Model> m = create_model(args.model_config(), dev);
      (void)load_peft_adapter(*m, args, a);
    };
  };
  std::string dir = adapter(tmp, "nomatch", {{"target_modules", {big}}});
  EXPECT_TRUE(refuses_bounded(
      load(dir), {dir + "/adapter_config.json", "target_modules 'xxxx", "matches no Linear"}));
  // A tensor of the file that is no adapter's, named by a megabyte, with 100000 targets (each
  // c_attn: PEFT's list is a set, snug's reader takes it as it comes).
  const json many(100000, "c_attn");
  Device cpu{cpu_backend()};
  const Tensor one = Tensor::zeros({2, 2}, DType::f32, Category::weights, cpu);
  const std::string name = "base_model.model." + std::string(1 << 20, 'y');
  dir = adapter(tmp, "tensor", {{"target_modules", many}}, {{name, &one}});
  EXPECT_TRUE(refuses_bounded(load(dir), {dir + "/adapter_model.safetensors",
                                          "tensor 'base_model.model.yyyy", "not a LoRA weight"}));
}

}  // namespace peft_bounded_quotes_test
}  // namespace
}  // namespace snug::test
