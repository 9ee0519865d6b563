// A GPT-2 whose blocks' Linear weights are stored quantized (--load-in-8bit/--load-in-4bit):
// exact bytes on meta (acceptance 3 of issue 6), values equal to quantizing the fp32 model's,
// GEMMs that see exactly the dequantized weights, loading from a file, QLoRA training, resume.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_weights.h"
#include "plan/what_if.h"
#include "support/configs.h"
#include "support/random.h"
#include "support/train_run.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace quantized_base_test {

int64_t cat(const MemoryStats& m, Category c) {
  return m.max_by_category[static_cast<int>(c)];
}

WeightQuantConfig nf4(bool dq) {
  WeightQuantConfig c;
  c.format = quant::Format::nf4;
  c.double_quant = dq;
  return c;
}

TEST(QuantizedBase, Gpt2LinearWeightsCostFourAndAHalfBitsOrLessWithDoubleQuant) {
  const GPT2Config cfg = resolve_gpt2("gpt2-124m");
  const int64_t P = 124439808, P_lin = 84934656;  // 12 x (768x2304 + 768x768 + 2 x 768x3072)
  for (bool dq : {false, true}) {
    Device meta(meta_backend());
    GPT2 model(cfg, meta, DType::f32, nf4(dq));
    EXPECT_EQ(count_params(model.parameters()), P);
    EXPECT_EQ(count_params(model.parameters(), true), P - P_lin);  // Linear weights are frozen
    const MemoryStats m = meta.pool().stats();
    const int64_t quant_bytes =
        cat(m, Category::weights) - 4 * (P - P_lin) + cat(m, Category::quant_state);
    const double bits = 8.0 * static_cast<double>(quant_bytes) / static_cast<double>(P_lin);
    if (!dq) {
      EXPECT_EQ(quant_bytes * 16, P_lin * 9);  // 4 bits + one fp32 absmax per 64: 4.5 bits
    } else {
      EXPECT_LE(bits, 4.13) << bits;
      EXPECT_GT(bits, 4.12) << bits;
    }
    EXPECT_EQ(cat(m, Category::temporary), 0);  // no fp32 copy ever existed on the device
  }
  Device meta(meta_backend());
  WeightQuantConfig i8;
  i8.format = quant::Format::int8_blockwise;
  GPT2 model(cfg, meta, DType::f32, i8);
  const MemoryStats m = meta.pool().stats();
  EXPECT_EQ(cat(m, Category::weights), 4 * (P - P_lin) + P_lin);  // one byte per weight
  EXPECT_EQ(cat(m, Category::quant_state), P_lin / 256 * 4);      // fp32 absmax per 256
}

// The quantized model holds quantize(the fp32 model's values), and its forward pass is the fp32
// model's with the dequantized weights, bit for bit.
TEST(QuantizedBase, ForwardIsTheFp32ModelsWithDequantizedWeights) {
  for (quant::Format f : {quant::Format::nf4, quant::Format::fp4, quant::Format::int8_blockwise}) {
    SCOPED_TRACE(quant::format_name(f));
    Device cpu(cpu_backend());
    const GPT2Config cfg = test::odd_config();
    WeightQuantConfig qc;
    qc.format = f;
    qc.double_quant = f == quant::Format::nf4;
    GPT2 q(cfg, cpu, DType::f32, qc);
    q.init_weights(9);
    GPT2 dense(cfg, cpu);
    dense.init_weights(9);
    for (Parameter* p : dense.parameters()) {
      const Parameter* pq = q.find(p->name);
      if (!pq->quantized()) {
        ASSERT_EQ(std::memcmp(p->value.data<float>(), pq->value.data<float>(), p->value.nbytes()),
                  0)
            << p->name;
        continue;
      }
      quant::Options o;
      o.double_quant = qc.double_quant;
      const std::vector<float> expect =
          quant::dequantize(quant::quantize(p->value.data<float>(), p->shape(), f, o));
      std::vector<float> got(static_cast<size_t>(p->numel()));
      q.read_values(*pq, got.data());
      ASSERT_EQ(std::memcmp(got.data(), expect.data(), got.size() * 4), 0) << p->name;
      std::copy(expect.begin(), expect.end(), p->value.data<float>());
    }
    const int64_t B = 2, T = 13;
    const auto in = test::random_ints(B * T, 1, 0, 300);
    const auto tg = test::random_ints(B * T, 2, 0, 300);
    const float lq = q.forward(in.data(), tg.data(), B, T, false);
    const float ld = dense.forward(in.data(), tg.data(), B, T, false);
    EXPECT_EQ(std::memcmp(&lq, &ld, sizeof lq), 0) << lq << " vs " << ld;
  }
}

