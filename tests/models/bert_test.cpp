// BERT (models/bert): a training step's memory on meta equals the cpu run's to the byte (both
// heads, naive and flash attention, dropout on, checkpointing, fp16); every parameter gradient
// passes central finite differences with dropout on (the masks are keyed by the forward count, so
// the perturbed forwards drop the same elements); checkpointing recomputes bitwise the same
// gradients; the collator and the trainer's tasks.
#include "models/bert/bert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/collator.h"
#include "data/dataset.h"
#include "kernels/backends.h"
#include "kernels/gemm_path.h"
#include "kernels/op_table.h"
#include "models/config_override.h"
#include "models/registry.h"
#include "plan/what_if.h"
#include "support/gradcheck.h"
#include "support/train_run.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace bert_test {

ModelConfig tiny(ModelTask task, int64_t labels = 3) {
  // Odd sizes; dropout probabilities high enough that masks matter.
  ModelConfig c = resolve_model("bert-tiny", {},
                                {"vocab_size=37", "hidden_size=12", "num_attention_heads=3",
                                 "intermediate_size=19", "max_position_embeddings=11",
                                 "hidden_dropout_prob=0.2", "attention_probs_dropout_prob=0.3"});
  return with_task(c, task, task == ModelTask::sequence_classification ? labels : 0);
}

struct Batch {
  std::vector<int32_t> ids, targets;
  int64_t B = 2, T = 7;
};

Batch batch(const ModelConfig& cfg) {
  Batch b;
  const int64_t N = b.B * b.T;
  for (int64_t i = 0; i < N; ++i) b.ids.push_back(static_cast<int32_t>((i * 7 + 3) % 37));
  b.targets.assign(static_cast<size_t>(N), -100);
  if (cfg.task == ModelTask::sequence_classification) {
    b.targets[0] = 2;
    b.targets[static_cast<size_t>(b.T)] = 1;
  } else {
    for (int64_t i : {1, 4, 8, 12}) b.targets[static_cast<size_t>(i)] = (i * 5) % 37;
  }
  return b;
}

struct StepMemory {
  MemoryStats stats;
  float loss = 0;
};

StepMemory step(const ModelConfig& cfg, const Backend& kind, AttentionImpl impl,
                CheckpointPolicy pol, ComputeDType dt) {
  Device dev(kind);
  auto m = create_model(cfg, dev);
  if (kind.backed()) m->init_weights(5);
  m->set_attention(impl);
  CheckpointConfig ck;
  ck.policy = pol;
  ck.every_k = 1;
  m->set_checkpointing(ck);
  m->set_compute_dtype(dt);
  // bf16 runs on this machine's bf16 GEMM path when it has one (the saved GEMM inputs then stay
  // bf16 and the nn.Linear layouts widen them in backward).
  m->set_gemm_path(kernels::resolve_gemm_path("auto"));
  const Batch b = batch(cfg);
  StepMemory r;
  r.loss = m->forward(b.ids.data(), b.targets.data(), b.B, b.T, true, 1.0f);
  m->backward(1.0f);
  r.stats = dev.pool().stats();
  return r;
}

TEST(Bert, MetaEqualsCpuToTheByte) {
  for (ModelTask task : {ModelTask::masked_lm, ModelTask::sequence_classification})
    for (AttentionImpl impl : {AttentionImpl::naive, AttentionImpl::flash})
      for (CheckpointPolicy pol :
           {CheckpointPolicy::none, CheckpointPolicy::every_layer, CheckpointPolicy::selective})
        for (ComputeDType dt : {ComputeDType::f32, ComputeDType::f16, ComputeDType::bf16}) {
          SCOPED_TRACE(std::string(task_name(task)) +
                       (impl == AttentionImpl::naive ? " naive" : " flash") +
                       (pol == CheckpointPolicy::none          ? ""
                        : pol == CheckpointPolicy::every_layer ? " ckpt"
                                                               : " selective") +
                       (dt == ComputeDType::f32   ? ""
                        : dt == ComputeDType::f16 ? " fp16"
                                                  : " bf16"));
          const ModelConfig cfg = tiny(task);
          const StepMemory cpu = step(cfg, cpu_backend(), impl, pol, dt);
          const StepMemory meta = step(cfg, meta_backend(), impl, pol, dt);
          EXPECT_TRUE(std::isfinite(cpu.loss));
          EXPECT_EQ(cpu.stats.peak_total, meta.stats.peak_total);
          EXPECT_EQ(cpu.stats.alloc_count, meta.stats.alloc_count);
          for (size_t c = 0; c < cpu.stats.max_by_category.size(); ++c) {
            EXPECT_EQ(cpu.stats.max_by_category[c], meta.stats.max_by_category[c]) << c;
            EXPECT_EQ(cpu.stats.peak_by_category[c], meta.stats.peak_by_category[c]) << c;
          }
        }
}

