#include "io/finite.h"

#include <cmath>

#include "core/host_staging.h"

namespace snug {

std::optional<NonFinite> first_non_finite(const Tensor& t) {
  if (!t.defined() || t.is_meta() || t.numel() == 0) return std::nullopt;
  const int64_t n = t.numel();
  const HostStaging h(t, HostStaging::Use::read);  // the tensor itself where the host can read it
  if (t.dtype() == DType::f32) {
    const float* p = h.data<float>();
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return NonFinite{i, std::isnan(p[i])};
    return std::nullopt;
  }
  if (t.dtype() != DType::bf16 && t.dtype() != DType::f16) return std::nullopt;
  // 16-bit floats: all exponent bits set is inf (mantissa 0) or nan.
  const uint16_t exp_mask = t.dtype() == DType::bf16 ? 0x7f80 : 0x7c00;
  const uint16_t mant_mask = t.dtype() == DType::bf16 ? 0x007f : 0x03ff;
  const auto* p = static_cast<const uint16_t*>(h.raw());
  for (int64_t i = 0; i < n; ++i)
    if ((p[i] & exp_mask) == exp_mask) return NonFinite{i, (p[i] & mant_mask) != 0};
  return std::nullopt;
}

}  // namespace snug
