// Reference token + position embedding.
#include "kernels/kernels.h"

namespace snug::ref {

void embedding_forward(float* out, const int32_t* idx, const float* wte, const float* wpe,
                       int64_t B, int64_t T, int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      float* o = out + (b * T + t) * C;
      const float* te = wte + static_cast<int64_t>(idx[b * T + t]) * C;
      for (int64_t c = 0; c < C; ++c) o[c] = wpe ? te[c] + wpe[t * C + c] : te[c];
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t B,
                        int64_t T, int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const float* d = dout + (b * T + t) * C;
      if (dwte) {
        float* g = dwte + static_cast<int64_t>(idx[b * T + t]) * C;
        for (int64_t c = 0; c < C; ++c) g[c] += d[c];
      }
      if (dwpe) {
        float* g = dwpe + t * C;
        for (int64_t c = 0; c < C; ++c) g[c] += d[c];
      }
    }
  }
}

}  // namespace snug::ref