// Naive attention with probability dropout keeps the (B,NH,T,T) mask (1 byte) and the dropped
// probabilities (4 bytes) beside the probabilities, as eager attention does; flash keeps none.
TEST(Bert, NaiveDropoutKeepsEagerAttentionsTensors) {
  const ModelConfig cfg = tiny(ModelTask::masked_lm);
  const int64_t scores = 2 * 3 * 7 * 7;  // B * NH * T * T
  const int64_t per_layer = scores * (4 + 1 + 4);
  ModelConfig off = resolve_model(
      "bert-tiny", {},
      {"vocab_size=37", "hidden_size=12", "num_attention_heads=3", "intermediate_size=19",
       "max_position_embeddings=11", "hidden_dropout_prob=0.2", "attention_probs_dropout_prob=0"});
  off = with_task(off, ModelTask::masked_lm, 0);
  const auto with =
      step(cfg, meta_backend(), AttentionImpl::naive, CheckpointPolicy::none, ComputeDType::f32);
  const auto without =
      step(off, meta_backend(), AttentionImpl::naive, CheckpointPolicy::none, ComputeDType::f32);
  const size_t act = static_cast<size_t>(Category::activations);
  EXPECT_EQ(with.stats.max_by_category[act] - without.stats.max_by_category[act],
            2 * (per_layer - scores * 4));  // 2 layers: the mask and the dropped copy
  const auto fw =
      step(cfg, meta_backend(), AttentionImpl::flash, CheckpointPolicy::none, ComputeDType::f32);
  const auto fo =
      step(off, meta_backend(), AttentionImpl::flash, CheckpointPolicy::none, ComputeDType::f32);
  EXPECT_EQ(fw.stats.max_by_category[act], fo.stats.max_by_category[act]);
}

// Loss with the dropout masks of forward count 0 every time.
double loss_at(Model& m, const Batch& b) {
  m.set_forward_count(0);
  const double l = m.forward(b.ids.data(), b.targets.data(), b.B, b.T, true, 1.0f);
  m.free_activations();
  return l;
}

void finite_differences(ModelTask task, AttentionImpl impl) {
  // Large weights (initializer_range 1) make gradients large against the fp32 loss's rounding;
  // the reference kernels (double accumulation) keep the perturbed losses smooth.
  ModelConfig cfg = tiny(task);
  cfg = with_task(apply_config_overrides(architecture("bert"), cfg, {}, {"initializer_range=1.0"}),
                  task, task == ModelTask::sequence_classification ? 3 : 0);
  Device dev(cpu_backend(), &ref_op_table());
  auto m = create_model(cfg, dev);
  m->init_weights(11);
  m->set_attention(impl);
  const Batch b = batch(cfg);
  m->set_forward_count(0);
  m->forward(b.ids.data(), b.targets.data(), b.B, b.T, true, 1.0f);
  m->backward(1.0f);
  for (Parameter* p : m->parameters()) {
    SCOPED_TRACE(p->name);
    ASSERT_TRUE(p->grad.defined());
    std::vector<float> analytic(p->grad.data<float>(), p->grad.data<float>() + p->numel());
    std::vector<float> x(p->value.data<float>(), p->value.data<float>() + p->numel());
    // Large tables: the rows the batch touches are enough (the rest have zero gradient).
    if (x.size() > 400) {
      x.resize(400);
      analytic.resize(400);
    }
    const auto numeric = test::numerical_grad(x, [&] {
      std::copy(x.begin(), x.end(), p->value.data<float>());
      return loss_at(*m, b);
    });
    std::copy(x.begin(), x.end(), p->value.data<float>());
    // The fp32 forward rounds every activation: a perturbed loss moves in steps of about 5e-7,
    // so central differences carry up to about 3e-4 of noise: every element must agree within
    // 1e-2 of the gradient's scale (test::expect_grad_close's bound) or that noise floor, 1e-3
    // (the biases after post-norm are small; the key biases are exactly 0, since softmax ignores
    // a per-row constant). The tight float64 comparison is bert_parity_test.cpp's.
    double scale = 0;
    for (float a : analytic) scale = std::max(scale, std::fabs(double{a}));
    for (size_t i = 0; i < analytic.size(); ++i)
      EXPECT_NEAR(analytic[i], numeric[i], std::max(1e-2 * scale, 1e-3))
          << p->name << " element " << i;
  }
}

