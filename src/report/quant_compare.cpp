#include "report/quant_compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/memory.h"
#include "io/excerpt.h"
#include "io/safetensors.h"
#include "io/svg.h"
#include "nn/init.h"

namespace snug::quant {

namespace {

struct MethodSpec {
  const char* name;
  Format format;
  bool blocks;
};

constexpr MethodSpec kMethods[] = {
    {"absmax", Format::int8_absmax, false},
    {"absmax-row", Format::int8_absmax_row, false},
    {"zeropoint", Format::int8_zeropoint, false},
    {"blockwise", Format::int8_blockwise, true},
    {"dynamic", Format::dynamic8, true},
    {"quantile", Format::quantile, false},
    {"quantile-approx", Format::quantile, false},
    {"nf4", Format::nf4, true},
    {"fp4", Format::fp4, true},
    {"int4", Format::int4, true},
};

const MethodSpec* find_spec(const std::string& name) {
  for (const MethodSpec& s : kMethods)
    if (name == s.name) return &s;
  return nullptr;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) {
    if (!s.empty()) s += ", ";
    s += x;
  }
  return s;
}

std::string block_names() {
  std::vector<std::string> v;
  for (const MethodSpec& s : kMethods)
    if (s.blocks) v.push_back(s.name);
  return join(v);
}

bool is_float_dtype(const std::string& d) {
  return d == "F32" || d == "F16" || d == "BF16" || d == "F64";
}

// Code indices of format f in ascending order of their value, only the codes f can produce
// (code_values(f) of them).
std::vector<uint32_t> codes_in_value_order(Format f, int bits) {
  std::vector<uint32_t> c;
  switch (f) {
    case Format::int8_absmax:
    case Format::int8_absmax_row:
    case Format::int8_blockwise:
      for (int v = -127; v <= 127; ++v) c.push_back(static_cast<uint8_t>(static_cast<int8_t>(v)));
      break;
    case Format::int4:
      for (int v = -7; v <= 7; ++v) c.push_back(static_cast<uint32_t>(v) & 0x0Fu);
      break;
    case Format::fp4: {
      c.resize(16);
      std::iota(c.begin(), c.end(), 0u);
      const auto& code = fp4_code();
      std::stable_sort(c.begin(), c.end(),
                       [&](uint32_t a, uint32_t b) { return code[a] < code[b]; });
      break;
    }
    default:  // zeropoint (uint8), dynamic8 and nf4 (sorted books), quantile (ascending book)
      c.resize(static_cast<size_t>(int64_t{1} << (f == Format::nf4 ? 4 : bits)));
      std::iota(c.begin(), c.end(), 0u);
      break;
  }
  return c;
}

// The value a code stands for, as a short label (quantile books differ per tensor: "q<i>").
std::string code_label(Format f, uint32_t code) {
  char buf[32];
  switch (f) {
    case Format::int8_absmax:
    case Format::int8_absmax_row:
    case Format::int8_blockwise:
      std::snprintf(buf, sizeof buf, "%d", static_cast<int>(static_cast<int8_t>(code)));
      break;
    case Format::int4:
      std::snprintf(buf, sizeof buf, "%d", static_cast<int>(code) - (code >= 8 ? 16 : 0));
      break;
    case Format::int8_zeropoint:
      std::snprintf(buf, sizeof buf, "%u", code);
      break;
    case Format::dynamic8:
      std::snprintf(buf, sizeof buf, "%.4g", static_cast<double>(dynamic_map(true)[code]));
      break;
    case Format::nf4:
      std::snprintf(buf, sizeof buf, "%.4g", static_cast<double>(nf4_code()[code]));
      break;
    case Format::fp4:
      std::snprintf(buf, sizeof buf, "%.4g", static_cast<double>(fp4_code()[code]));
      break;
    case Format::quantile:
      std::snprintf(buf, sizeof buf, "q%u", code);
      break;
  }
  return buf;
}

std::string block_text(const MethodResult& r) {
  if (r.method.format == Format::int8_absmax_row) return "row";
  if (method_has_blocks(r.method.name)) return std::to_string(r.block);
  return "-";
}

const MethodResult* find_result(const Comparison& c, const std::string& name) {
  for (const MethodResult& r : c.results)
    if (r.method.name == name) return &r;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const MethodSpec& s : kMethods) v.push_back(s.name);
    return v;
  }();
  return names;
}

