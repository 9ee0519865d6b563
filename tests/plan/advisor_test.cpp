// The fit advisor (plan/advisor.h): the switch dimensions, the FLOP count, and a search whose
// every listed configuration fits.
#include "plan/advisor.h"

#include <gtest/gtest.h>

#include "plan/what_if.h"
#include "support/configs.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace advisor_test {

// The advisor's options for `gib` GiB of device memory, at a fixed GEMM rate (100 GFLOP/s).
AdvisorOptions on_gib(int64_t gib) {
  AdvisorOptions o;
  o.capacity = gib << 30;
  o.gemm_flops = 1e11;
  return o;
}

TEST(Advisor, DimensionsAreTheSplitsCheckpointingOptimizersAndPrecision) {
  TrainingArguments a;
  const std::vector<SwitchDimension> dims = advisor_dimensions(a, 12);
  ASSERT_EQ(dims.size(), 4u);
  EXPECT_EQ(dims[0].name, "batch x accumulation");
  ASSERT_EQ(dims[0].choices.size(), 6u);  // 12, 6, 4, 3, 2, 1
  TrainingArguments b = a;
  dims[0].choices[2].apply(b);
  EXPECT_EQ(b.per_device_train_batch_size, 4);
  EXPECT_EQ(b.gradient_accumulation_steps, 3);
  EXPECT_EQ(dims[1].choices.size(), 4u);  // off, every-layer, sqrt, selective
  EXPECT_EQ(dims[2].choices.front().flags, "--optim adamw_torch");  // the run's own first
  ASSERT_EQ(dims[3].choices.size(), 3u);                            // fp32, --bf16, --bf16-full
  EXPECT_EQ(dims[3].choices[1].flags, "--bf16");
  TrainingArguments c = a;
  dims[3].choices[2].apply(c);
  EXPECT_TRUE(c.bf16_full);
  EXPECT_FALSE(c.bf16);
}

TEST(Advisor, StepFlopsClosedForm) {
  TrainingArguments a =
      test::args_of({.model = "gpt2-124m", .seq_len = 256, .batch = 2, .accumulation = 3});
  const double L = 12, C = 768, V = 50257, T = 256, tokens = 2 * 3 * 256;
  const double forward = 2 * (12 * L * C * C + V * C) + 2 * L * T * C;
  EXPECT_DOUBLE_EQ(step_flops(a), 3 * forward * tokens);
  a.gradient_checkpointing = true;  // every layer: one more forward of the layers
  const double recompute = 24 * L * C * C + 2 * L * T * C;
  EXPECT_DOUBLE_EQ(step_flops(a), (3 * forward + recompute) * tokens);
  // LOMO with clipping: a pass for the global norm, then the updating pass, each recomputing.
  a.optim = "lomo";
  EXPECT_DOUBLE_EQ(step_flops(a), 2 * (3 * forward + recompute) * tokens);
  a.max_grad_norm = 0;  // no norm needed first: one pass
  EXPECT_DOUBLE_EQ(step_flops(a), (3 * forward + recompute) * tokens);
  a.fp16 = true;  // the loss scale's overflow check comes first: two passes again
  EXPECT_DOUBLE_EQ(step_flops(a), 2 * (3 * forward + recompute) * tokens);
  a.fp16 = false;
  a.optim = "adamw_torch";
  a.checkpoint_policy = "selective";  // flash: no GEMM recomputed
  EXPECT_DOUBLE_EQ(step_flops(a), 3 * forward * tokens);
}

