#include "kernels/peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/kernels.h"

namespace snug::kernels {

double measure_gemm_peak_flops(int64_t n, double seconds, GemmPath bf16) {
  SNUG_CHECK(n > 0, "measure_gemm_peak_flops: n must be positive, got ", n);
  const size_t count = static_cast<size_t>(n * n);
  std::vector<float> a(count), b(count), c(count, 0.0f);
  for (size_t i = 0; i < count; ++i) {
    // Small, exactly representable values: no denormals or overflow to slow anything down.
    a[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.125f;
    b[i] = static_cast<float>(static_cast<int>(i % 5) - 2) * 0.25f;
  }
  std::vector<uint16_t> a16, b16;
  if (bf16 == GemmPath::onednn_bf16) {
    a16.resize(count);
    b16.resize(count);
    convert(a.data(), DType::f32, a16.data(), DType::bf16, count);
    convert(b.data(), DType::f32, b16.data(), DType::bf16, count);
  }
  auto call = [&] {
    if (bf16 == GemmPath::onednn_bf16)
      gemm_bf16(false, false, n, n, n, 1.0f, a16.data(), n, b16.data(), n, 0.0f, c.data(), n);
    else
      gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  using Clock = std::chrono::steady_clock;
  const double flops_per_call =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  call();  // warm-up (and primitive creation)
  double best = 0.0;
  const auto start = Clock::now();
  int calls = 0;
  do {
    const auto t0 = Clock::now();
    call();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > 0.0) best = std::max(best, flops_per_call / dt);
    ++calls;
  } while (calls < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds);
  return best;
}

}  // namespace snug::kernels
