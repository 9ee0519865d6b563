// A tiny LoRA run through the CLI and the logits of its checkpoint, shared by the export tests
// (tests/cli/export_cli_test.cpp, tests/torch/peft_roundtrip_torchtest.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt2/gpt2.h"
#include "support/run_cli.h"

namespace snug::test {

// `snug train <flags> --max-steps <steps> --save-steps <steps> --output-dir <out_dir>` (gtest
// failure with the CLI's stderr when it fails); returns the checkpoint folder it wrote.
std::string train_lora_checkpoint(const std::string& flags, int64_t steps,
                                  const std::string& out_dir);

// Copies every tensor of a safetensors file into the parameter of the same name (a plain loop,
// independent of the code under test; throws via the safetensors reader on a mismatch).
void load_by_name(GPT2& model, const std::string& path);

// (B,T,V) logits of an evaluation forward (full logits mode, no targets).
std::vector<float> eval_logits(GPT2& model, const std::vector<int32_t>& tokens, int64_t B,
                               int64_t T);

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace snug::test