// A full fine-tune whose model states exceed the capacity under every optimizer that keeps all
// gradients: bf16 weights updated inside backward (LOMO, AdaLOMO: 2 bytes a parameter and one
// block's gradient) are what fit, and the advice says so.
TEST(Advisor, OnlyLomoFitsAFullFineTuneItOffers) {
  TrainingArguments a = test::args_of({.model = "gpt2-1.5b", .seq_len = 256, .batch = 1});
  // bf16-full SGD needs 4 bytes a parameter (6.2 GB); LOMO's about 3.1 GB plus the rest.
  const AdvisorOptions o = on_gib(5);
  const AdvisorResult r = advise(a, o);
  ASSERT_FALSE(r.fitting.empty());
  for (const Advice& x : r.fitting) {
    EXPECT_TRUE(x.args.optim == "lomo" || x.args.optim == "adalomo") << x.flags;
    EXPECT_TRUE(x.args.bf16_full) << x.flags;
    EXPECT_EQ(x.args.gradient_accumulation_steps, 1) << x.flags;
    EXPECT_LE(dry_run(x.args).peak_total, o.capacity) << x.flags;
  }
  // Clipping (the default --max-grad-norm 1) makes each a two-pass step.
  TrainingArguments one_pass = r.fitting.front().args;
  one_pass.max_grad_norm = 0;
  EXPECT_DOUBLE_EQ(r.fitting.front().flops, 2 * step_flops(one_pass));
  const std::string cmd = train_command_line(r.fitting.front().args, "5GiB");
  EXPECT_NE(cmd.find("--optim adalomo --bf16-full"), std::string::npos) << cmd;
}

// A rank of a data-parallel run: every configuration is replayed as rank 0 of the run's world
// (at its ZeRO stage), configurations the stage refuses are skipped, and the command runs under
// mpirun with the stage. --bf16-full is offered over the ranks too (its bf16 gradients go
// through the fp32 buckets, its weights are all-gathered as 16-bit elements).
TEST(Advisor, ZeroRunIsAdvisedAsARankOfItsWorld) {
  TrainingArguments a = test::args_of({.model = "gpt2-124m", .seq_len = 128, .batch = 2});
  a.model_shape.n_layer = 2;
  a.zero_stage = 2;
  AdvisorOptions o = on_gib(16);  // everything that runs fits
  o.data.world_size = 4;
  const AdvisorResult r = advise(a, o);
  EXPECT_EQ(r.world_size, 4);
  // 2 splits x 4 checkpoint policies x (adamw_torch, lion and sgd, the elementwise optimizers
  // stage 2 shards, in fp32 and --bf16, and adamw_torch and sgd, which keep bf16 state, under
  // --bf16-full).
  EXPECT_EQ(r.tried, 2 * 4 * (3 + 3 + 2));
  ASSERT_EQ(r.fitting.size(), static_cast<size_t>(r.tried));
  int bf16_full = 0;
  for (const Advice& x : r.fitting) {
    bf16_full += x.flags.find("--bf16-full") != std::string::npos ? 1 : 0;
    EXPECT_EQ(x.peak_bytes, replay(x.args, {.world_size = 4}).memory.peak_total) << x.flags;
    EXPECT_LT(x.peak_bytes, dry_run(x.args).peak_total) << x.flags;  // sharded: less than one
  }
  EXPECT_EQ(bf16_full, 2 * 4 * 2);
  const std::string cmd = train_command_line(r.fitting.front().args, "16GiB", 4);
  EXPECT_EQ(cmd.rfind("mpirun -np 4 snug train ", 0), 0u) << cmd;
  EXPECT_NE(cmd.find("--zero-stage 2"), std::string::npos) << cmd;
}

TEST(Advisor, Gpt2XlOnSixteenGiBHasFittingConfigurationsRankedByTime) {
  TrainingArguments a = test::args_of({.model = "gpt2-1.5b", .seq_len = 1024, .batch = 8});
  const AdvisorOptions o = on_gib(16);
  const AdvisorResult r = advise(a, o);
  EXPECT_EQ(r.target_batch, 8);
  // 4 splits x 4 checkpoint policies x (5 optimizers in fp32 and --bf16, and the 2 of them
  // with bf16 state, adamw_torch and sgd, under --bf16-full), and LOMO and AdaLOMO in all three
  // precisions on the one split without accumulation (8 x 1).
  EXPECT_EQ(r.tried, 4 * 4 * (5 + 5 + 2) + 1 * 4 * 2 * 3);
  // The refused: the 3 optimizers without bf16 state under --bf16-full on every split, and the
  // two updating inside backward on the 3 splits that accumulate.
  EXPECT_EQ(r.refused, 4 * 4 * 3 + 3 * 4 * 2 * 3);
  ASSERT_FALSE(r.fitting.empty());
  for (size_t i = 0; i < r.fitting.size(); ++i) {
    EXPECT_LE(r.fitting[i].peak_bytes, o.capacity);
    EXPECT_EQ(r.fitting[i].args.per_device_train_batch_size *
                  r.fitting[i].args.gradient_accumulation_steps,
              8);
    if (i > 0) {
      EXPECT_LE(r.fitting[i - 1].step_s, r.fitting[i].step_s);
    }
  }
  // The top configuration, replayed, fits.
  EXPECT_LE(dry_run(r.fitting.front().args).peak_total, o.capacity);
  // AdamW with fp32 parameters (16 bytes/param, 24 GB of model states; 18 with --bf16) never
  // fits; with --bf16-full (8 bytes/param, 12.5 GB) it does, with checkpointing.
  bool bf16_full_adamw = false;
  for (const Advice& x : r.fitting) {
    if (x.args.optim == "adamw_torch") {
      EXPECT_TRUE(x.args.bf16_full) << x.flags;
      bf16_full_adamw = true;
    }
  }
  EXPECT_TRUE(bf16_full_adamw);
}