TEST(Bert, FiniteDifferencesMaskedLMWithDropout) {
  finite_differences(ModelTask::masked_lm, AttentionImpl::naive);
  finite_differences(ModelTask::masked_lm, AttentionImpl::flash);
}

TEST(Bert, FiniteDifferencesClassificationWithDropout) {
  finite_differences(ModelTask::sequence_classification, AttentionImpl::flash);
}

std::vector<std::vector<float>> grads(const ModelConfig& cfg, AttentionImpl impl,
                                      CheckpointPolicy pol) {
  Device dev(cpu_backend());
  auto m = create_model(cfg, dev);
  m->init_weights(3);
  m->set_attention(impl);
  CheckpointConfig ck;
  ck.policy = pol;
  ck.every_k = 1;
  m->set_checkpointing(ck);
  const Batch b = batch(cfg);
  m->set_forward_count(7);
  m->forward(b.ids.data(), b.targets.data(), b.B, b.T, true, 1.0f);
  m->backward(1.0f);
  std::vector<std::vector<float>> g;
  for (Parameter* p : m->parameters())
    g.emplace_back(p->grad.data<float>(), p->grad.data<float>() + p->numel());
  return g;
}

TEST(Bert, CheckpointingRecomputesTheSameDropoutBitwise) {
  for (ModelTask task : {ModelTask::masked_lm, ModelTask::sequence_classification})
    for (AttentionImpl impl : {AttentionImpl::naive, AttentionImpl::flash}) {
      const ModelConfig cfg = tiny(task);
      const auto plain = grads(cfg, impl, CheckpointPolicy::none);
      EXPECT_EQ(plain, grads(cfg, impl, CheckpointPolicy::every_layer));
      EXPECT_EQ(plain, grads(cfg, impl, CheckpointPolicy::selective));
    }
}

// Selective checkpointing keeps, per layer, neither the first LayerNorm's output (N,C) (the MLP's
// input), nor the GELU's output (N,I) (the second dense's input), nor naive attention's
// probabilities, dropout mask and dropped probabilities (B,NH,T,T): fp32 4 + 4, the mask 1. What
// a training forward leaves live, fp32:
TEST(Bert, SelectiveCheckpointingDropsTheCheapTensors) {
  const ModelConfig cfg = tiny(ModelTask::masked_lm);
  const Batch b = batch(cfg);
  const int64_t N = b.B * b.T, C = 12, I = 19, scores = 2 * 3 * 7 * 7, L = 2;
  auto forward_activations = [&](AttentionImpl impl, CheckpointPolicy pol) {
    Device dev(meta_backend());
    auto m = create_model(cfg, dev);
    m->set_attention(impl);
    CheckpointConfig ck;
    ck.policy = pol;
    m->set_checkpointing(ck);
    m->forward(b.ids.data(), b.targets.data(), b.B, b.T, true, 1.0f);
    return dev.pool().stats().live[static_cast<size_t>(Category::activations)];
  };
  for (AttentionImpl impl : {AttentionImpl::naive, AttentionImpl::flash}) {
    SCOPED_TRACE(impl == AttentionImpl::naive ? "naive" : "flash");
    const int64_t probs = impl == AttentionImpl::naive ? scores * (4 + 1 + 4) : 0;
    EXPECT_EQ(forward_activations(impl, CheckpointPolicy::none) -
                  forward_activations(impl, CheckpointPolicy::selective),
              L * (4 * N * C + 4 * N * I + probs));
  }
}

