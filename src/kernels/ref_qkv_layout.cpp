// Reference fused-projection layouts: every element by its index formula, the interleaved row
// read as (NH,3,hs) with part j = 0, 1, 2 for q, k, v.
#include "kernels/kernels.h"

namespace snug::ref {

namespace {

// Index of element (n, h, part, i) in the interleaved (N, NH*3*hs) tensor, and of (n, h, i) in a
// separate (N, NH*hs) one.
int64_t fused_at(int64_t n, int64_t h, int64_t part, int64_t i, int64_t NH, int64_t hs) {
  return ((n * NH + h) * 3 + part) * hs + i;
}
int64_t split_at(int64_t n, int64_t h, int64_t i, int64_t NH, int64_t hs) {
  return (n * NH + h) * hs + i;
}

}  // namespace

void qkv_interleaved_split(float* q, float* k, float* v, const float* qkv, int64_t N, int64_t NH,
                           int64_t hs) {
  float* parts[3] = {q, k, v};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t i = 0; i < hs; ++i)
          parts[j][split_at(n, h, i, NH, hs)] = qkv[fused_at(n, h, j, i, NH, hs)];
}

void qkv_interleaved_merge(float* dqkv, const float* dq, const float* dk, const float* dv,
                           int64_t N, int64_t NH, int64_t hs) {
  const float* parts[3] = {dq, dk, dv};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t i = 0; i < hs; ++i)
          dqkv[fused_at(n, h, j, i, NH, hs)] = parts[j][split_at(n, h, i, NH, hs)];
}

}  // namespace snug::ref