bool method_has_blocks(const std::string& name) {
  const MethodSpec* s = find_spec(name);
  return s && s->blocks;
}

Method make_method(const std::string& name, std::optional<int64_t> block) {
  const MethodSpec* s = find_spec(name);
  SNUG_CHECK(s, "unknown method '", excerpt(name), "' (", join(method_names()), ", or all)");
  if (block) {
    SNUG_CHECK(*block > 0, "--block-size must be positive, got ", *block);
    SNUG_CHECK(s->blocks, "--block-size does not apply to ", name,
               " (it has no blocks); methods with blocks: ", block_names());
  }
  Method m;
  m.name = name;
  m.format = s->format;
  if (s->blocks) m.options.block = block.value_or(default_block(s->format));
  if (name == "quantile-approx") m.options.quantile_sample = kQuantileApproxSample;
  return m;
}

std::vector<Method> all_methods(std::optional<int64_t> block) {
  if (block) SNUG_CHECK(*block > 0, "--block-size must be positive, got ", *block);
  std::vector<Method> v;
  for (const MethodSpec& s : kMethods)
    v.push_back(make_method(s.name, s.blocks ? block : std::nullopt));
  return v;
}

int64_t ValueSet::numel() const {
  int64_t n = 0;
  for (const ValueTensor& t : tensors) n += static_cast<int64_t>(t.values.size());
  return n;
}

ValueSet synthetic_values(const std::string& kind, int64_t count, uint64_t seed) {
  SNUG_CHECK(kind == "normal" || kind == "outliers", "--synthetic '", excerpt(kind),
             "': expected normal or outliers");
  constexpr int64_t kMaxCount = int64_t{1} << 30;  // 4 GiB of floats before any method runs
  SNUG_CHECK(count > 0 && count <= kMaxCount, "--count ", count, " is out of range (1 to ",
             kMaxCount, " synthetic values)");
  ValueTensor t;
  t.name = kind;
  t.values.resize(static_cast<size_t>(count));
  NormalGenerator g(seed);
  g.fill(t.values.data(), count, 0.0f, 1.0f);
  if (kind == "outliers")
    for (int64_t i = 17; i < count; i += 997) t.values[static_cast<size_t>(i)] *= 40.0f;
  constexpr int64_t kRow = 1024;
  t.shape =
      count % kRow == 0 ? std::vector<int64_t>{count / kRow, kRow} : std::vector<int64_t>{count};
  ValueSet v;
  v.name = kind;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s, %lld values, seed %llu",
                kind == "normal" ? "N(0,1)" : "N(0,1) with outliers (x40 every 997th value)",
                static_cast<long long>(count), static_cast<unsigned long long>(seed));
  v.description = buf;
  v.tensors.push_back(std::move(t));
  return v;
}

ValueSet file_values(const std::string& path, const std::string& tensor) {
  SafetensorsFile f(path);
  const std::vector<std::string> names = f.names();
  ValueSet v;
  v.name = path;
  if (!tensor.empty()) {
    // The file's names, a few of them: a file can hold any number, each of any length.
    std::string available;
    for (size_t i = 0; i < names.size() && i < 8; ++i)
      available += (i ? ", " : "") + excerpt(names[i]);
    if (names.size() > 8) available += ", ... (" + std::to_string(names.size()) + " tensors)";
    SNUG_CHECK(f.contains(tensor), path, " has no tensor '", excerpt(tensor),
               "'; available: ", available);
    const std::string& dtype = f.info(tensor).dtype;
    SNUG_CHECK(is_float_dtype(dtype), path, ": tensor '", excerpt(tensor), "' is ", dtype,
               "; snug quantize reads float tensors (F32, F16, BF16, F64)");
    v.name += ":" + tensor;
  }
  for (const std::string& n : names) {
    if (!tensor.empty() && n != tensor) continue;
    const SafetensorsFile::Info& info = f.info(n);
    if (!is_float_dtype(info.dtype)) continue;
    ValueTensor t;
    t.name = n;
    t.shape = info.shape;
    t.values = f.read_f32(n);
    if (t.values.empty()) continue;
    if (t.shape.empty()) t.shape = {1};
    v.tensors.push_back(std::move(t));
  }
  SNUG_CHECK(!v.tensors.empty(), path, " holds no non-empty float tensor to quantize");
  char buf[96];
  std::snprintf(buf, sizeof buf, ", %zu tensor%s, %lld values", v.tensors.size(),
                v.tensors.size() == 1 ? "" : "s", static_cast<long long>(v.numel()));
  v.description = v.name + buf;
  return v;
}

