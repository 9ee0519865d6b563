// Reference nn.Linear-layout Linear: plain loops, double accumulation.
#include "kernels/kernels.h"

namespace snug::ref {

void linear_nt_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                       int64_t IC, int64_t OC) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int64_t i = 0; i < IC; ++i) acc += static_cast<double>(inp[n * IC + i]) * w[o * IC + i];
      out[n * OC + o] = static_cast<float>(acc);
    }
}

void linear_nt_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, int64_t N, int64_t IC, int64_t OC, bool accumulate_dinp) {
  if (dinp)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < IC; ++i) {
        double acc = accumulate_dinp ? dinp[n * IC + i] : 0.0;
        for (int64_t o = 0; o < OC; ++o)
          acc += static_cast<double>(dout[n * OC + o]) * w[o * IC + i];
        dinp[n * IC + i] = static_cast<float>(acc);
      }
  if (dw)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t i = 0; i < IC; ++i) {
        double acc = 0.0;
        for (int64_t n = 0; n < N; ++n)
          acc += static_cast<double>(dout[n * OC + o]) * inp[n * IC + i];
        dw[o * IC + i] += static_cast<float>(acc);
      }
  if (db)
    for (int64_t o = 0; o < OC; ++o) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n) acc += dout[n * OC + o];
      db[o] += static_cast<float>(acc);
    }
}

}  // namespace snug::ref
