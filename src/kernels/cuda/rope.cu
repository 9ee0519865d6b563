// Rotary position embedding of kernels/ops.inc (rope_forward, rope_backward): one thread per
// rotated pair (row, head, j). The inverse frequencies are computed on the host by
// kernels/rope_angle.h (the CPU's float pow, bit for bit), or taken from the caller's host table
// (a scaled rope: inv_freq is host memory, ops.inc), and passed with the launch; the angle
// float(position) * inv_j is one fp32 multiply on both sides, cos, sin and the rotation are in
// double as in snug::ref.
#include <vector>

#include "kernels/cuda/context.cuh"
#include "kernels/rope_angle.h"

namespace snug::cuda {

namespace {

// R/2 values passed by value (kernel parameters hold 4 KiB); larger rotary dims go through a
// device scratch copy.
constexpr int64_t kMaxInlinePairs = 512;
struct InvFreqs {
  float v[kMaxInlinePairs];
};

__global__ void rope_kernel(float* x, int64_t B, int64_t T, int64_t NH, int64_t hs, int64_t ld,
                            int64_t half, const int32_t* pos, const float* inv_freq, InvFreqs f,
                            double sign) {
  const int64_t total = B * T * NH * half;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = e % half, h = (e / half) % NH, bt = e / (half * NH);
    const int64_t position = pos ? int64_t{pos[bt]} : bt % T;
    const float inv = inv_freq ? inv_freq[j] : f.v[j];
    const double a = static_cast<float>(position) * inv;
    const double c = cos(a), s = sign * sin(a);
    float* p = x + bt * ld + h * hs;
    const double x1 = p[j], x2 = p[j + half];
    p[j] = static_cast<float>(x1 * c - x2 * s);
    p[j + half] = static_cast<float>(x2 * c + x1 * s);
  }
}

void rope_apply(float* x, int64_t B, int64_t T, int64_t NH, int64_t hs, int64_t ld, int64_t R,
                float theta, const int32_t* pos, const float* inv_freq, double sign,
                const char* what) {
  kernels::detail::check_rope_dims(R, hs);
  const int64_t half = R / 2, total = B * T * NH * half;
  if (total <= 0) return;
  InvFreqs f{};
  std::vector<float> table(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j)
    table[j] = inv_freq ? inv_freq[j] : kernels::detail::rope_inv_freq(j, R, theta);
  const unsigned blocks = capped_blocks(total, 4096);
  auto launch = [&](const float* inv) {
    rope_kernel<<<blocks, 256, 0, stream()>>>(x, B, T, NH, hs, ld, half, pos, inv, f, sign);
    check_launch(what);
  };
  if (half <= kMaxInlinePairs) {
    for (int64_t j = 0; j < half; ++j) f.v[j] = table[j];
    launch(nullptr);
    return;
  }
  Scratch scratch(table.size() * sizeof(float));
  check(cudaMemcpyAsync(scratch.as<float>(), table.data(), table.size() * sizeof(float),
                        cudaMemcpyHostToDevice, stream()),
        what);
  launch(scratch.as<float>());
  sync(what);  // the host table outlives the copy
}

void rope_forward(float* x, int64_t B, int64_t T, int64_t NH, int64_t hs, int64_t ld, int64_t R,
                  float theta, const int32_t* pos, const float* inv_freq) {
  rope_apply(x, B, T, NH, hs, ld, R, theta, pos, inv_freq, 1.0, "rope_forward");
}

void rope_backward(float* dx, int64_t B, int64_t T, int64_t NH, int64_t hs, int64_t ld, int64_t R,
                   float theta, const int32_t* pos, const float* inv_freq) {
  rope_apply(dx, B, T, NH, hs, ld, R, theta, pos, inv_freq, -1.0, "rope_backward");
}

}  // namespace

void register_rope(OpTable& t) {
  t.rope_forward = &rope_forward;
  t.rope_backward = &rope_backward;
}

}  // namespace snug::cuda
