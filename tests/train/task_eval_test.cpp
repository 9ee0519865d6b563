// Evaluation of the heads that do not predict the next token (train/trainer.h). Sequence
// classification: eval_accuracy is the share of rows whose argmax logit is their label, with the
// labels data/collator.h gives the evaluation rows; the test recomputes both eval_loss and
// eval_accuracy from the logits of plain forwards of the trained model.
// --metric-for-best-model eval_accuracy keeps the checkpoint with the highest accuracy (the
// Trainer's greater_is_better; a tie keeps the earlier), and a causal LM refuses it by name.
// Masked LM: the evaluation batches are masked by the collator, the same masks every time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/device.h"
#include "core/error.h"
#include "data/batches.h"
#include "data/collator.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "report/report.h"
#include "support/train_run.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace task_eval_test {

constexpr int64_t kLabels = 3;

TrainingArguments classifier_args() {
  TrainingArguments a;
  a.model = "bert-tiny";
  a.task = "sequence-classification";
  a.num_labels = kLabels;
  a.data = "dummy";
  a.eval_split = 0.0005;  // the last 525 of 2^20 tokens: 16 rows of 32 + 1
  a.seq_len = 32;
  a.per_device_train_batch_size = 4;
  a.per_device_eval_batch_size = 5;  // 16 rows: batches of 5, 5, 5, 1
  a.attention = "naive";
  a.learning_rate = 3e-3;
  a.seed = 11;
  return a;
}

struct Expected {
  double loss = 0, accuracy = 0;
  int64_t rows = 0;
};

// eval_loss and eval_accuracy of `model` on `eval` as the Trainer should compute them, from the
// logits of forwards without targets (one row at a time) and dummy_eval_label.
Expected expected(Model& model, const TrainData& eval, const TrainingArguments& a) {
  const std::unique_ptr<BatchSource> src = eval.batches(1, a.seq_len, a.seed, false);
  Expected e;
  int64_t correct = 0;
  double loss = 0;
  std::vector<int32_t> in(static_cast<size_t>(a.seq_len)), tg(in.size());
  for (int64_t row = 0; row < src->items_per_epoch(); ++row) {
    src->next_rows(1, in.data(), tg.data(), nullptr);
    model.forward(in.data(), nullptr, 1, a.seq_len, false);
    const Tensor& logits = model.logits();
    EXPECT_EQ(logits.shape(), (Shape{1, kLabels}));
    const float* z = logits.data<float>();
    const int32_t label = dummy_eval_label(a.seed, row, kLabels);
    const auto argmax = std::max_element(z, z + kLabels) - z;
    correct += argmax == label ? 1 : 0;
    const double m = *std::max_element(z, z + kLabels);
    double sum = 0;
    for (int64_t k = 0; k < kLabels; ++k) sum += std::exp(static_cast<double>(z[k]) - m);
    loss += m + std::log(sum) - z[label];
    model.free_activations();
    ++e.rows;
  }
  e.accuracy = static_cast<double>(correct) / static_cast<double>(e.rows);
  e.loss = loss / static_cast<double>(e.rows);
  return e;
}

TEST(EvalAccuracy, SequenceClassificationReportsTheArgmaxAccuracy) {
  TrainingArguments a = classifier_args();
  a.max_steps = 4;
  a.eval_steps = 2;
  test::TrainRun run(a);
  const TrainResult r = run.train();
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.evals.size(), 2u);  // steps 2 and 4
  for (const EvalLog& e : r.evals) {
    EXPECT_EQ(e.samples, 16);
    ASSERT_TRUE(e.accuracy.has_value());
  }
  // The model now has the weights of the last evaluation.
  const Expected want = expected(*run.model, *run.data.eval, a);
  EXPECT_EQ(want.rows, 16);
  EXPECT_EQ(*r.evals.back().accuracy, want.accuracy);
  EXPECT_NEAR(r.evals.back().eval_loss, want.loss, 1e-5);
  // Both are evaluations of something: not every row right, not every row wrong.
  EXPECT_GT(want.accuracy, 0.0);
  EXPECT_LT(want.accuracy, 1.0);
  const nlohmann::json j = make_report(a, *run.model, r, run.dev.pool().stats(), std::nullopt);
  EXPECT_EQ(j["eval_accuracy"].get<double>(), want.accuracy);
  ASSERT_EQ(j["eval_history"].size(), 2u);
  EXPECT_EQ(j["eval_history"][0]["eval_accuracy"].get<double>(), *r.evals[0].accuracy);
  EXPECT_EQ(j["eval_history"][1]["eval_accuracy"].get<double>(), want.accuracy);
}

TEST(EvalAccuracy, CausalLmEvaluationHasNoAccuracy) {
  TrainingArguments a;
  a.max_steps = 2;
  a.seq_len = 16;
  a.eval_split = 0.01;
  test::TrainRun run(a);
  const TrainResult r = run.train();
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.evals.size(), 1u);
  EXPECT_FALSE(r.evals[0].accuracy.has_value());
  const nlohmann::json j = make_report(a, *run.model, r, run.dev.pool().stats(), std::nullopt);
  EXPECT_FALSE(j.contains("eval_accuracy"));
  EXPECT_FALSE(j["eval_history"][0].contains("eval_accuracy"));
}

