// `snug bench seeds`: the seeds' matrix on gpt2-tiny (seq 32, 2 steps), its memory ordering, the
// JSON and SVG it writes, and the batch-size sweep stopping at the first batch that does not fit.
#include "cli/seeds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace seeds_test {

using ::testing::HasSubstr;
using ::testing::Not;

SeedsOptions tiny() {
  SeedsOptions o;
  o.model = "gpt2-tiny";
  o.seq_len = 32;
  o.max_steps = 2;
  return o;
}

// The matrix is run once for the tests that only read it.
const std::vector<BenchRow>& tiny_rows() {
  static const std::vector<BenchRow> rows = run_seed_matrix(tiny());
  return rows;
}

const BenchRow& row(const std::string& name) {
  for (const BenchRow& r : tiny_rows())
    if (r.name == name) return r;
  throw Error("no row " + name);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(BenchSeeds, MatrixHasTheSeedsRowsInOrderWithFourSamplesPerStep) {
  const std::vector<BenchRow>& rows = tiny_rows();
  std::vector<std::string> names;
  for (const BenchRow& r : rows) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"vanilla", "grad_accum", "grad_ckpt", "fp16", "bf16",
                                             "combined", "adafactor", "adafactor_combined",
                                             "adamw_8bit", "all"}));
  for (const BenchRow& r : rows) {
    EXPECT_EQ(r.args.per_device_train_batch_size * r.args.gradient_accumulation_steps, 4) << r.name;
    EXPECT_EQ(r.args.data, "dummy");
    EXPECT_EQ(r.args.seq_len, 32);
    EXPECT_EQ(r.args.max_steps, 2);
  }
  EXPECT_FALSE(row("vanilla").args.gradient_checkpointing);
  EXPECT_TRUE(row("grad_ckpt").args.gradient_checkpointing);
  EXPECT_EQ(row("adafactor").args.optim, "adafactor");
  EXPECT_EQ(row("all").args.optim, "adamw_bnb_8bit");
  // Every seeds' reference row names a row of the matrix.
  for (const SeedReference& ref : seeds_reference()) EXPECT_NO_THROW(row(ref.name)) << ref.name;
}

TEST(BenchSeeds, EveryAvailableRowHasPositiveTimeAndSamplesPerSecond) {
  int available = 0;
  for (const BenchRow& r : tiny_rows()) {
    if (!r.available) {
      EXPECT_FALSE(r.note.empty()) << r.name;
      continue;
    }
    ++available;
    EXPECT_TRUE(r.error.empty()) << r.name << ": " << r.error;
    EXPECT_GT(r.train_runtime, 0) << r.name;
    EXPECT_GT(r.train_samples_per_second, 0) << r.name;
    EXPECT_GT(r.memory.peak_total, 0) << r.name;
  }
  EXPECT_GE(available, 3);
  // The mixed precision rows run.
  for (const char* p : {"fp16", "bf16"}) EXPECT_TRUE(row(p).available) << p;
}

TEST(BenchSeeds, MemoryFallsFromVanillaToAccumulationToCheckpointing) {
  const int64_t vanilla = row("vanilla").memory.peak_total;
  const int64_t accum = row("grad_accum").memory.peak_total;
  const int64_t ckpt = row("grad_ckpt").memory.peak_total;
  EXPECT_GT(vanilla, accum);
  EXPECT_GT(accum, ckpt);
  // The optimizers with less state come in under AdamW at the same batch.
  for (const char* opt : {"adafactor", "adamw_8bit"})
    if (row(opt).available) {
      EXPECT_LT(row(opt).memory.peak_total, vanilla) << opt;
    }
  if (row("all").available) {
    EXPECT_LT(row("all").memory.peak_total, ckpt);
  }
}

// The seeds measured bert-large-uncased: another model's plan shows their figures for scale,
// named, with no difference computed (it would compare two different models).
TEST(BenchSeeds, PlanOnlyOfAnotherModelNamesBertLargeAndComputesNoDiff) {
  std::vector<BenchRow> rows = run_seed_plan(tiny());
  const std::string other = seeds_plan_table(rows, "gpt2-tiny");
  EXPECT_THAT(other, HasSubstr("bert-large: the guide's \"GPU memory occupied\" for "
                               "bert-large-uncased, not gpt2-tiny"));
  EXPECT_THAT(other, Not(HasSubstr("%")));             // no diff column values
  EXPECT_THAT(other, HasSubstr("14949         -\n"));  // the vanilla row: seed, then no diff
  const std::string same = seeds_plan_table(rows, kSeedsModel);
  EXPECT_THAT(same, HasSubstr("seed (MiB)"));
  EXPECT_THAT(same, HasSubstr("%"));
}