MethodResult evaluate(const Method& m, const ValueSet& v) {
  using clock = std::chrono::steady_clock;
  MethodResult r;
  r.method = m;
  const std::vector<uint32_t> order = codes_in_value_order(m.format, m.options.bits);
  std::vector<int64_t> by_code(256, 0);
  double se = 0.0, sig = 0.0;
  for (const ValueTensor& t : v.tensors) {
    const float* x = t.values.data();
    const auto t0 = clock::now();
    const Quantized q = quantize(x, t.shape, m.format, m.options);
    r.quantize_seconds += std::chrono::duration<double>(clock::now() - t0).count();
    const std::vector<float> y = dequantize(q);
    for (int64_t i = 0; i < q.numel; ++i) {
      const double e = static_cast<double>(x[i]) - static_cast<double>(y[static_cast<size_t>(i)]);
      se += e * e;
      sig += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      r.max_abs_error = std::max(r.max_abs_error, std::abs(e));
      ++by_code[q.code_at(i) & 0xFFu];
    }
    r.numel += q.numel;
    r.bytes += q.bytes();
    r.extra_memory_bytes =
        std::max(r.extra_memory_bytes, quantize_workspace_bytes(m.format, q.numel, m.options));
    if (method_has_blocks(m.name)) r.block = q.block;
  }
  r.bits_per_param = 8.0 * static_cast<double>(r.bytes) / static_cast<double>(r.numel);
  r.mse = se / static_cast<double>(r.numel);
  r.snr_db = se > 0.0 ? 10.0 * std::log10(sig / se) : std::numeric_limits<double>::infinity();
  r.code_values = code_values(m.format, m.options);
  for (uint32_t c : order) {
    r.code_counts.push_back(by_code[c]);
    r.codes_used += by_code[c] > 0 ? 1 : 0;
  }
  r.codes_used_fraction = static_cast<double>(r.codes_used) / static_cast<double>(r.code_values);
  return r;
}

std::string comparison_table(const Comparison& c) {
  std::ostringstream os;
  char buf[256];
  os << c.input.description << "\n";
  std::snprintf(buf, sizeof buf, "%-16s %-15s %5s %10s %10s %12s %7s %10s %12s %13s\n", "method",
                "format", "block", "bits/param", "MSE", "max abs err", "SNR dB", "codes used",
                "quantize ms", "extra memory");
  os << buf;
  for (const MethodResult& r : c.results) {
    std::snprintf(buf, sizeof buf,
                  "%-16s %-15s %5s %10.4f %10.3e %12.4f %7.2f %9.1f%% %12.3f %13s\n",
                  r.method.name.c_str(), format_name(r.method.format), block_text(r).c_str(),
                  r.bits_per_param, r.mse, r.max_abs_error, r.snr_db, 100.0 * r.codes_used_fraction,
                  1e3 * r.quantize_seconds, format_bytes(r.extra_memory_bytes).c_str());
    os << buf;
  }
  const MethodResult* absmax = find_result(c, "absmax");
  const MethodResult* blockwise = find_result(c, "blockwise");
  if (absmax && blockwise && blockwise->mse > 0) {
    std::snprintf(
        buf, sizeof buf,
        "blockwise (K=%lld) vs per-tensor absmax: MSE %.1fx %s, SNR %+.1f dB, codes "
        "used %.1f%% vs %.1f%%\n",
        static_cast<long long>(blockwise->block),
        blockwise->mse <= absmax->mse ? absmax->mse / blockwise->mse : blockwise->mse / absmax->mse,
        blockwise->mse <= absmax->mse ? "lower" : "higher", blockwise->snr_db - absmax->snr_db,
        100.0 * blockwise->codes_used_fraction, 100.0 * absmax->codes_used_fraction);
    os << buf;
  }
  const MethodResult* quantile = find_result(c, "quantile");
  if (quantile) {
    std::snprintf(buf, sizeof buf,
                  "quantile: %.1f%% of its codes used, at the price of sorting every value (%s "
                  "extra memory)\n",
                  100.0 * quantile->codes_used_fraction,
                  format_bytes(quantile->extra_memory_bytes).c_str());
    os << buf;
  }
  return os.str();
}