// The step time charges each precision the GEMMs it runs on: on the widen path a 16-bit step is
// fp32's plus its conversion passes, so --bf16 never ranks ahead of fp32 for speed there; on
// oneDNN's bf16 matmul it is the FLOPs at that matmul's rate.
TEST(Advisor, StepTimeFollowsTheBf16GemmPath) {
  TrainingArguments a = test::args_of({.model = "gpt2-124m", .seq_len = 256, .batch = 4});
  AdvisorOptions o;
  o.gemm_flops = 1e11;
  TrainingArguments b = a, full = a, fp16 = a;
  b.bf16 = true;
  full.bf16_full = true;
  fp16.fp16 = true;
  const double fp32_s = step_flops(a) / 1e11;
  EXPECT_DOUBLE_EQ(step_seconds(a, o), fp32_s);
  EXPECT_DOUBLE_EQ(step_seconds(b, o), fp32_s * (1 + kWidenedStepOverhead));
  EXPECT_DOUBLE_EQ(step_seconds(full, o), fp32_s * (1 + kWidenedStepOverhead));
  o.bf16_path = kernels::GemmPath::onednn_bf16;
  o.bf16_gemm_flops = 4e11;
  EXPECT_DOUBLE_EQ(step_seconds(a, o), fp32_s);
  EXPECT_DOUBLE_EQ(step_seconds(b, o), fp32_s / 4);
  EXPECT_DOUBLE_EQ(step_seconds(fp16, o), fp32_s * (1 + kWidenedStepOverhead));  // always widens
  o.bf16_gemm_flops = 0;  // no rate of its own (--gemm-gflops): fp32's
  EXPECT_DOUBLE_EQ(step_seconds(b, o), fp32_s);
}

TEST(Advisor, WidenedBf16RanksBehindFp32AndBf16MatmulAhead) {
  TrainingArguments a = test::args_of({.model = "gpt2-124m", .seq_len = 128, .batch = 2});
  a.model_shape.n_layer = 2;
  AdvisorOptions o = on_gib(16);  // everything fits
  const AdvisorResult widened = advise(a, o);
  ASSERT_FALSE(widened.fitting.empty());
  EXPECT_FALSE(widened.fitting.front().args.bf16 || widened.fitting.front().args.bf16_full);
  // Every 16-bit configuration comes after its fp32 twin (same split, checkpointing, optimizer),
  // and takes longer.
  for (size_t i = 0; i < widened.fitting.size(); ++i) {
    const Advice& x = widened.fitting[i];
    if (!x.args.bf16 && !x.args.bf16_full) continue;
    bool twin_before = false;
    for (size_t k = 0; k < i; ++k) {
      const TrainingArguments& y = widened.fitting[k].args;
      if (y.bf16 || y.bf16_full ||
          y.per_device_train_batch_size != x.args.per_device_train_batch_size ||
          y.gradient_checkpointing != x.args.gradient_checkpointing ||
          y.checkpoint_policy != x.args.checkpoint_policy || y.optim != x.args.optim)
        continue;
      twin_before = true;
      EXPECT_GT(x.step_s, widened.fitting[k].step_s) << x.flags;
    }
    EXPECT_TRUE(twin_before) << x.flags;
  }
  o.bf16_path = kernels::GemmPath::onednn_bf16;
  o.bf16_gemm_flops = 2e11;
  const AdvisorResult matmul = advise(a, o);
  ASSERT_FALSE(matmul.fitting.empty());
  EXPECT_TRUE(matmul.fitting.front().args.bf16) << matmul.fitting.front().flags;
}