TEST(BenchSeeds, JsonAndSvgFromTheCommandLine) {
  test::TempDir tmp;
  const std::string json = tmp.path("rows.json"), svg = tmp.path("rows.svg");
  const test::CliResult r = test::run_snug(
      "bench seeds --model gpt2-tiny --seq-len 32 --max-steps "
      "2 --threads 2 --json " +
      json + " --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Samples/second"));
  EXPECT_THAT(r.out, HasSubstr("Memory occupied (MiB)"));
  EXPECT_THAT(r.out, Not(HasSubstr("not available")));  // every row ran, fp16/bf16 included
  EXPECT_THAT(r.out, HasSubstr("14949"));  // the seeds' own vanilla row, for comparison
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), seed_matrix().size());
  for (const auto& e : j)
    for (const char* key :
         {"name", "config", "train_runtime", "train_samples_per_second", "peak_bytes",
          "peak_by_category", "max_by_category", "available", "note"})
      EXPECT_TRUE(e.contains(key)) << key;
  EXPECT_EQ(j[0]["name"], "vanilla");
  EXPECT_EQ(j[0]["config"]["per_device_train_batch_size"], 4);
  EXPECT_GT(j[0]["peak_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(j[0]["peak_by_category"].size(), 8u);
  const std::string chart = read_file(svg);
  EXPECT_EQ(chart.rfind("<svg", 0), 0u);
  EXPECT_THAT(chart, HasSubstr("</svg>"));
  EXPECT_THAT(chart, HasSubstr("activations"));  // the legend
  EXPECT_THAT(chart, HasSubstr("grad_ckpt"));    // a bar's label
}

TEST(BenchSeeds, SweepOnMetaStopsAtTheFirstBatchThatDoesNotFit) {
  const int64_t capacity = 64 * 1000 * 1000;
  const std::vector<BenchRow> rows = run_batch_sweep(tiny(), capacity);
  ASSERT_GE(rows.size(), 2u);
  int64_t batch = 4;
  for (size_t i = 0; i < rows.size(); ++i, batch *= 2) {
    EXPECT_EQ(rows[i].args.per_device_train_batch_size, batch);
    EXPECT_TRUE(rows[i].dry);
    EXPECT_EQ(rows[i].args.device, "meta");
  }
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_FALSE(rows[i].out_of_memory);
    EXPECT_LE(rows[i].memory.peak_total, capacity);
    if (i > 0) {
      EXPECT_GT(rows[i].memory.peak_total, rows[i - 1].memory.peak_total);
    }
  }
  const BenchRow& oom = rows.back();
  EXPECT_TRUE(oom.out_of_memory);
  EXPECT_GT(oom.need_bytes, capacity);
  EXPECT_THAT(oom.note, HasSubstr("OOM"));
  EXPECT_THAT(sweep_table(rows, capacity), HasSubstr("OOM (needs"));
  EXPECT_EQ(memory_svg(rows, "sweep").rfind("<svg", 0), 0u);
}

TEST(BenchSeeds, CommandLineHelpAndErrors) {
  test::CliResult r = test::run_snug("bench seeds --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--model", "--seq-len", "--max-steps", "--data", "--device-memory",
                           "--json", "--plot", "--sweep"})
    EXPECT_THAT(r.out, HasSubstr(flag));
  EXPECT_THAT(r.out, HasSubstr("gpt2-tiny"));  // default shown
  EXPECT_THAT(r.out, HasSubstr("dummy"));
  r = test::run_snug("bench seeds --sweep");  // the sweep needs a capacity
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--device-memory"));
  r = test::run_snug("bench seeds --seq-len 300");  // gpt2-tiny has 256 positions
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--seq-len 300"));
  r = test::run_snug("bench seeds --plot chart.png --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("SVG"));
}

}  // namespace seeds_test
}  // namespace
}  // namespace snug