TEST(EvalAccuracy, LoadBestModelAtEndKeepsTheHighestAccuracy) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("snug_best_acc_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(out);
  TrainingArguments a = classifier_args();
  a.max_steps = 6;
  a.learning_rate = 2e-2;  // large enough that the predictions move between evaluations
  a.eval_steps = 1;
  a.save_steps = 1;
  a.output_dir = out;
  a.load_best_model_at_end = true;
  a.metric_for_best_model = "accuracy";  // the Trainer's eval_ prefix is added
  EXPECT_EQ(a.best_metric_key(), "eval_accuracy");
  EXPECT_TRUE(a.greater_is_better());
  test::TrainRun run(a);
  const TrainResult r = run.train();
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.evals.size(), 6u);
  size_t best = 0, worst = 0;
  for (size_t i = 1; i < r.evals.size(); ++i) {
    if (*r.evals[i].accuracy > *r.evals[best].accuracy) best = i;  // a tie keeps the earlier
    if (*r.evals[i].accuracy < *r.evals[worst].accuracy) worst = i;
  }
  // The accuracies differ, so higher-is-better and lower-is-better pick different checkpoints.
  ASSERT_NE(*r.evals[best].accuracy, *r.evals[worst].accuracy);
  EXPECT_EQ(r.best_metric, *r.evals[best].accuracy);
  EXPECT_EQ(std::filesystem::path(r.best_model_checkpoint).filename(),
            "checkpoint-" + std::to_string(r.evals[best].step));
  // The model now holds the best checkpoint's weights: its accuracy again.
  EXPECT_EQ(expected(*run.model, *run.data.eval, a).accuracy, r.best_metric);
  std::filesystem::remove_all(out);
}

TEST(EvalAccuracy, MaskedLmEvaluatesTheCollatorsMasksEveryTime) {
  TrainingArguments a = classifier_args();
  a.task = "masked-lm";
  a.num_labels = 0;
  a.max_steps = 2;
  a.eval_steps = 1;
  a.learning_rate = 0;  // the model does not change: every evaluation is the same
  test::TrainRun run(a);
  const TrainResult r = run.train();
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.evals.size(), 2u);
  EXPECT_EQ(r.evals[0].eval_loss, r.evals[1].eval_loss);
  EXPECT_FALSE(r.evals[0].accuracy.has_value());
  // The loss over the masked tokens of each batch (data/collator.h), rows-weighted.
  const std::unique_ptr<BatchSource> src =
      run.data.eval->batches(a.per_device_eval_batch_size, a.seq_len, a.seed, false);
  std::vector<int32_t> in(static_cast<size_t>(a.per_device_eval_batch_size * a.seq_len)),
      tg(in.size());
  double weighted = 0;
  int64_t rows_in = 0, masked = 0;
  for (int64_t done = 0; done < src->items_per_epoch();) {
    const int64_t rows = std::min(a.per_device_eval_batch_size, src->items_per_epoch() - done);
    const int64_t cols = src->next_rows(rows, in.data(), tg.data(), nullptr);
    const std::vector<int32_t> original(in.begin(), in.begin() + rows * cols);
    mask_tokens(in.data(), tg.data(), rows * cols, run.cfg.shape.vocab_size,
                static_cast<int32_t>(run.cfg.mask_token_id), eval_collator_key(a.seed, done));
    for (int64_t i = 0; i < rows * cols; ++i) {
      masked += tg[static_cast<size_t>(i)] >= 0 ? 1 : 0;
      if (tg[static_cast<size_t>(i)] >= 0) {
        EXPECT_EQ(tg[static_cast<size_t>(i)], original[static_cast<size_t>(i)]);
      }
    }
    const float loss = run.model->forward(in.data(), tg.data(), rows, cols, false);
    run.model->free_activations();
    weighted += static_cast<double>(loss) * static_cast<double>(rows);
    rows_in += rows;
    done += rows;
  }
  EXPECT_GT(masked, 0);
  EXPECT_LT(masked, rows_in * a.seq_len / 4);  // about 15% of the tokens, not every one
  EXPECT_NEAR(r.evals[0].eval_loss, weighted / static_cast<double>(rows_in), 1e-6);
}

TEST(EvalAccuracy, CausalLmRefusesAccuracyAsTheBestMetricByName) {
  for (const char* metric : {"eval_accuracy", "accuracy"}) {
    TrainingArguments a;
    a.seq_len = 16;
    a.max_steps = 2;
    a.metric_for_best_model = metric;
    Device dev(cpu_backend());
    const auto model = create_model(a.model_config(), dev);
    const OpenedData data = open_data(a.data_options(256));
    try {
      Trainer t(a, *model, data.train.get(), nullptr);
      ADD_FAILURE() << "no error for " << metric;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--metric-for-best-model ") + metric +
                    ": accuracy is computed for --task sequence-classification only; gpt2-tiny "
                    "is --task causal-lm (use eval_loss)");
    }
  }
}

}  // namespace task_eval_test
}  // namespace
}  // namespace snug