// NEFTune (the HF Trainer's neftune_noise_alpha on the word embeddings' output) changes training
// forwards only, with the same draws for the same forward count, and no memory.
TEST(Bert, NeftuneNoiseChangesTrainingForwardsOnly) {
  for (ModelTask task : {ModelTask::masked_lm, ModelTask::sequence_classification}) {
    SCOPED_TRACE(task_name(task));
    const ModelConfig cfg = tiny(task);
    const Batch b = batch(cfg);
    Device dev(cpu_backend());
    auto m = create_model(cfg, dev);
    m->init_weights(3);
    const double clean = loss_at(*m, b);
    const float eval = m->forward(b.ids.data(), b.targets.data(), b.B, b.T, false);
    m->free_activations();
    const int64_t peak = dev.pool().stats().peak_total;
    m->set_neftune_noise_alpha(5.0);
    const double noisy = loss_at(*m, b);
    EXPECT_NE(noisy, clean);
    EXPECT_EQ(loss_at(*m, b), noisy);
    EXPECT_EQ(m->forward(b.ids.data(), b.targets.data(), b.B, b.T, false), eval);
    m->free_activations();
    EXPECT_EQ(dev.pool().stats().peak_total, peak);
  }
}

TEST(Bert, TasksAndHeadsAreRefusedByName) {
  EXPECT_THROW(with_task(tiny(ModelTask::masked_lm), ModelTask::causal_lm, 0), Error);
  const ModelConfig gpt2 = resolve_model("gpt2-tiny");
  EXPECT_THROW(with_task(gpt2, ModelTask::masked_lm, 0), Error);
  EXPECT_THROW(resolve_model("bert-tiny", {}, {"hidden_act=\"relu\""}), Error);
  EXPECT_THROW(resolve_model("bert-tiny", {}, {"position_embedding_type=relative_key"}), Error);
  // transformers' BertForSequenceClassification of bert-large-uncased, 2 labels: BertModel's
  // 335,141,888 (with the pooler) + the classifier's 1024 * 2 + 2.
  EXPECT_EQ(with_task(resolve_model("bert-large-uncased"), ModelTask::sequence_classification, 2)
                .num_params,
            335143938);
}

TEST(Collator, MasksAboutFifteenPercentAsTransformersDoes) {
  const int64_t n = 200000, V = 1000;
  std::vector<int32_t> in(n), tg(n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<int32_t>(i % 997);
  const std::vector<int32_t> orig = in;
  mask_tokens(in.data(), tg.data(), n, V, 999, collator_key(42, 3, 0));
  int64_t masked = 0, as_mask = 0, kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (tg[i] < 0) {
      EXPECT_EQ(in[i], orig[i]);
      continue;
    }
    ++masked;
    EXPECT_EQ(tg[i], orig[i]);
    as_mask += in[i] == 999 ? 1 : 0;
    kept += in[i] == orig[i] ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(masked) / n, 0.15, 0.005);
  EXPECT_NEAR(static_cast<double>(as_mask) / masked, 0.8, 0.01);
  EXPECT_NEAR(static_cast<double>(kept) / masked, 0.1, 0.01);
  std::vector<int32_t> again = orig, tg2(n);
  mask_tokens(again.data(), tg2.data(), n, V, 999, collator_key(42, 3, 0));
  EXPECT_EQ(again, in);
  EXPECT_EQ(tg2, tg);
}

// The Trainer: masked-lm and sequence classification train on dummy data and the loss falls.
TEST(Bert, TrainerRunsBothTasks) {
  for (const char* task : {"masked-lm", "sequence-classification"}) {
    SCOPED_TRACE(task);
    TrainingArguments a;
    a.model = "bert-tiny";
    a.task = task;
    a.data = "dummy";
    a.seq_len = 16;
    a.per_device_train_batch_size = 4;
    a.max_steps = 12;
    a.learning_rate = 1e-3;
    a.gradient_accumulation_steps = 2;
    test::TrainRun run(a);
    const TrainResult r = run.train();
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.loss.size(), 12u);
    for (double l : r.loss) EXPECT_TRUE(std::isfinite(l));
  }
}