TEST(QuantizedBase, LoadsAndQuantizesAWeightsFile) {
  Device cpu(cpu_backend());
  const GPT2Config cfg = test::odd_config();
  GPT2 src(cfg, cpu);
  src.init_weights(21);
  const std::string path =
      (std::filesystem::temp_directory_path() / "snug_quantized_base_test.safetensors").string();
  save_gpt2_weights(src, path);
  GPT2 q(cfg, cpu, DType::f32, nf4(true));
  q.init_weights(1);  // other values first: loading must replace them
  load_gpt2_weights(q, path);
  GPT2 q2(cfg, cpu, DType::f32, nf4(true));
  q2.init_weights(21);
  for (const Parameter* p : q.parameters()) {
    std::vector<float> a(static_cast<size_t>(p->numel())), b(a.size());
    q.read_values(*p, a.data());
    q2.read_values(*q2.find(p->name), b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << p->name;
  }
  // Saving a quantized model writes the dequantized values, which load back into a dense model.
  save_gpt2_weights(q, path);
  GPT2 dense(cfg, cpu);
  load_gpt2_weights(dense, path);
  const Parameter* w = q.find("transformer.h.1.mlp.c_fc.weight");
  std::vector<float> a(static_cast<size_t>(w->numel()));
  q.read_values(*w, a.data());
  EXPECT_EQ(std::memcmp(a.data(), dense.find(w->name)->value.data<float>(), a.size() * 4), 0);
  std::filesystem::remove(path);
}

TrainingArguments qlora_args() {
  TrainingArguments a = test::small_lora_run(/*r=*/4, /*max_steps=*/20);
  a.apply_qlora_recipe();  // keeps the rank and targets given
  return a;
}

TEST(QuantizedBase, QloraTrainsAndItsPlanIsExact) {
  const TrainingArguments a = qlora_args();
  test::TrainRun run(a);
  const TrainResult r = run.train();
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_LT(r.loss.back(), 0.9 * r.loss.front()) << r.loss.front() << " -> " << r.loss.back();
  const MemoryStats real = run.dev.pool().stats();
  const MemoryStats plan = dry_run(a);
  EXPECT_EQ(plan.peak_total, real.peak_total);
  for (int c = 0; c < kNumCategories; ++c)
    EXPECT_EQ(plan.max_by_category[c], real.max_by_category[c]) << category_name(Category(c));
  EXPECT_GT(cat(real, Category::quant_state), 0);
}

TEST(QuantizedBase, TrainingAQuantizedBaseWithoutAdaptersIsRefused) {
  TrainingArguments a = qlora_args();
  a.lora_r = 0;
  a.qlora = false;
  Device meta(meta_backend());
  GPT2 model(a.model_config(), meta, DType::f32, a.weight_quant());
  try {
    Trainer t(a, model, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--lora-r"), std::string::npos) << e.what();
  }
}

// QLoRA with dropout and NEFTune: 6 steps == 3 + save + resume + 3, bit for bit. The checkpoint
// holds the adapters, the dense parameters and the quantized base.
TEST(QuantizedBase, QloraResumeIsBitExact) {
  const std::string out =
      (std::filesystem::temp_directory_path() / "snug_qlora_resume_test").string();
  std::filesystem::remove_all(out);
  auto run = [&](int64_t steps, const std::string& resume, std::vector<double>* losses) {
    TrainingArguments a = qlora_args();
    a.lora_dropout = 0.1;
    a.neftune_noise_alpha = 5;
    a.max_steps = 6;
    a.save_steps = steps;
    a.output_dir = out;
    a.resume_from = resume;
    test::TrainRun tr(a);
    const TrainResult r = tr.train();
    EXPECT_TRUE(r.error.empty()) << r.error;
    *losses = r.loss;
    std::vector<float> adapters;
    for (const auto& ad : tr.model->lora_adapters())
      for (const Parameter* p : {ad.A, ad.B})
        adapters.insert(adapters.end(), p->value.data<float>(),
                        p->value.data<float>() + p->numel());
    return adapters;
  };
  std::vector<double> full, second;
  const std::vector<float> a = run(3, "", &full);
  const std::vector<float> b = run(6, out + "/checkpoint-3", &second);
  ASSERT_EQ(full.size(), 6u);
  ASSERT_EQ(second.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(full[3 + i], second[i]) << "step " << 4 + i;
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  std::filesystem::remove_all(out);
}

}  // namespace quantized_base_test
}  // namespace
}  // namespace snug
