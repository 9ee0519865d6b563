#include "core/quant_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/quant_inner.h"

namespace snug::quant {

namespace {

constexpr int64_t kParallelMin = int64_t{1} << 16;  // below this, one thread is faster

bool is_4bit(Format f) {
  return f == Format::nf4 || f == Format::fp4 || f == Format::int4;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Round half to even (the default FP environment), as torch.round and std::nearbyint.
inline float round_even(float v) {
  return std::nearbyint(v);
}

// torch.linspace(start, end, steps) in float32 on the CPU: a float step, filled from the start
// for the first half and from the end for the second half.
std::vector<float> linspace_f32(float start, float end, int64_t steps) {
  std::vector<float> v(static_cast<size_t>(steps));
  if (steps == 1) {
    v[0] = start;
    return v;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  // Fused multiply-adds, as torch's vectorized kernel computes them (with plain a + b * c, 12 of
  // linspace(0.1, 1, 65)'s values differ in the last bit); explicit, so that the result does not
  // depend on whether the compiler contracts (-O1 and -O2 differed, and so did the sanitizer
  // build).
  for (int64_t i = 0; i < steps; ++i)
    v[static_cast<size_t>(i)] = i < halfway
                                    ? std::fma(step, static_cast<float>(i), start)
                                    : std::fma(-step, static_cast<float>(steps - i - 1), end);
  return v;
}

std::array<float, 256> make_dynamic_map(bool is_signed) {
  const std::vector<float> v = create_dynamic_map(is_signed, 7, 8);
  std::array<float, 256> out{};
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

// A code book sorted for nearest-value search: midpoints between neighbours in sorted order and
// the original index of each sorted entry (a stable argsort, as torch.argsort gives for 16).
struct SortedCode {
  std::vector<float> bounds;    // size n-1, float32 midpoints (torch: (c[:-1]+c[1:])/2)
  std::vector<uint32_t> order;  // sorted position -> code index
  bool identity = true;
};

SortedCode make_sorted(const float* code, size_t n) {
  SortedCode s;
  s.order.resize(n);
  std::iota(s.order.begin(), s.order.end(), 0u);
  std::stable_sort(s.order.begin(), s.order.end(),
                   [&](uint32_t a, uint32_t b) { return code[a] < code[b]; });
  for (size_t i = 0; i < n; ++i) s.identity = s.identity && s.order[i] == i;
  s.bounds.resize(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) s.bounds[i] = (code[s.order[i]] + code[s.order[i + 1]]) / 2.0f;
  return s;
}

// torch.bucketize(v, bounds, right=False): the number of bounds strictly below v, i.e. the
// nearest code with an exact tie going to the lower one (without branches: core/quant_inner.h).
inline uint32_t bucket(const std::vector<float>& bounds, float v) {
  return fast::count_below(bounds.data(), bounds.size(), v);
}
// The same for 15 bounds, branch-free (the 4-bit fast path; vectorizes).
inline uint32_t bucket16(const float* bounds, float v) {
  uint32_t c = 0;
  for (int i = 0; i < 15; ++i) c += bounds[i] < v ? 1u : 0u;
  return c;
}

const SortedCode& sorted_nf4() {
  static const SortedCode s = make_sorted(nf4_code().data(), 16);
  return s;
}
const SortedCode& sorted_fp4() {
  static const SortedCode s = make_sorted(fp4_code().data(), 16);
  return s;
}
const SortedCode& sorted_dynamic(bool is_signed) {
  static const SortedCode s = make_sorted(dynamic_map(true).data(), 256);
  static const SortedCode u = make_sorted(dynamic_map(false).data(), 256);
  return is_signed ? s : u;
}

void check_finite(const float* x, int64_t n) {
  // One pass that vectorizes (an integer test of the exponent bits, no branch), in parallel; the
  // element named in the message is looked for only when there is one.
  uint32_t bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof(b));
    bad |= (b & 0x7fffffffu) >= 0x7f800000u ? 1u : 0u;
  }
  if (bad == 0) return;
  for (int64_t i = 0; i < n; ++i)
    SNUG_CHECK(std::isfinite(x[i]), "quantize: input element ", i, " is ", x[i],
               " (NaN and Inf cannot be quantized)");
}

// max |x[i]| (finite x: check_finite runs first), on vectors (core/quant_inner.h).
float block_absmax_of(const float* x, int64_t n) {
  return fast::block_absmax(x, n);
}

// bitsandbytes blockwise scaling: full blocks multiply by 1/max(absmax, 1e-38), the remainder
// block divides by max(absmax, 1e-38) (and stores that clamped value); clamp to [-1, 1].
struct BlockScale {
  float stored;  // absmax as stored
  float inv;     // full block: reciprocal
  float div;     // remainder block: divisor
  bool full;
  float scaled(float v) const {
    const float s = full ? v * inv : v / div;
    return std::min(1.0f, std::max(-1.0f, s));
  }
};

BlockScale make_scale(const float* x, int64_t len, bool full) {
  const float am = block_absmax_of(x, len);
  const float clamped = std::max(am, kAbsmaxClamp);
  return BlockScale{full ? am : clamped, 1.0f / clamped, clamped, full};
}

// Codebook blockwise quantization into one byte per element (dynamic8).
void quantize_codebook8(const float* x, int64_t n, int64_t block, const SortedCode& sc,
                        uint8_t* codes, float* absmax) {
  const int64_t nb = ceil_div(n, block);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t begin = b * block, len = std::min(block, n - begin);
    const BlockScale s = make_scale(x + begin, len, len == block);
    absmax[b] = s.stored;
    for (int64_t i = 0; i < len; ++i) {
      const uint32_t pos = bucket(sc.bounds, s.scaled(x[begin + i]));
      codes[begin + i] = static_cast<uint8_t>(sc.order[pos]);
    }
  }
}

void put_nibble(uint8_t* packed, int64_t i, uint32_t nib) {
  uint8_t& byte = packed[i >> 1];
  if ((i & 1) == 0)
    byte = static_cast<uint8_t>((byte & 0x0F) | (nib << 4));
  else
    byte = static_cast<uint8_t>((byte & 0xF0) | (nib & 0x0F));
}

uint32_t get_nibble(const uint8_t* packed, int64_t i) {
  const uint8_t byte = packed[i >> 1];
  return (i & 1) == 0 ? static_cast<uint32_t>(byte >> 4) : static_cast<uint32_t>(byte & 0x0F);
}

void quantize_4bit(const float* x, int64_t n, int64_t block, Format f, uint8_t* packed,
                   float* absmax) {
  const int64_t nb = ceil_div(n, block);
  const SortedCode* sc = f == Format::nf4 ? &sorted_nf4() : &sorted_fp4();
  // Blocks of even length never share a byte, so they can be done in parallel.
  const bool par = n >= kParallelMin && block % 2 == 0;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t begin = b * block, len = std::min(block, n - begin);
    if (f == Format::int4) {
      const float am = block_absmax_of(x + begin, len);
      absmax[b] = am;
      const float mul = am > 0.0f ? 7.0f / am : 0.0f;
      for (int64_t i = 0; i < len; ++i) {
        const int q = static_cast<int>(round_even(x[begin + i] * mul));
        put_nibble(packed, begin + i, static_cast<uint32_t>(std::clamp(q, -7, 7)) & 0x0Fu);
      }
      continue;
    }
    const BlockScale s = make_scale(x + begin, len, len == block);
    absmax[b] = s.stored;
    const float* bounds = sc->bounds.data();
    if (sc->identity && len == block && block % 2 == 0) {
      // Fast path (nf4, full even block): whole bytes, branch-free nearest code, on vectors
      // (core/quant_inner.h: s.scaled and bucket16 lane by lane).
      fast::encode_block4(x + begin, len, s.inv, bounds, packed + (begin >> 1));
    } else {
      for (int64_t i = 0; i < len; ++i)
        put_nibble(packed, begin + i, sc->order[bucket16(bounds, s.scaled(x[begin + i]))]);
    }
  }
  // bnb pads an odd length with one scaled 0.0 (the code of zero in the low nibble).
  if (n % 2) {
    const uint32_t zero_code =
        f == Format::int4 ? 0u : sc->order[bucket16(sc->bounds.data(), 0.0f)];
    put_nibble(packed, n, zero_code);
  }
}

// Symmetric absmax int8 over groups of `group` elements: q = round(x * (127/absmax)).
void quantize_int8_groups(const float* x, int64_t n, int64_t group, uint8_t* codes, float* absmax) {
  const int64_t ng = ceil_div(n, group);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t begin = g * group, len = std::min(group, n - begin);
    const float am = block_absmax_of(x + begin, len);
    absmax[g] = am;
    const float mul = am > 0.0f ? 127.0f / am : 0.0f;
    for (int64_t i = 0; i < len; ++i) {
      const float q = std::clamp(round_even(x[begin + i] * mul), -127.0f, 127.0f);
      codes[begin + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

void quantize_zeropoint(const float* x, int64_t n, Quantized& q) {
  float mn = x[0], mx = x[0];
  for (int64_t i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  // torch.ao MinMaxObserver (quint8, per_tensor_affine): the range always contains 0.
  const float lo = std::min(mn, 0.0f), hi = std::max(mx, 0.0f);
  float scale = (hi - lo) / 255.0f;
  scale = std::max(scale, std::numeric_limits<float>::epsilon());
  const int zp = std::clamp(0 - static_cast<int>(round_even(lo / scale)), 0, 255);
  q.scales = {scale};
  q.zero_points = {zp};
  const float inv = 1.0f / scale;
  q.codes.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float v = round_even(x[i] * inv) + static_cast<float>(zp);
    q.codes[static_cast<size_t>(i)] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
  }
}

// Writes k-bit code v of element i into `out`, MSB first (k = 8: plain bytes; k = 4: high
// nibble first, as nf4). `out` starts zeroed.
inline void put_bits(std::vector<uint8_t>& out, int bits, int64_t i, uint32_t v) {
  int64_t bit = i * bits;
  for (int k = bits - 1; k >= 0; --k, ++bit)
    if ((v >> k) & 1u)
      out[static_cast<size_t>(bit >> 3)] |= static_cast<uint8_t>(0x80u >> (bit & 7));
}

uint32_t unpack_bits(const std::vector<uint8_t>& p, int bits, int64_t i) {
  uint32_t v = 0;
  int64_t bit = i * bits;
  for (int k = 0; k < bits; ++k, ++bit)
    v = (v << 1) | ((p[static_cast<size_t>(bit >> 3)] >> (7 - (bit & 7))) & 1u);
  return v;
}

// Empirical quantile of sorted data at probability p (linear interpolation, numpy's default).
float quantile_of(const std::vector<float>& sorted, double p) {
  const double pos = p * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double frac = pos - static_cast<double>(i);
  if (i + 1 >= sorted.size()) return sorted.back();
  return static_cast<float>(static_cast<double>(sorted[i]) * (1.0 - frac) +
                            static_cast<double>(sorted[i + 1]) * frac);
}

void quantize_quantile(const float* x, int64_t n, const Options& o, Quantized& q) {
  std::vector<float> sample;
  if (o.quantile_sample > 0 && n > o.quantile_sample) {
    const int64_t stride = ceil_div(n, o.quantile_sample);
    for (int64_t i = 0; i < n; i += stride) sample.push_back(x[i]);
  } else {
    sample.assign(x, x + n);
  }
  std::sort(sample.begin(), sample.end());
  const int64_t k = int64_t{1} << o.bits;
  q.code_book.resize(static_cast<size_t>(k));
  // Codes at equally spaced probabilities i/(k-1), i = 0..k-1: the first and last are the
  // (sample's) minimum and maximum, so outliers stay representable, and between neighbouring
  // codes lies an equal share of the values.
  for (int64_t i = 0; i < k; ++i)
    q.code_book[static_cast<size_t>(i)] =
        k == 1 ? quantile_of(sample, 0.5)
               : quantile_of(sample, static_cast<double>(i) / static_cast<double>(k - 1));
  sample = std::vector<float>();  // the sort buffer is the workspace; free it before coding
  const SortedCode sc = make_sorted(q.code_book.data(), q.code_book.size());
  q.codes.assign(static_cast<size_t>(ceil_div(n * o.bits, 8)), 0);
  for (int64_t i = 0; i < n; ++i) put_bits(q.codes, o.bits, i, sc.order[bucket(sc.bounds, x[i])]);
}

void check_options(Format f, const Options& o) {
  SNUG_CHECK(!o.block || *o.block > 0, format_name(f), ": block size must be positive, got ",
             o.block.value_or(0));
  if (f == Format::quantile)
    SNUG_CHECK(o.bits >= 1 && o.bits <= 8, "quantize quantile: bits must be in 1..8, got ", o.bits);
  SNUG_CHECK(!o.double_quant || is_4bit(f),
             "double quantization applies to nf4, fp4 and int4, not ", format_name(f));
}

int64_t effective_block(Format f, const Options& o) {
  return o.block ? *o.block : default_block(f);
}

}  // namespace

const char* format_name(Format f) {
  switch (f) {
    case Format::int8_absmax:
      return "int8_absmax";
    case Format::int8_absmax_row:
      return "int8_absmax_row";
    case Format::int8_zeropoint:
      return "int8_zeropoint";
    case Format::int8_blockwise:
      return "int8_blockwise";
    case Format::dynamic8:
      return "dynamic8";
    case Format::quantile:
      return "quantile";
    case Format::nf4:
      return "nf4";
    case Format::fp4:
      return "fp4";
    case Format::int4:
      return "int4";
  }
  return "?";
}

Format parse_format(std::string_view name) {
  for (Format f : {Format::int8_absmax, Format::int8_absmax_row, Format::int8_zeropoint,
                   Format::int8_blockwise, Format::dynamic8, Format::quantile, Format::nf4,
                   Format::fp4, Format::int4})
    if (name == format_name(f)) return f;
  if (name == "absmax") return Format::int8_absmax;
  if (name == "blockwise") return Format::int8_blockwise;
  if (name == "zeropoint") return Format::int8_zeropoint;
  if (name == "dynamic") return Format::dynamic8;
  throw Error(detail::concat("unknown quantization method '", name,
                             "' (int8_absmax, int8_absmax_row, int8_zeropoint, int8_blockwise, "
                             "dynamic8, quantile, nf4, fp4, int4)"));
}

int64_t default_block(Format f) {
  switch (f) {
    case Format::int8_blockwise:
    case Format::dynamic8:
      return 256;
    case Format::nf4:
    case Format::fp4:
    case Format::int4:
      return 64;
    default:
      return 0;
  }
}

int bits_per_code(Format f, const Options& o) {
  if (is_4bit(f)) return 4;
  if (f == Format::quantile) return o.bits;
  return 8;
}

int64_t code_values(Format f, const Options& o) {
  switch (f) {
    case Format::int8_absmax:
    case Format::int8_absmax_row:
    case Format::int8_blockwise:
      return 255;
    case Format::int4:
      return 15;
    default:
      return int64_t{1} << bits_per_code(f, o);
  }
}

const std::array<float, 16>& nf4_code() {
  static const std::array<float, 16> c = {-1.0f,
                                          -0.6961928009986877f,
                                          -0.5250730514526367f,
                                          -0.39491748809814453f,
                                          -0.28444138169288635f,
                                          -0.18477343022823334f,
                                          -0.09105003625154495f,
                                          0.0f,
                                          0.07958029955625534f,
                                          0.16093020141124725f,
                                          0.24611230194568634f,
                                          0.33791524171829224f,
                                          0.44070982933044434f,
                                          0.5626170039176941f,
                                          0.7229568362236023f,
                                          1.0f};
  return c;
}

const std::array<float, 16>& fp4_code() {
  static const std::array<float, 16> c = [] {
    // 1 sign bit, 2 exponent bits, 1 mantissa bit; raw magnitudes by the low 3 bits, / 12.
    constexpr float raw[8] = {0.0f, 0.0625f, 8.0f, 12.0f, 4.0f, 6.0f, 2.0f, 3.0f};
    std::array<float, 16> v{};
    for (int i = 0; i < 8; ++i) {
      v[static_cast<size_t>(i)] = raw[i] / 12.0f;
      // bnb writes "-0" as a Python int, so code 8 is +0.0
      v[static_cast<size_t>(i + 8)] = i == 0 ? 0.0f : -raw[i] / 12.0f;
    }
    return v;
  }();
  return c;
}

std::vector<float> create_dynamic_map(bool is_signed, int max_exponent_bits, int total_bits) {
  SNUG_CHECK(total_bits >= 2 && total_bits <= 8 && max_exponent_bits >= 1 &&
                 max_exponent_bits < total_bits,
             "create_dynamic_map: bad bit counts (max_exponent_bits ", max_exponent_bits,
             ", total_bits ", total_bits, ")");
  std::vector<float> data;
  const int non_sign_bits = total_bits - 1;
  const int64_t additional_items = (int64_t{1} << (non_sign_bits - max_exponent_bits)) - 1;
  auto add_decade = [&](int i, int64_t fraction_items) {
    const std::vector<float> b = linspace_f32(0.1f, 1.0f, fraction_items);
    // 10 ** (-(max_exponent_bits - 1) + i): a Python float (or int 1), applied as a float32
    // scalar to the float32 means.
    const float decade =
        static_cast<float>(std::pow(10.0, static_cast<double>(-(max_exponent_bits - 1) + i)));
    std::vector<float> means;
    for (size_t k = 0; k + 1 < b.size(); ++k) means.push_back((b[k] + b[k + 1]) / 2.0f);
    for (float m : means) data.push_back(decade * m);
    if (is_signed)
      for (float m : means) data.push_back(-decade * m);
  };
  for (int i = 0; i < max_exponent_bits; ++i) {
    const int e = is_signed ? i + non_sign_bits - max_exponent_bits
                            : i + non_sign_bits - max_exponent_bits + 1;
    add_decade(i, (int64_t{1} << e) + 1);
  }
  if (additional_items > 0)  // bnb: linspace(0.1, 1, additional_items + 1) in the last decade
    add_decade(max_exponent_bits - 1, additional_items + 1);
  data.push_back(0.0f);
  data.push_back(1.0f);
  const size_t want = size_t{1} << total_bits;
  SNUG_CHECK(data.size() <= want, "create_dynamic_map: ", data.size(), " values for ", want,
             " codes");
  data.resize(want, 0.0f);
  std::sort(data.begin(), data.end());
  return data;
}

const std::array<float, 256>& dynamic_map(bool is_signed) {
  static const std::array<float, 256> s = make_dynamic_map(true);
  static const std::array<float, 256> u = make_dynamic_map(false);
  return is_signed ? s : u;
}

int64_t Quantized::num_blocks() const {
  if (format == Format::quantile) return 0;
  return block > 0 ? ceil_div(numel, block) : 0;
}

std::vector<float> Quantized::block_absmax() const {
  if (!double_quant) return scales;
  std::vector<float> a(dq_codes.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = double_dequant_absmax(dq_codes[i], dq_absmax[i / static_cast<size_t>(kDoubleQuantBlock)],
                                 dq_offset);
  return a;
}

uint32_t Quantized::code_at(int64_t i) const {
  if (format == Format::quantile) return unpack_bits(codes, bits, i);
  if (is_4bit(format)) return get_nibble(codes.data(), i);
  return codes[static_cast<size_t>(i)];
}

int64_t Quantized::bytes() const {
  return static_cast<int64_t>(codes.size() + 4 * scales.size() + 4 * zero_points.size() +
                              4 * code_book.size() + dq_codes.size() + 4 * dq_absmax.size()) +
         (double_quant ? 4 : 0);
}

Quantized quantize(const float* x, const std::vector<int64_t>& shape, Format f, const Options& o) {
  int64_t n = 1;
  for (int64_t d : shape) {
    SNUG_CHECK(d >= 0, "quantize ", format_name(f), ": negative dimension ", d);
    n *= d;
  }
  SNUG_CHECK(n > 0, "quantize ", format_name(f), ": empty tensor (nothing to quantize)");
  check_options(f, o);
  check_finite(x, n);

  Quantized q;
  q.format = f;
  q.shape = shape;
  q.numel = n;
  q.bits = bits_per_code(f, o);
  q.signed_map = o.signed_map;
  switch (f) {
    case Format::int8_absmax:
    case Format::int8_absmax_row:
    case Format::int8_blockwise: {
      if (f == Format::int8_absmax_row)
        SNUG_CHECK(!shape.empty(), "quantize int8_absmax_row: needs at least one dimension");
      q.block = f == Format::int8_absmax       ? n
                : f == Format::int8_absmax_row ? shape.back()
                                               : effective_block(f, o);
      q.codes.resize(static_cast<size_t>(n));
      q.scales.resize(static_cast<size_t>(ceil_div(n, q.block)));
      quantize_int8_groups(x, n, q.block, q.codes.data(), q.scales.data());
      break;
    }
    case Format::int8_zeropoint:
      q.block = n;
      quantize_zeropoint(x, n, q);
      break;
    case Format::dynamic8: {
      if (!o.signed_map)
        for (int64_t i = 0; i < n; ++i)
          SNUG_CHECK(x[i] >= 0.0f, "quantize dynamic8 with the unsigned map: element ", i,
                     " is negative (", x[i], ")");
      q.block = effective_block(f, o);
      q.codes.resize(static_cast<size_t>(n));
      q.scales.resize(static_cast<size_t>(ceil_div(n, q.block)));
      quantize_codebook8(x, n, q.block, sorted_dynamic(o.signed_map), q.codes.data(),
                         q.scales.data());
      break;
    }
    case Format::quantile:
      q.block = 0;
      quantize_quantile(x, n, o, q);
      break;
    case Format::nf4:
    case Format::fp4:
    case Format::int4: {
      q.block = effective_block(f, o);
      q.codes.assign(static_cast<size_t>(ceil_div(n, 2)), 0);
      q.scales.resize(static_cast<size_t>(ceil_div(n, q.block)));
      quantize_4bit(x, n, q.block, f, q.codes.data(), q.scales.data());
      if (o.double_quant) {
        // QLoRA DQ (double_quantize_into) of a copy of the absmax values.
        const size_t nb = q.scales.size();
        std::vector<float> centered(q.scales);  // the workspace
        q.dq_codes.resize(nb);
        q.dq_absmax.resize(
            static_cast<size_t>(ceil_div(static_cast<int64_t>(nb), kDoubleQuantBlock)));
        q.dq_offset = double_quantize_into(centered.data(), static_cast<int64_t>(nb),
                                           q.dq_codes.data(), q.dq_absmax.data());
        q.double_quant = true;
        q.scales.clear();
      }
      break;
    }
  }
  return q;
}

Quantized quantize(const std::vector<float>& x, Format f, const Options& o) {
  return quantize(x.data(), {static_cast<int64_t>(x.size())}, f, o);
}

void dequantize(const Quantized& q, float* out) {
  const int64_t n = q.numel;
  switch (q.format) {
    case Format::int8_absmax:
    case Format::int8_absmax_row:
    case Format::int8_blockwise: {
      const int64_t ng = ceil_div(n, q.block);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
      for (int64_t g = 0; g < ng; ++g) {
        const float s = q.scales[static_cast<size_t>(g)] / 127.0f;
        const int64_t begin = g * q.block, end = std::min(n, begin + q.block);
        const int8_t* c = reinterpret_cast<const int8_t*>(q.codes.data());
        for (int64_t i = begin; i < end; ++i) out[i] = static_cast<float>(c[i]) * s;
      }
      break;
    }
    case Format::int8_zeropoint: {
      const float s = q.scales[0];
      const int32_t zp = q.zero_points[0];
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(static_cast<int32_t>(q.codes[static_cast<size_t>(i)]) - zp) * s;
      break;
    }
    case Format::dynamic8: {
      const auto& code = dynamic_map(q.signed_map);
      const int64_t nb = ceil_div(n, q.block);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
      for (int64_t b = 0; b < nb; ++b) {
        const float s = q.scales[static_cast<size_t>(b)];
        const int64_t begin = b * q.block, end = std::min(n, begin + q.block);
        for (int64_t i = begin; i < end; ++i) out[i] = code[q.codes[static_cast<size_t>(i)]] * s;
      }
      break;
    }
    case Format::quantile:
      for (int64_t i = 0; i < n; ++i) out[i] = q.code_book[unpack_bits(q.codes, q.bits, i)];
      break;
    case Format::nf4:
    case Format::fp4:
    case Format::int4: {
      std::array<float, 16> code{};
      if (q.format == Format::int4) {
        for (int i = 0; i < 16; ++i)
          code[static_cast<size_t>(i)] = static_cast<float>(i < 8 ? i : i - 16);
      } else {
        code = q.format == Format::nf4 ? nf4_code() : fp4_code();
      }
      const std::vector<float> absmax = q.block_absmax();
      const int64_t nb = ceil_div(n, q.block);
      const uint8_t* p = q.codes.data();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
      for (int64_t b = 0; b < nb; ++b) {
        const float a = absmax[static_cast<size_t>(b)];
        const float s = q.format == Format::int4 ? a / 7.0f : a;
        const int64_t begin = b * q.block, end = std::min(n, begin + q.block);
        for (int64_t i = begin; i < end; ++i) out[i] = code[get_nibble(p, i)] * s;
      }
      break;
    }
  }
}

std::vector<float> dequantize(const Quantized& q) {
  std::vector<float> out(static_cast<size_t>(q.numel));
  dequantize(q, out.data());
  return out;
}

QuantStats compute_stats(const Quantized& q, const float* x) {
  const std::vector<float> y = dequantize(q);
  double se = 0.0, sig = 0.0, mx = 0.0;
  std::vector<uint8_t> used(256, 0);
  for (int64_t i = 0; i < q.numel; ++i) {
    const double e = static_cast<double>(x[i]) - static_cast<double>(y[static_cast<size_t>(i)]);
    se += e * e;
    sig += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    mx = std::max(mx, std::abs(e));
    used[q.code_at(i) & 0xFFu] = 1;
  }
  QuantStats s;
  s.mse = se / static_cast<double>(q.numel);
  s.max_abs_error = mx;
  s.snr_db = se > 0.0 ? 10.0 * std::log10(sig / se) : std::numeric_limits<double>::infinity();
  int64_t distinct = 0;
  for (uint8_t u : used) distinct += u;
  Options o;
  o.bits = q.bits;
  s.codes_used_fraction =
      static_cast<double>(distinct) / static_cast<double>(code_values(q.format, o));
  s.bytes = q.bytes();
  s.bits_per_param = 8.0 * static_cast<double>(s.bytes) / static_cast<double>(q.numel);
  return s;
}

StorageBytes storage_breakdown(Format f, int64_t numel, const Options& o) {
  SNUG_CHECK(numel >= 0, "storage_bytes: negative element count ", numel);
  check_options(f, o);
  StorageBytes s;
  if (numel == 0) return s;
  switch (f) {
    case Format::int8_absmax:
      s.codes = numel;
      s.state = 4;  // one fp32 absmax
      break;
    case Format::int8_absmax_row:
      SNUG_CHECK(o.block.has_value(),
                 "storage_bytes int8_absmax_row: pass the row length as block");
      s.codes = numel;
      s.state = 4 * ceil_div(numel, *o.block);
      break;
    case Format::int8_zeropoint:
      s.codes = numel;
      s.state = 4 + 4;  // fp32 scale + int32 zero point
      break;
    case Format::int8_blockwise:
    case Format::dynamic8:
      s.codes = numel;
      s.state = 4 * ceil_div(numel, effective_block(f, o));
      break;
    case Format::quantile:
      s.codes = ceil_div(numel * o.bits, 8);
      s.state = 4 * (int64_t{1} << o.bits);  // the fp32 code book
      break;
    case Format::nf4:
    case Format::fp4:
    case Format::int4: {
      const int64_t nb = ceil_div(numel, effective_block(f, o));
      s.codes = ceil_div(numel, 2);
      s.state = o.double_quant ? nb + 4 * ceil_div(nb, kDoubleQuantBlock) + 4 : 4 * nb;
      break;
    }
  }
  return s;
}

int64_t storage_bytes(Format f, int64_t numel, const Options& o) {
  return storage_breakdown(f, numel, o).total();
}

int64_t quantize_workspace_bytes(Format f, int64_t numel, const Options& o) {
  SNUG_CHECK(numel >= 0, "quantize_workspace_bytes: negative element count ", numel);
  check_options(f, o);
  if (numel == 0) return 0;
  if (f == Format::quantile) {
    if (o.quantile_sample > 0 && numel > o.quantile_sample)
      return 4 * ceil_div(numel, ceil_div(numel, o.quantile_sample));  // the strided sample
    return 4 * numel;                                                  // a sorted copy
  }
  if (o.double_quant) return 4 * ceil_div(numel, effective_block(f, o));  // centred absmax
  return 0;
}

void quantize_blockwise_into(const float* x, int64_t n, Format f, int64_t block, uint8_t* codes,
                             float* absmax) {
  SNUG_CHECK(f == Format::int8_blockwise || is_4bit(f), "quantize_blockwise_into: ", format_name(f),
             " is not a blockwise format (int8_blockwise, nf4, fp4, int4)");
  SNUG_CHECK(n > 0, "quantize ", format_name(f), ": empty tensor (nothing to quantize)");
  SNUG_CHECK(block > 0, format_name(f), ": block size must be positive, got ", block);
  check_finite(x, n);
  if (f == Format::int8_blockwise)
    quantize_int8_groups(x, n, block, codes, absmax);
  else
    quantize_4bit(x, n, block, f, codes, absmax);
}

float double_quantize_into(float* absmax, int64_t nb, uint8_t* dq_codes, float* dq_absmax) {
  // QLoRA DQ as bnb: offset = mean(absmax); quantize (absmax - offset) with the signed dynamic
  // map in blocks of 256; keep the fp32 offset.
  SNUG_ASSERT(nb > 0);
  double sum = 0.0;
  for (int64_t i = 0; i < nb; ++i) sum += absmax[i];
  const float offset = static_cast<float>(sum / static_cast<double>(nb));
  for (int64_t i = 0; i < nb; ++i) absmax[i] = absmax[i] - offset;
  quantize_codebook8(absmax, nb, kDoubleQuantBlock, sorted_dynamic(true), dq_codes, dq_absmax);
  return offset;
}

float double_dequant_absmax(uint8_t dq_code, float group_absmax, float offset) {
  const float v = dynamic_map(true)[dq_code] * group_absmax;
  return v + offset;
}

int64_t storage_bytes(Format f, int64_t numel, int64_t block, bool double_quant) {
  Options o;
  o.block = block;
  o.double_quant = double_quant;
  return storage_bytes(f, numel, o);
}

}  // namespace snug::quant