// Sequence classification learns with LoRA (PEFT's default targets for bert: query, value) and
// with QLoRA. On --data dummy a sample's label is random (collator.h's dummy_label) and a short
// run never meets a sample twice, so there the loss cannot fall below ln(labels). Here the token
// stream holds exactly one batch of 8 windows, each keeping its random label every epoch: every
// step shows the same 8 rows. A model that learned only the labels' frequencies would reach
// their entropy H at best; the loss falls well below it, so the rows are memorized. (Slowly: as
// PEFT without task_type SEQ_CLS, LoRA leaves the freshly initialized classifier frozen, and its
// small weights bound the logits.)
TEST(Bert, ClassificationMemorizesItsRowsWithLoraAndQlora) {
  constexpr int64_t kRows = 8, kT = 16, kLabels = 3, kSteps = 80;
  double H = 0;
  {
    std::vector<int> count(kLabels, 0);
    for (int64_t w = 0; w < kRows; ++w) ++count[static_cast<size_t>(dummy_label(42, w, kLabels))];
    for (int c : count)
      if (c > 0) H -= c / double{kRows} * std::log(c / double{kRows});
  }
  ASSERT_GT(H, 1.0);  // seed 42: 3, 2 and 3 rows of the labels, H = 1.082
  for (bool qlora : {false, true}) {
    SCOPED_TRACE(qlora ? "qlora" : "lora");
    TrainingArguments a;
    a.model = "bert-tiny";
    a.task = "sequence-classification";
    a.num_labels = kLabels;
    a.data = "dummy";  // the labels' source; the tokens are the stream below
    a.seed = 42;
    a.seq_len = kT;
    a.per_device_train_batch_size = kRows;
    a.max_steps = kSteps;
    a.learning_rate = 1e-2;
    if (qlora) {
      a.apply_qlora_recipe();
    } else {
      a.lora_r = 8;
      a.lora_alpha = 16;
    }
    const ModelConfig cfg = a.model_config();
    Device dev(cpu_backend());
    auto m = create_model(cfg, dev, a.param_dtype(), a.weight_quant());
    load_initial_weights(*m, a, cfg);
    std::vector<int32_t> tokens(kRows * kT + 1);  // kRows windows of T + 1 tokens, stride T
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<int32_t>((i * 37 + 11) % 256);
    const InMemoryTokenSource data(tokens);
    Trainer t(a, *m, &data);
    const TrainResult r = t.train();
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.loss.size(), static_cast<size_t>(kSteps));
    double first = 0, last = 0;
    for (size_t i = 0; i < 5; ++i) {
      first += r.loss[i] / 5;
      last += r.loss[kSteps - 5 + i] / 5;
    }
    // The untrained classifier: about uniform at the first step (the classifier trains beside the
    // adapters, as PEFT's SEQ_CLS keeps it: the next steps fall at once).
    EXPECT_NEAR(r.loss[0], std::log(double{kLabels}), 0.05);
    EXPECT_LT(first, r.loss[0]);
    EXPECT_LT(last, H - 0.2) << "first " << first << " last " << last << " H " << H;
  }
}

// `snug plan`'s dry run (meta) equals a real training run's peak to the byte, with the
// optimizer, both heads, dropout, naive attention, accumulation, checkpointing and fp16.
TEST(Bert, PlanEqualsTheMeasuredPeakToTheByte) {
  for (const char* task : {"masked-lm", "sequence-classification"})
    for (bool combined : {false, true}) {
      SCOPED_TRACE(std::string(task) + (combined ? " accum+ckpt+fp16" : ""));
      TrainingArguments a;
      a.model = "bert-tiny";
      a.task = task;
      a.data = "dummy";
      a.seq_len = 24;
      a.per_device_train_batch_size = 2;
      a.max_steps = 2;
      a.attention = "naive";
      if (combined) {
        a.gradient_accumulation_steps = 2;
        a.gradient_checkpointing = true;
        a.fp16 = true;
      }
      const MemoryStats plan = dry_run(a);
      test::TrainRun run(a);
      const TrainResult r = run.train();
      ASSERT_TRUE(r.error.empty()) << r.error;
      const MemoryStats got = run.dev.pool().stats();
      EXPECT_EQ(plan.peak_total, got.peak_total);
      for (size_t c = 0; c < got.max_by_category.size(); ++c) {
        EXPECT_EQ(plan.max_by_category[c], got.max_by_category[c]) << c;
        EXPECT_EQ(plan.peak_by_category[c], got.peak_by_category[c]) << c;
      }
    }
}

}  // namespace bert_test
}  // namespace
}  // namespace snug
