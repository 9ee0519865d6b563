// `snug quantize`: the seed chapter's quantization comparison on synthetic values or on the
// tensors of a safetensors file (report/quant_compare.h): one table row per method with bits per
// parameter, error, codes used, time and working memory; --json and --plot write the same
// numbers as JSON and an SVG of value histograms and code usage.
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "core/error.h"
#include "io/excerpt.h"
#include "io/output_file.h"
#include "report/quant_compare.h"
#include "report/report.h"

namespace snug::cli {

namespace {

// quant/compare.cpp's bound on synthetic values (4 GiB of floats).
constexpr int64_t kMaxSyntheticCount = int64_t{1} << 30;

struct QuantizeFlags {
  std::string method = "all";
  int64_t block_size = 0;  // 0: unset (the method's default)
  bool block_given = false;
  std::string input;
  std::string tensor;
  std::string synthetic;  // empty: both normal and outliers (unless --input)
  int64_t count = int64_t{1} << 20;
  uint64_t seed = 11;
  std::string plot;
  std::string json;
};

int run_quantize(const QuantizeFlags& f) {
  if (!f.plot.empty())
    SNUG_CHECK(f.plot.ends_with(".svg") && f.plot.size() > 4, "--plot '", excerpt(f.plot),
               "': only SVG is written (give a FILE.svg)");
  const std::optional<int64_t> block =
      f.block_given ? std::optional<int64_t>(f.block_size) : std::nullopt;
  // Resolve the methods first: a bad method or block size fails before any data is read.
  std::vector<quant::Method> methods;
  if (f.method == "all")
    methods = quant::all_methods(block);
  else
    methods.push_back(quant::make_method(f.method, block));

  std::vector<quant::ValueSet> inputs;
  if (!f.input.empty()) {
    inputs.push_back(quant::file_values(f.input, f.tensor));
  } else if (!f.synthetic.empty()) {
    inputs.push_back(quant::synthetic_values(f.synthetic, f.count, f.seed));
  } else {
    inputs.push_back(quant::synthetic_values("normal", f.count, f.seed));
    inputs.push_back(quant::synthetic_values("outliers", f.count, f.seed));
  }

  std::vector<quant::Comparison> comparisons;
  for (quant::ValueSet& in : inputs) {
    quant::Comparison c;
    c.input = std::move(in);
    for (const quant::Method& m : methods) c.results.push_back(quant::evaluate(m, c.input));
    std::printf("%s%s", comparisons.empty() ? "" : "\n", quant::comparison_table(c).c_str());
    std::fflush(stdout);
    comparisons.push_back(std::move(c));
  }
  if (!f.json.empty()) {
    nlohmann::json j;
    j["method"] = f.method;
    j["block_size"] = block ? nlohmann::json(*block) : nlohmann::json();
    j["inputs"] = nlohmann::json::array();
    for (const quant::Comparison& c : comparisons) j["inputs"].push_back(quant::comparison_json(c));
    write_json_file(f.json, j);
    std::printf("results written to %s\n", f.json.c_str());
  }
  if (!f.plot.empty()) {
    write_output_file(f.plot, quant::comparison_svg(comparisons), "--plot '" + f.plot + "'");
    std::printf("plot written to %s\n", f.plot.c_str());
  }
  return 0;
}

}  // namespace

Command add_quantize_command(CLI::App& app) {
  auto f = std::make_shared<QuantizeFlags>();
  std::string names;
  for (const std::string& n : quant::method_names()) names += n + ", ";
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Compare quantization methods (absmax per tensor or row, zero-point, blockwise, dynamic "
      "map, quantile, NF4, FP4) on synthetic values or a safetensors file: bits/param, MSE, max "
      "abs error, SNR, codes used, time and extra memory");
  sub->add_option("--method", f->method, "One of " + names + "or all (the comparison table)")
      ->capture_default_str();
  CLI::Option* block =
      add_number_flag(sub, "--block-size", f->block_size, NumberRange::integer(1, 1 << 24),
                      "Elements per absmax block for blockwise, dynamic, nf4, fp4, int4 (defaults "
                      "256, 256, 64, 64, 64)");
  CLI::Option* input =
      sub->add_option("--input", f->input, "A safetensors file: quantize its float tensors");
  sub->add_option("--tensor", f->tensor, "Only this tensor of --input (Hugging Face name)")
      ->needs(input);
  sub->add_option("--synthetic", f->synthetic,
                  "normal (N(0,1)) or outliers (x40 every 997th value); default: both, unless "
                  "--input")
      ->excludes(input);
  add_number_flag(sub, "--count", f->count, NumberRange::integer(1, kMaxSyntheticCount),
                  "Synthetic values")
      ->excludes(input);
  add_number_flag(sub, "--seed", f->seed, NumberRange::unsigned_integer(UINT64_MAX),
                  "Seed of the synthetic values")
      ->excludes(input);
  sub->add_option("--plot", f->plot, "Write value histograms and code usage as FILE.svg");
  sub->add_option("--json", f->json, "Write every number of the table (and code counts) as JSON");
  Command c;
  c.sub = sub;
  c.run = [f, block]() {
    f->block_given = block->count() > 0;
    return run_quantize(*f);
  };
  return c;
}

}  // namespace snug::cli