nlohmann::json comparison_json(const Comparison& c) {
  nlohmann::json j;
  j["name"] = c.input.name;
  j["description"] = c.input.description;
  j["numel"] = c.input.numel();
  j["tensors"] = nlohmann::json::array();
  for (const ValueTensor& t : c.input.tensors) j["tensors"].push_back(t.name);
  j["results"] = nlohmann::json::array();
  for (const MethodResult& r : c.results) {
    nlohmann::json e;
    e["method"] = r.method.name;
    e["format"] = format_name(r.method.format);
    e["block"] = method_has_blocks(r.method.name) ? nlohmann::json(r.block) : nlohmann::json();
    e["numel"] = r.numel;
    e["bytes"] = r.bytes;
    e["bits_per_param"] = r.bits_per_param;
    e["mse"] = r.mse;
    e["max_abs_error"] = r.max_abs_error;
    e["snr_db"] = std::isfinite(r.snr_db) ? nlohmann::json(r.snr_db) : nlohmann::json();
    e["codes_used"] = r.codes_used;
    e["code_values"] = r.code_values;
    e["codes_used_fraction"] = r.codes_used_fraction;
    e["quantize_seconds"] = r.quantize_seconds;
    e["extra_memory_bytes"] = r.extra_memory_bytes;
    e["code_counts"] = r.code_counts;
    j["results"].push_back(e);
  }
  return j;
}

