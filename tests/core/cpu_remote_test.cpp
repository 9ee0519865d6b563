// cpu-remote (kernels/backends.h): the cpu kernels behind addresses the host cannot dereference.
// A host read of its memory faults, so a whole run on it that gives the cpu's results proves that
// every host-side step of that run (data, initialization, loss, clipping, evaluation, saving,
// generation) goes through the backend's copies and host staging, as a GPU needs (issue 27).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace cpu_remote_test {

using test::run_snug;

TEST(CpuRemote, HostCannotTouchItsMemoryButCopiesAndOpsCan) {
  const std::unique_ptr<Device> dev = make_device("cpu-remote");
  EXPECT_FALSE(dev->host_addressable());
  EXPECT_TRUE(dev->host().host_addressable());
  Tensor t = Tensor::empty({4}, DType::f32, Category::activations, *dev);
  EXPECT_NE(reinterpret_cast<uintptr_t>(t.raw()) & (uintptr_t{1} << 62), 0u);
  const std::vector<float> a = {1, 2, 3, 4};
  dev->upload(t.data<float>(), a.data(), 4);
  dev->ops().scale(t.data<float>(), 2.0f, 4);
  std::vector<float> back(4);
  dev->download(back.data(), t.data<float>(), 4);
  EXPECT_EQ(back, (std::vector<float>{2, 4, 6, 8}));
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        volatile float x = *t.data<float>();
        (void)x;
      },
      "");
}

// The lines a run prints that carry its numbers (losses, evaluation, generated text).
std::string numbers_of(const std::string& out) {
  std::string keep;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    const std::string line = out.substr(pos, end == std::string::npos ? end : end - pos);
    if (line.rfind("step ", 0) == 0 || line.rfind("eval ", 0) == 0 || line.rfind("Loss:", 0) == 0) {
      // Drop the wall time at the end of step lines.
      keep += line.substr(0, line.rfind("  ")) + "\n";
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return keep;
}

TEST(CpuRemote, TrainingRunsMatchTheCpuBitForBit) {
  for (const std::string extra :
       {"", "--bf16-full --gradient-checkpointing",
        "--qlora --load-in-4bit --lora-r 8 --target-modules all-linear --eval-split 0.1 "
        "--eval-steps 2",
        "--optim adamw_bnb_8bit --gradient-accumulation-steps 2 --fp16 --neftune-noise-alpha 5",
        "--optim galore_adamw --galore-rank 4",
        // LOMO's update inside backward; factored states beside frozen layers; an int8 base
        // under selective checkpointing; jsonl packed by position ids, with evaluation.
        "--optim adalomo", "--optim adafactor --freeze 'transformer.h.0.*'",
        "--load-in-8bit --lora-r 4 --target-modules all-linear --gradient-checkpointing "
        "--checkpoint-policy selective",
        "--model " SNUG_SOURCE_DIR "/examples/tiny-llama --data " SNUG_SOURCE_DIR
        "/examples/arithmetic-instructions.jsonl --seq-len 32 --packing --eval-split 0.1 "
        "--eval-steps 2 --optim lion_8bit",
        // llama3 rope scaling (a host table of inverse frequencies), biases, tied embeddings,
        // GQA; LoRA on it.
        "--model " SNUG_TEST_DATA_DIR "/hf/llama_bias_tied --seq-len 16 --data dummy",
        "--model " SNUG_TEST_DATA_DIR "/hf/llama_gqa_sharded --seq-len 16 --data dummy "
        "--lora-r 4 --target-modules all-linear",
        "--model " SNUG_TEST_DATA_DIR "/hf/bert_cls --seq-len 16 --data dummy"}) {
    SCOPED_TRACE(extra);
    test::TempDir dir;
    const auto cpu = run_snug("train --device cpu --max-steps 3 --logging-steps 1 --output-dir " +
                              dir.path("cpu") + " " + extra);
    const auto remote =
        run_snug("train --device cpu-remote --max-steps 3 --logging-steps 1 --output-dir " +
                 dir.path("remote") + " " + extra);
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    ASSERT_EQ(remote.exit_code, 0) << remote.err;
    EXPECT_FALSE(numbers_of(cpu.out).empty());
    EXPECT_EQ(numbers_of(remote.out), numbers_of(cpu.out));
  }
}

// A checkpoint names no device: one saved on the cpu resumes on cpu-remote and one saved there
// resumes on the cpu, with the uninterrupted run's losses bit for bit (issue 27: checkpoints
// resume across devices; bench/gpu/check.py's resume part runs the same on a GPU). The
// configurations carry what a checkpoint holds besides fp32 weights: AdamW's moments; 8-bit
// states, fp16's loss scale, NEFTune's generator; QLoRA's quantized base and adapters.
TEST(CpuRemote, CheckpointsResumeAcrossDevices) {
  const std::string shape = " --model gpt2-tiny --seq-len 32 --per-device-train-batch-size 2 ";
  for (const std::string extra :
       {"", "--fp16 --optim adamw_bnb_8bit --neftune-noise-alpha 5",
        "--qlora --load-in-4bit --lora-r 4 --target-modules all-linear"}) {
    for (const auto& [from, to] : {std::pair{"cpu", "cpu-remote"}, {"cpu-remote", "cpu"}}) {
      SCOPED_TRACE(extra + " (" + from + " -> " + to + ")");
      const test::TempDir tmp;
      EXPECT_TRUE(test::resumes_bit_for_bit(tmp, shape + "--device " + from + " " + extra,
                                            shape + "--device " + to + " " + extra));
    }
  }
}

TEST(CpuRemote, GenerationFromACheckpointMatchesTheCpu) {
  test::TempDir dir;
  ASSERT_EQ(run_snug("train --max-steps 2 --save-steps 2 --output-dir " + dir.path("o")).exit_code,
            0);
  const std::string gen = "generate --checkpoint " + dir.path("o") +
                          "/checkpoint-2 --prompt 'The ' --max-new-tokens 12 --device ";
  const auto cpu = run_snug(gen + "cpu");
  const auto remote = run_snug(gen + "cpu-remote");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_FALSE(cpu.out.empty());
  EXPECT_EQ(remote.out, cpu.out);
}

}  // namespace cpu_remote_test
}  // namespace
}  // namespace snug
