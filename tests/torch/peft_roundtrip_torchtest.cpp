// Issue 6, acceptance 6: an adapter exported by snug loads with PEFT onto the base snug saved
// and reproduces snug's logits. Runs tests/peft/check_peft_adapter.py with the interpreter in
// SNUG_PYTHON (environment, else the CMake cache's). Labelled torch (CI excludes it): without
// torch, transformers and peft it fails, saying what to install (a skip must not read as a pass).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/lora_run.h"
#include "support/random.h"
#include "torch/torch_python.h"

namespace snug::test {
namespace {
namespace peft_roundtrip_torchtest {

// rsLoRA with alpha != r, dropout (training only), three target keys: every field of the
// config matters for PEFT to rebuild the same model.
const std::string kRun =
    "--model gpt2-tiny --lora-r 4 --lora-alpha 6 --use-rslora --lora-dropout 0.05 "
    "--target-modules c_attn,c_proj,c_fc --seed 3 --seq-len 32 --per-device-train-batch-size 2 "
    "--learning-rate 1e-2";

TEST(PeftRoundTrip, AdapterLoadsWithPeftAndReproducesSnugsLogits) {
  const std::string py = python();
  ASSERT_EQ(std::system(("'" + py + "' -c 'import numpy, torch, transformers, peft, safetensors' " +
                         ">/dev/null 2>&1")
                            .c_str()),
            0)
      << "'" << py
      << "' cannot import numpy, torch, transformers, peft and safetensors: "
         "`pip install numpy torch transformers peft` (or point SNUG_PYTHON at an "
         "interpreter that has them) to run the PEFT round trip";
  TempDir tmp;
  const std::string checkpoint = train_lora_checkpoint(kRun, 4, tmp.path("run"));
  const std::string base = tmp.path("base.safetensors"), adapter = tmp.path("adapter"),
                    merged = tmp.path("merged.safetensors"),
                    expected = tmp.path("snug.safetensors");
  CliResult r = run_snug("export-init -o " + base + " " + kRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_snug("export --adapter -o " + adapter + " --checkpoint " + checkpoint + " " + kRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_snug("export --merge -o " + merged + " --checkpoint " + checkpoint + " " + kRun);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // snug's logits: the base the run started from plus the checkpoint's adapters.
  Device cpu(cpu_backend());
  GPT2 model(resolve_gpt2("gpt2-tiny"), cpu);
  model.init_weights(3);
  LoraConfig c;
  c.r = 4;
  c.alpha = 6;
  c.use_rslora = true;
  c.dropout = 0.05;
  c.target_modules = {"c_attn", "c_proj", "c_fc"};
  model.add_lora(c, 3);
  load_by_name(model, checkpoint + "/model.safetensors");
  const int64_t B = 2, T = 24;
  const std::vector<int32_t> ids = random_ints(B * T, 5, 0, 255);
  const std::vector<float> logits = eval_logits(model, ids, B, T);
  Tensor tok = Tensor::empty({B, T}, DType::i32, Category::input_data, cpu);
  std::copy(ids.begin(), ids.end(), tok.data<int32_t>());
  Tensor lg = Tensor::empty({B, T, 256}, DType::f32, Category::temporary, cpu);
  std::copy(logits.begin(), logits.end(), lg.data<float>());
  save_safetensors(expected, {{"tokens", &tok}, {"logits", &lg}});

  const std::string script = std::string(SNUG_TEST_DATA_DIR) + "/../peft/check_peft_adapter.py";
  const std::string log = tmp.path("script.log");
  const int status =
      std::system(("'" + py + "' " + script + " --base " + base + " --adapter " + adapter +
                   " --merged " + merged + " --expected " + expected + " >" + log + " 2>&1")
                      .c_str());
  const std::string out = slurp(log);
  std::cout << out;  // the measured differences, in the test log
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("PEFT loaded 32 adapter tensors"));
  EXPECT_THAT(out, ::testing::HasSubstr("PASS"));
}

}  // namespace peft_roundtrip_torchtest
}  // namespace
}  // namespace snug::test
