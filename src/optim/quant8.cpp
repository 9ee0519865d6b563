#include "optim/quant8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace snug::quant8 {

Code::Code(const std::vector<float>& values) {
  SNUG_CHECK(values.size() == 256, "quant8::Code: need 256 values, got ", values.size());
  std::copy(values.begin(), values.end(), values_.begin());
  for (size_t i = 0; i + 1 < 256; ++i) mid_[i] = (values_[i] + values_[i + 1]) / 2.0f;
  // Bucket k holds the floats whose top 16 bits are k. Its smallest value is k << 16 when the
  // sign bit is clear and (k << 16) | 0xFFFF (the largest magnitude) when it is set; the lower
  // bound of that value cannot exceed the lower bound of any x in the bucket.
  start_.resize(65536);
  for (uint32_t k = 0; k < 65536; ++k) {
    const uint32_t bits = (k << 16) | ((k & 0x8000u) ? 0xFFFFu : 0u);
    start_[k] = nearest_reference(std::bit_cast<float>(bits));
  }
}

uint8_t Code::nearest_reference(float x) const {
  // torch.bucketize(x, mid, right=False): the first midpoint >= x.
  const auto it = std::lower_bound(mid_.begin(), mid_.end(), x);
  return static_cast<uint8_t>(it - mid_.begin());
}

uint8_t Code::nearest(float x) const {
  // NaN and inf share buckets with each other; the binary search orders them as the reference.
  if (!(std::fabs(x) <= std::numeric_limits<float>::max())) return nearest_reference(x);
  unsigned q = start_[std::bit_cast<uint32_t>(x) >> 16];
  while (q < 255 && mid_[q] < x) ++q;  // the bucket's midpoints below x: usually none or one
  return static_cast<uint8_t>(q);
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

namespace {
std::vector<float> map_values(bool is_signed) {
  const std::array<float, 256>& m = quant::dynamic_map(is_signed);
  return {m.begin(), m.end()};
}
}  // namespace

const Code& signed_code() {
  static const Code c(map_values(true));
  return c;
}

const Code& unsigned_code() {
  static const Code c(map_values(false));
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