std::string comparison_svg(const std::vector<Comparison>& cs) {
  constexpr int kWidth = 960, kLeft = 50, kCols = 3, kPanelW = 270, kPanelH = 90, kPanelGap = 25;
  constexpr int kHistH = 130, kBins = 120;
  std::ostringstream body;
  char buf[512];
  int y = 20;
  auto bar = [&](double x, double yy, double w, double h, const char* color) {
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n", x,
                  yy, w, h, color);
    body << buf;
  };
  auto text = [&](double x, double yy, const std::string& s, const char* extra = "") {
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\"%s>", x, yy, extra);
    body << buf << xml_escape(s) << "</text>\n";
  };
  auto frame = [&](double x, double yy, double w, double h) {
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                  "stroke=\"#999\"/>\n",
                  x, yy, w, h);
    body << buf;
  };
  text(kLeft, y,
       "snug quantize: value histograms and code usage per method (codes in value order, bar "
       "height log10(1 + count), red: unused codes)",
       " font-size=\"13\"");
  y += 8;
  for (const Comparison& c : cs) {
    y += 24;
    text(kLeft, y, c.input.description, " font-size=\"15\" font-weight=\"bold\"");
    // Value histogram, log10(1 + count) high.
    float lo = std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::lowest();
    for (const ValueTensor& t : c.input.tensors)
      for (float x : t.values) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
    if (!(hi > lo)) hi = lo + 1.0f;
    std::vector<int64_t> bins(kBins, 0);
    const double width = static_cast<double>(hi) - static_cast<double>(lo);
    for (const ValueTensor& t : c.input.tensors)
      for (float x : t.values) {
        const int b =
            std::min(kBins - 1, static_cast<int>((static_cast<double>(x) - lo) / width * kBins));
        ++bins[static_cast<size_t>(b)];
      }
    const double hmax =
        std::log10(1.0 + static_cast<double>(*std::max_element(bins.begin(), bins.end())));
    y += 14;
    char absmax_text[32];
    std::snprintf(absmax_text, sizeof absmax_text, "%.4g",
                  static_cast<double>(std::max(std::fabs(lo), std::fabs(hi))));
    text(kLeft, y + 2,
         std::string("values: histogram (bar height log10(1 + count)), absmax ") + absmax_text,
         " font-size=\"12\"");
    y += 8;
    const double plot_w = kWidth - 2 * kLeft;
    frame(kLeft, y, plot_w, kHistH);
    for (int b = 0; b < kBins; ++b) {
      const double h =
          hmax > 0
              ? std::log10(1.0 + static_cast<double>(bins[static_cast<size_t>(b)])) / hmax * kHistH
              : 0;
      bar(kLeft + plot_w * b / kBins, y + kHistH - h, plot_w / kBins * 0.9, h, "#4e79a7");
    }
    char lab[64];
    std::snprintf(lab, sizeof lab, "%.4g", static_cast<double>(lo));
    text(kLeft, y + kHistH + 14, lab, " font-size=\"11\"");
    std::snprintf(lab, sizeof lab, "%.4g", static_cast<double>(hi));
    text(kLeft + plot_w, y + kHistH + 14, lab, " font-size=\"11\" text-anchor=\"end\"");
    if (lo < 0 && hi > 0) {
      const double x0 = kLeft + plot_w * (0.0 - lo) / width;
      text(x0, y + kHistH + 14, "0", " font-size=\"11\" text-anchor=\"middle\"");
    }
    y += kHistH + 24;
    // Code-usage panels.
    const int rows = static_cast<int>((c.results.size() + kCols - 1) / kCols);
    for (size_t i = 0; i < c.results.size(); ++i) {
      const MethodResult& r = c.results[i];
      const int col = static_cast<int>(i) % kCols, row = static_cast<int>(i) / kCols;
      const double px = kLeft + col * (kPanelW + kPanelGap);
      const double py = y + row * (kPanelH + 58) + 30;
      std::snprintf(
          buf, sizeof buf, "%s (%s%s)", r.method.name.c_str(), format_name(r.method.format),
          method_has_blocks(r.method.name) ? (", K=" + std::to_string(r.block)).c_str() : "");
      text(px, py - 18, buf, " font-size=\"12\" font-weight=\"bold\"");
      std::snprintf(buf, sizeof buf, "%.1f%% of %lld codes, SNR %.1f dB, MSE %.2e",
                    100.0 * r.codes_used_fraction, static_cast<long long>(r.code_values), r.snr_db,
                    r.mse);
      text(px, py - 5, buf, " font-size=\"11\"");
      frame(px, py, kPanelW, kPanelH);
      int64_t cmax = 0;
      for (int64_t k : r.code_counts) cmax = std::max(cmax, k);
      const double lmax = std::log10(1.0 + static_cast<double>(cmax));
      const double bw = static_cast<double>(kPanelW) / static_cast<double>(r.code_counts.size());
      for (size_t k = 0; k < r.code_counts.size(); ++k) {
        const double h =
            lmax > 0 ? std::log10(1.0 + static_cast<double>(r.code_counts[k])) / lmax * kPanelH : 0;
        // An unused code (a wasted one, the seed's point) is a red tick on the axis.
        const double bh = r.code_counts[k] > 0 ? h : 4.0;
        bar(px + bw * static_cast<double>(k), py + kPanelH - bh, std::max(bw * 0.85, 0.5), bh,
            r.code_counts[k] > 0 ? "#f28e2b" : "#e15759");
      }
      const std::vector<uint32_t> order =
          codes_in_value_order(r.method.format, r.method.options.bits);
      text(px, py + kPanelH + 12, "code " + code_label(r.method.format, order.front()),
           " font-size=\"10\"");
      text(px + kPanelW, py + kPanelH + 12, code_label(r.method.format, order.back()),
           " font-size=\"10\" text-anchor=\"end\"");
    }
    y += rows * (kPanelH + 58) + 10;
  }
  std::ostringstream os;
  os << svg_open(kWidth, y + 10) << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << body.str() << "</svg>\n";
  return os.str();
}

}  // namespace snug::quant
