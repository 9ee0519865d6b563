// `snug quantize`: the seed chapter's comparison of quantization methods (per-tensor absmax vs
// blocks of K vs quantile, on data with and without outliers) as measured numbers. A method is a
// quant::Format with its options under the name the command line uses; an input is one or more
// float tensors (synthetic N(0,1) values, or tensors of a safetensors file); evaluating a method
// quantizes every tensor on its own and sums the error, bytes, time and code usage over them.
//
// Columns (docs/quantization.md): bits/param = 8 * stored bytes / values (codes + scales + code
// book, exact); MSE, max abs error and SNR = 10 log10(sum x^2 / sum (x - x')^2) of the
// dequantized values; codes used = distinct codes / codes the format can produce; quantize time
// (wall clock of quantize(), informative only); extra memory = quant::quantize_workspace_bytes,
// the working memory quantizing needs beyond input and output (the seed's point against
// quantile: the values have to be sorted and that order kept somewhere).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/quant_format.h"

namespace snug::quant {

struct Method {
  std::string name;  // command-line name, e.g. "blockwise"
  Format format = Format::int8_absmax;
  Options options;
};

// The command-line names in table order: absmax, absmax-row, zeropoint, blockwise, dynamic,
// quantile, quantile-approx, nf4, fp4, int4.
const std::vector<std::string>& method_names();
// Approximate quantile's sample: the quantiles of an evenly strided sample of this many values.
inline constexpr int64_t kQuantileApproxSample = 4096;
// `name` with an optional block size. Throws snug::Error for an unknown name (listing the known
// ones), a block size <= 0, or a block size given to a method without blocks.
Method make_method(const std::string& name, std::optional<int64_t> block = std::nullopt);
// Every method ("all"), block methods with `block` when given.
std::vector<Method> all_methods(std::optional<int64_t> block = std::nullopt);
// True for the methods that take --block-size.
bool method_has_blocks(const std::string& name);

struct ValueTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct ValueSet {
  std::string name;         // "normal", "outliers", or the file (":tensor" when one)
  std::string description;  // one line for the table's title
  std::vector<ValueTensor> tensors;
  int64_t numel() const;
};

// Synthetic values: "normal" = N(0,1) from snug's NormalGenerator(seed); "outliers" = the same
// with every 997th value (from index 17, about 0.1%) multiplied by 40, the outliers of LLM weights
// the seed's figure shows. Rows of 1024 when `count` is a multiple of 1024 (absmax-row then has
// rows to scale), else one row. Throws for an unknown kind or count <= 0.
ValueSet synthetic_values(const std::string& kind, int64_t count, uint64_t seed);
// The float tensors (F32, F16, BF16, F64) of a safetensors file, or only `tensor` when not empty.
// Throws naming the file for a missing tensor (listing the available ones), a non-float tensor
// asked for by name, or a file without float tensors.
ValueSet file_values(const std::string& path, const std::string& tensor = "");

struct MethodResult {
  Method method;
  int64_t block = 0;  // elements per scale (0: one per tensor, or none for quantile)
  int64_t numel = 0;
  int64_t bytes = 0;  // stored: codes + state
  double bits_per_param = 0;
  double mse = 0;
  double max_abs_error = 0;
  double snr_db = 0;  // +inf when exact
  int64_t codes_used = 0;
  int64_t code_values = 0;
  double codes_used_fraction = 0;
  double quantize_seconds = 0;
  int64_t extra_memory_bytes = 0;  // max over the tensors (they are quantized one at a time)
  // How many values took each code, in ascending order of the code's value (the x axis of the
  // plot's code-usage panels); code_values entries.
  std::vector<int64_t> code_counts;
};

MethodResult evaluate(const Method& m, const ValueSet& v);

struct Comparison {
  ValueSet input;  // values kept for the plot's histogram
  std::vector<MethodResult> results;
};

// The comparison table printed by `snug quantize` (one row per method), with a closing line on
// blockwise vs per-tensor absmax when both are present.
std::string comparison_table(const Comparison& c);
nlohmann::json comparison_json(const Comparison& c);
// SVG (text): per input a histogram of the values (log count) and one code-usage panel per
// method (how many values each code took, codes in value order): the seed chapter's figures of
// int8 codes wasted by absmax on outliers and used evenly by blocks and quantiles.
std::string comparison_svg(const std::vector<Comparison>& cs);

}  // namespace snug::quant
