#include "optim/quant8.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace snug::quant8 {

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

int64_t moment_bytes(int64_t n, bool q8, int64_t moments) {
  return moments * (q8 ? n + 4 * num_blocks(n, kOptimizerBlock) : 4 * n);
}

void allocate_moments(const std::vector<Moment>& moments, int64_t n, bool q8, Device& dev) {
  for (const Moment& m : moments)
    *m.values = Tensor::zeros({n}, q8 ? DType::u8 : DType::f32, Category::optimizer_state, dev);
  if (!q8) return;
  for (const Moment& m : moments)
    *m.absmax =
        Tensor::zeros({num_blocks(n, kOptimizerBlock)}, DType::f32, Category::optimizer_state, dev);
}

void append_moments(const std::vector<Moment>& moments, const std::string& prefix, bool q8,
                    std::vector<std::pair<std::string, Tensor*>>& out) {
  for (const Moment& m : moments) out.emplace_back(prefix + "." + m.name, m.values);
  if (!q8) return;
  for (const Moment& m : moments) out.emplace_back(prefix + ".absmax_" + m.name, m.absmax);
}

}  // namespace snug::quant8
