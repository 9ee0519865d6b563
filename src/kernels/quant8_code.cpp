#include "kernels/quant8_code.h"

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

}  // namespace snug::quant8
