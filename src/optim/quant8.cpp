#include "optim/quant8.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace snug::quant8 {

namespace {

// torch.linspace(start, end, steps) for float32 on the CPU: float step, filled from the start for
// the first half and from the end for the second half.
std::vector<float> linspace_f32(float start, float end, int64_t steps) {
  std::vector<float> out(static_cast<size_t>(steps));
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    out[static_cast<size_t>(i)] = i < halfway ? start + step * static_cast<float>(i)
                                              : end - step * static_cast<float>(steps - i - 1);
  return out;
}

}  // namespace

std::vector<float> create_dynamic_map(bool signed_, int max_exponent_bits, int total_bits) {
  SNUG_CHECK(total_bits >= 2 && total_bits <= 8 && max_exponent_bits >= 1 &&
                 max_exponent_bits < total_bits,
             "create_dynamic_map: bad bit counts");
  std::vector<float> data;
  const int non_sign_bits = total_bits - 1;
  const int64_t additional_items = (int64_t{1} << (non_sign_bits - max_exponent_bits)) - 1;
  auto add_decade = [&](int i, int64_t fraction_items) {
    const std::vector<float> b = linspace_f32(0.1f, 1.0f, fraction_items);
    // 10 ** (-(max_exponent_bits - 1) + i): a Python float (or int 1), applied as a float32
    // scalar to the float32 means.
    const float scale =
        static_cast<float>(std::pow(10.0, static_cast<double>(-(max_exponent_bits - 1) + i)));
    std::vector<float> means;
    for (size_t k = 0; k + 1 < b.size(); ++k) means.push_back((b[k] + b[k + 1]) / 2.0f);
    for (float m : means) data.push_back(scale * m);
    if (signed_)
      for (float m : means) data.push_back(-scale * m);
  };
  for (int i = 0; i < max_exponent_bits; ++i) {
    const int e =
        signed_ ? i + non_sign_bits - max_exponent_bits : i + non_sign_bits - max_exponent_bits + 1;
    add_decade(i, (int64_t{1} << e) + 1);
  }
  if (additional_items > 0) {
    const int i = max_exponent_bits - 1;
    add_decade(i, additional_items + 1);  // bnb: linspace(0.1, 1, additional_items + 1)
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  const size_t want = size_t{1} << total_bits;
  SNUG_CHECK(data.size() <= want, "create_dynamic_map: ", data.size(), " values for ", want,
             " codes");
  while (data.size() < want) data.push_back(0.0f);
  std::sort(data.begin(), data.end());
  return data;
}

Code::Code(const std::vector<float>& values) {
  SNUG_CHECK(values.size() == 256, "quant8::Code: need 256 values, got ", values.size());
  std::copy(values.begin(), values.end(), values_.begin());
  for (size_t i = 0; i + 1 < 256; ++i) mid_[i] = (values_[i] + values_[i + 1]) / 2.0f;
}

uint8_t Code::nearest(float x) const {
  // torch.bucketize(x, mid, right=False): the first midpoint >= x.
  const auto it = std::lower_bound(mid_.begin(), mid_.end(), x);
  return static_cast<uint8_t>(it - mid_.begin());
}

uint8_t Code::nearest_signed(float x) const {
  int q = nearest(x);
  if (std::signbit(values_[static_cast<size_t>(q)]) != std::signbit(x)) {
    if (x > 0.0f && q < 255)
      ++q;
    else if (!(x > 0.0f) && q > 0)
      --q;
  }
  return static_cast<uint8_t>(q);
}

const Code& signed_code() {
  static const Code c(create_dynamic_map(true));
  return c;
}

const Code& unsigned_code() {
  static const Code c(create_dynamic_map(false));
  return c;
}

void quantize_blockwise(const float* x, int64_t n, const Code& code, int64_t block, uint8_t* q,
                        float* absmax) {
  SNUG_CHECK(block > 0, "quantize_blockwise: block must be positive");
  const int64_t nb = num_blocks(n, block);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t i0 = b * block, i1 = std::min(n, i0 + block);
    float m = 0.0f;
    for (int64_t i = i0; i < i1; ++i) m = std::max(m, std::fabs(x[i]));
    absmax[b] = m;
    const float scale = 1.0f / std::max(m, 1e-38f);
    for (int64_t i = i0; i < i1; ++i) q[i] = code.nearest(x[i] * scale);
  }
}

void dequantize_blockwise(const uint8_t* q, const float* absmax, int64_t n, const Code& code,
                          int64_t block, float* x) {
  SNUG_CHECK(block > 0, "dequantize_blockwise: block must be positive");
  const int64_t nb = num_blocks(n, block);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t i0 = b * block, i1 = std::min(n, i0 + block);
    for (int64_t i = i0; i < i1; ++i) x[i] = code.value(q[i]) * absmax[b];
  }
}

}  // namespace snug::quant8