// A LoRA run may also quantize its base: on a capacity where only a 4-bit base fits, the advice
// is QLoRA, and its command line carries the adapters and the storage.
TEST(Advisor, LoraRunIsOfferedAQuantizedBase) {
  TrainingArguments a = test::args_of({.model = "gpt2-1.5b", .seq_len = 256, .batch = 1});
  a.lora_r = 8;
  a.target_modules = "all-linear";
  const std::vector<SwitchDimension> dims = advisor_dimensions(a, 1);
  ASSERT_EQ(dims.size(), 5u);
  EXPECT_EQ(dims[4].name, "base storage");
  const AdvisorOptions o = on_gib(2);  // the fp32 base alone is 6.2 GB, int8 1.6 GB
  const AdvisorResult r = advise(a, o);
  // 1 split x 4 checkpoint policies x (5 optimizers x 2 precisions + --bf16-full, a bf16 base
  // under the adapters, with the 2 optimizers that have bf16 state, + LOMO and AdaLOMO in all
  // three precisions) x 3 storages.
  EXPECT_EQ(r.tried, 4 * (5 * 2 + 2 + 2 * 3) * 3);
  ASSERT_FALSE(r.fitting.empty());
  for (const Advice& x : r.fitting) {
    EXPECT_TRUE(x.args.load_in_4bit || x.args.load_in_8bit) << x.flags;
    EXPECT_LE(dry_run(x.args).peak_total, o.capacity) << x.flags;
  }
  const std::string cmd = train_command_line(r.fitting.front().args, "2GiB");
  EXPECT_NE(cmd.find("--lora-r 8 --target-modules all-linear"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--load-in-"), std::string::npos) << cmd;
}

// A QLoRA run's advice keeps its 4-bit base where nothing faster fits: the base's storage is
// the run's own first, as its optimizer is (dequantization is not in the step time, so an fp32
// base would otherwise tie and win).
TEST(Advisor, QloraRunKeepsItsFourBitBaseAmongEqualTimes) {
  TrainingArguments a = test::args_of({.model = "gpt2-124m", .seq_len = 128, .batch = 2});
  a.model_shape.n_layer = 2;
  a.lora_r = 8;
  a.target_modules = "all-linear";
  a.load_in_4bit = true;
  const std::vector<SwitchDimension> dims = advisor_dimensions(a, 2);
  ASSERT_EQ(dims.back().name, "base storage");
  ASSERT_EQ(dims.back().choices.size(), 3u);
  EXPECT_EQ(dims.back().choices[0].flags,
            "--load-in-4bit --bnb-4bit-quant-type nf4 --bnb-4bit-use-double-quant");
  EXPECT_EQ(dims.back().choices[1].flags, "");  // then the others in their order
  EXPECT_EQ(dims.back().choices[2].flags, "--load-in-8bit");
  const AdvisorResult r = advise(a, on_gib(16));  // everything fits
  ASSERT_FALSE(r.fitting.empty());
  EXPECT_TRUE(r.fitting.front().args.load_in_4bit) << r.fitting.front().flags;
  a.load_in_4bit = false;  // a LoRA run over an fp32 base keeps fp32 first
  EXPECT_EQ(advisor_dimensions(a, 2).back().choices[0].flags, "");
}

TEST(Advisor, CommandLineCarriesTheSwitches) {
  TrainingArguments a =
      test::args_of({.model = "gpt2-124m", .seq_len = 512, .batch = 2, .accumulation = 4});
  a.model_shape.n_layer = 4;
  a.optim = "adafactor";
  a.gradient_checkpointing = true;
  a.checkpoint_policy = "sqrt";
  EXPECT_EQ(train_command_line(a, "16GiB"),
            "snug train --model gpt2-124m --n-layer 4 --seq-len 512 --per-device-train-batch-size "
            "2 --gradient-accumulation-steps 4 --optim adafactor --gradient-checkpointing "
            "--checkpoint-policy sqrt --device-memory 16GiB");
}

// A plan for a GPU replays on meta with the GPU's kernel choices (kernel_device); the command it
// advises runs on that GPU.
TEST(Advisor, CommandLineRunsOnTheDevicePlannedFor) {
  TrainingArguments a = test::args_of({.model = "gpt2-124m", .seq_len = 512, .batch = 2});
  a.device = "meta";
  a.kernel_device = "cuda:1";
  EXPECT_EQ(train_command_line(a, "h100-80gb"),
            "snug train --model gpt2-124m --seq-len 512 --per-device-train-batch-size 2 --device "
            "cuda:1 --device-memory h100-80gb");
  a.kernel_device = "cpu";
  EXPECT_EQ(train_command_line(a, "").find("--device"), std::string::npos);
}

// The dequantization dtype is said only where a base is quantized: the --qlora recipe sets it to
// bf16, and an advice that keeps the adapters over an fp32 base does not carry it.
TEST(Advisor, CommandLineSaysTheDequantizationDtypeOfAQuantizedBaseOnly) {
  TrainingArguments a = test::args_of({.model = "llama-tiny", .seq_len = 128, .batch = 2});
  a.lora_r = 8;
  a.bnb_4bit_compute_dtype = "bf16";
  EXPECT_EQ(train_command_line(a, "").find("--bnb-4bit-compute-dtype"), std::string::npos);
  a.load_in_8bit = true;
  EXPECT_NE(train_command_line(a, "").find("--bnb-4bit-compute-dtype bf16"), std::string::npos);
}

TEST(Advisor, CliTopLineIsTheCommand) {
  const test::CliResult r = test::run_snug(
      "plan --model gpt2-1.5b --seq-len 1024 --per-device-train-batch-size 8 "
      "--device-memory 16GiB --advise --gemm-gflops 100");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nrun: snug train --model gpt2-1.5b"), std::string::npos) << r.out;
  const test::CliResult no_capacity = test::run_snug("plan --advise");
  EXPECT_EQ(no_capacity.exit_code, 2);
}

// Every line of a table is as long as its header: the figures stay in their columns.
void expect_columns(const std::string& table) {
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = table.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(table.substr(at, end - at));
  ASSERT_GE(lines.size(), 2U) << table;
  for (const std::string& l : lines) EXPECT_EQ(l.size(), lines[0].size()) << table;
}

TEST(Advisor, WhatIfTableWidensForItsLongestFlags) {
  const std::string three = "--load-in-4bit --bnb-4bit-quant-type nf4 --bnb-4bit-use-double-quant";
  ASSERT_GT(three.size(), 62U);  // wider than the column's least width
  const std::string t =
      what_if_table({{"--optim sgd", 3 * 1048576}, {three, 1048576 + 104858}}, 4 * 1048576);
  expect_columns(t);
  EXPECT_NE(t.find(three + "          1.1          2.9\n"), std::string::npos) << t;
}

TEST(Advisor, TableShowsStepsUnderASecondInMs) {
  AdvisorResult r;
  r.fitting.push_back({{}, "--bf16", 3 * 1048576, 1e9, 0.00229, 0});
  std::string t = advice_table(r, 8 * 1048576, 0, 10);  // the switches column ends each line
  EXPECT_EQ(t.rfind("rank    step ms   peak MiB headroom MiB  switches\n", 0), 0U) << t;
  EXPECT_NE(t.find("   1       2.29        3.0          5.0  --bf16\n"), std::string::npos) << t;
  r.fitting.push_back({{}, "--bf16-full", 2 * 1048576, 1e12, 2.5, 1});
  t = advice_table(r, 8 * 1048576, 0, 10);
  EXPECT_EQ(t.rfind("rank     step s", 0), 0U) << t;  // one unit per table
  EXPECT_NE(t.find("   1       0.00        3.0"), std::string::npos) << t;
  EXPECT_NE(t.find("   2       2.50        2.0          6.0  --bf16-full\n"), std::string::npos)
      << t;
}

}  // namespace advisor_test
}  // namespace
}  // namespace snug
