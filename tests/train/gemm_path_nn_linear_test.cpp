// --gemm-path on the nn.Linear-layout families (Llama, Qwen2, Mistral, GPT-NeoX, BERT: weights
// (out, in)), whose Linears take linear_nt_forward_bf16 / linear_nt_backward_bf16 on the bf16
// GEMM path (gemm_path_test.cpp holds GPT-2's Conv1D layout to the same checks):
//  - the meta device replays either path to the byte (plan == train);
//  - both paths train alike: the same bf16 operands, summed in another order;
//  - the bf16 path reads a bf16 weight as it is, where the widen path made an fp32 copy of it.
// Runs of the onednn-bf16 path skip (saying why) where oneDNN has no bf16 matmul (AVX2 CPUs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/backends.h"
#include "kernels/gemm_path.h"
#include "support/gemm_paths.h"
#include "support/memory_checks.h"
#include "support/train_run.h"

namespace snug {
namespace {
namespace gemm_path_nn_linear_test {

std::string fixture(const std::string& name) {
  return std::string(SNUG_TEST_DATA_DIR) + "/hf/" + name;
}

TrainingArguments bf16_args(const std::string& model, const std::string& path) {
  TrainingArguments a;
  a.model = fixture(model);
  a.per_device_train_batch_size = 2;
  a.seq_len = 16;
  a.max_steps = 2;
  a.data = "dummy";
  a.bf16 = true;
  a.gemm_path = path;
  a.logging_steps = 1000;
  return a;
}

// Full fine-tuning (Llama with GQA, a fused-QKV GPT-NeoX, BERT's q/k/v adding into one input
// gradient), LoRA on a bf16 base, QLoRA, checkpointing with accumulation.
std::vector<TrainingArguments> cases(const std::string& path) {
  std::vector<TrainingArguments> v;
  v.push_back(bf16_args("llama_gqa_sharded", path));
  v.push_back(bf16_args("neox_parallel", path));
  v.push_back(bf16_args("bert_mlm", path));
  {
    auto a = bf16_args("llama_gqa_sharded", path);
    a.torch_dtype = "bfloat16";
    a.lora_r = 4;
    a.target_modules = "all-linear";
    v.push_back(a);
  }
  {
    auto a = bf16_args("qwen2_bf16_tied", path);
    a.apply_qlora_recipe();
    a.lora_r = 4;
    a.target_modules = "all-linear";
    v.push_back(a);
  }
  {
    auto a = bf16_args("mistral_gqa", path);
    a.gradient_accumulation_steps = 2;
    a.gradient_checkpointing = true;
    v.push_back(a);
  }
  return v;
}

std::string describe(const TrainingArguments& a) {
  return a.model.substr(a.model.rfind('/') + 1) + " torch_dtype=" + a.torch_dtype +
         " lora_r=" + std::to_string(a.lora_r) + " qlora=" + std::to_string(a.qlora) +
         " ckpt=" + std::to_string(a.gradient_checkpointing) + " path=" + a.gemm_path;
}

TEST(GemmPathNnLinear, MetaReportsWhatCpuMeasuresOnBothPaths) {
  for (const std::string path : {"widen", "onednn-bf16"}) {
    if (path == "onednn-bf16" && !kernels::bf16_matmul_support().available) continue;
    auto all = cases(path);
    all.push_back(bf16_args("bert_cls", path));  // the pooler and classifier Linears too
    for (const TrainingArguments& a : all) {
      SCOPED_TRACE(describe(a));
      test::TrainRun cpu(a), meta(a, meta_backend());
      const TrainResult r = cpu.train();
      ASSERT_TRUE(r.error.empty()) << r.error;
      meta.train();
      test::expect_meta_equals_cpu(meta.dev.pool().stats(), cpu.dev.pool().stats());
    }
  }
  SKIP_WITHOUT_BF16_MATMUL();
}

TEST(GemmPathNnLinear, BothPathsTrainAlike) {
  SKIP_WITHOUT_BF16_MATMUL();
  const auto widen = cases("widen");
  const auto onednn = cases("onednn-bf16");
  for (size_t i = 0; i < widen.size(); ++i) {
    SCOPED_TRACE(describe(onednn[i]));
    TrainingArguments a = widen[i], b = onednn[i];
    a.max_steps = b.max_steps = 4;
    const TrainResult w = test::TrainRun(a).train(), o = test::TrainRun(b).train();
    ASSERT_TRUE(o.error.empty()) << o.error;
    // bert_cls is left out: its loss reads 2 pooled rows, so a bf16 rounding of a GEMM output
    // that the sum order moved by one unit shows undamped (0.3% at step 1).
    test::expect_paths_train_alike(o.loss, w.loss);
  }
}

// Calls of the nn.Linear ops, counted by counting_ops() around the fast table's.
struct LinearCalls {
  int64_t f32 = 0, bf16 = 0, widened = 0;  // fp32 and bf16 Linear ops, unpack_half passes
};
LinearCalls g_calls;

const OpTable& counting_ops() {
  static const OpTable t = [] {
    OpTable o = fast_op_table();
    o.linear_nt_forward = [](float* out, const float* inp, const float* w, const float* b,
                             int64_t N, int64_t IC, int64_t OC) {
      ++g_calls.f32;
      fast_op_table().linear_nt_forward(out, inp, w, b, N, IC, OC);
    };
    o.linear_nt_backward = [](float* dinp, float* dw, float* db, const float* dout,
                              const float* inp, const float* w, int64_t N, int64_t IC, int64_t OC,
                              bool acc) {
      ++g_calls.f32;
      fast_op_table().linear_nt_backward(dinp, dw, db, dout, inp, w, N, IC, OC, acc);
    };
    o.linear_nt_forward_bf16 = [](float* out, const uint16_t* inp, const uint16_t* w,
                                  const float* b, int64_t N, int64_t IC, int64_t OC) {
      ++g_calls.bf16;
      fast_op_table().linear_nt_forward_bf16(out, inp, w, b, N, IC, OC);
    };
    o.linear_nt_backward_bf16 = [](float* dinp, float* dw, float* db, const uint16_t* dout,
                                   const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                                   int64_t OC, bool acc) {
      ++g_calls.bf16;
      fast_op_table().linear_nt_backward_bf16(dinp, dw, db, dout, inp, w, N, IC, OC, acc);
    };
    o.unpack_half = [](float* out, const uint16_t* in, int64_t n, bool f16) {
      ++g_calls.widened;
      fast_op_table().unpack_half(out, in, n, f16);
    };
    return o;
  }();
  return t;
}

TEST(GemmPathNnLinear, Bf16PathTakesTheBf16OpsForEveryLinear) {
  SKIP_WITHOUT_BF16_MATMUL();
  // LoRA on a bf16 base, one step: 2 layers of 7 Linears, each once forward and once backward.
  // The widen path widened each frozen bf16 weight to fp32 for every product; the bf16 path
  // reads it as stored.
  auto calls = [](const std::string& path) {
    TrainingArguments a = bf16_args("llama_gqa_sharded", path);
    a.torch_dtype = "bfloat16";
    a.lora_r = 4;
    a.target_modules = "all-linear";
    a.max_steps = 1;
    g_calls = {};
    test::TrainRun run(a, cpu_backend(), &counting_ops());
    EXPECT_TRUE(run.train().error.empty());
    return g_calls;
  };
  const LinearCalls w = calls("widen"), o = calls("onednn-bf16");
  EXPECT_EQ(w.f32, 28);
  EXPECT_EQ(w.bf16, 0);
  EXPECT_EQ(o.f32, 0);
  EXPECT_EQ(o.bf16, 28);
  EXPECT_LE(o.widened + 28, w.widened);
}

}  // namespace gemm_path_nn_linear_test
}  // namespace
}  // namespace snug
