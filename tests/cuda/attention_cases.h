// Shared by the CUDA attention tests (flash_cudatest.cpp, attention_cudatest.cpp): the shapes and
// masks every attention kernel is checked on, random strided operands, packed position ids, and
// the valid columns of a strided output.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "kernels/attention_dims.h"
#include "support/random.h"

namespace snug::test {

struct AttentionCase {
  int64_t B, T, NH, NKV, hs;
  bool causal = true;
  bool packed = false;  // position ids with several documents per row
  int64_t window = 0;
  double dropout = 0.0;
  bool aligned = false;  // row strides of whole float4s (else odd ones): both tile load paths
};

inline std::ostream& operator<<(std::ostream& os, const AttentionCase& c) {
  return os << "B=" << c.B << " T=" << c.T << " NH=" << c.NH << " NKV=" << c.NKV << " hs=" << c.hs
            << (c.causal ? " causal" : " bidirectional") << (c.packed ? " packed" : "")
            << " window=" << c.window << " dropout=" << c.dropout
            << (c.aligned ? " float4 strides" : " odd strides");
}

// T is not a multiple of 32 (the warp's key chunk) anywhere; hs 64 and odd ones; GQA and MQA.
inline std::vector<AttentionCase> attention_cases() {
  return {
      {2, 37, 4, 4, 64, true},
      {2, 37, 4, 4, 64, false},
      {1, 70, 6, 2, 37, true},
      {2, 45, 4, 1, 21, false},
      {2, 67, 4, 2, 64, true, true},
      {2, 67, 4, 2, 64, true, false, 9},
      {1, 97, 2, 1, 37, true, true, 5},
      {2, 45, 2, 2, 64, true, false, 0, 0.1},
      {1, 40, 4, 2, 37, false, false, 0, 0.25},
      {1, 53, 2, 1, 64, true, true, 7, 0.1},
  };
}

// The dims of a case with padded row strides (so strides are honoured): odd ones, or with
// c.aligned the next whole float4s past the heads (plus one float4 on k, v and out, still padded).
// pos is set by the caller.
inline AttentionDims case_dims(const AttentionCase& c) {
  AttentionDims d;
  d.B = c.B;
  d.T = c.T;
  d.NH = c.NH;
  d.NKV = c.NKV;
  d.hs = c.hs;
  const auto to4 = [](int64_t n) { return (n + 3) / 4 * 4; };
  d.ldq = c.aligned ? to4(c.NH * c.hs) : c.NH * c.hs + 3;
  d.ldk = c.aligned ? to4(c.NKV * c.hs) + 4 : c.NKV * c.hs + 1;
  d.ldv = c.aligned ? to4(c.NKV * c.hs) + 4 : c.NKV * c.hs + 2;
  d.ldo = c.aligned ? to4(c.NH * c.hs) + 4 : c.NH * c.hs + 5;
  d.causal = c.causal;
  d.window = c.window;
  d.dropout_p = c.dropout;
  d.dropout_key = 0x5eed1234abcdull;
  return d;
}

// Position ids (B,T): documents of 1 to 23 rows, restarting at 0.
inline std::vector<int32_t> packed_positions(int64_t B, int64_t T, uint64_t seed) {
  const std::vector<int32_t> lens = random_ints(B * T, seed, 1, 23);
  std::vector<int32_t> pos(static_cast<size_t>(B * T));
  size_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    int32_t left = 0, p = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (left == 0) {
        left = lens[next++];
        p = 0;
      }
      pos[static_cast<size_t>(b * T + t)] = p++;
      --left;
    }
  }
  return pos;
}

// The first `width` values of each of `rows` rows at stride ld.
template <typename V>
std::vector<V> columns(const std::vector<V>& x, int64_t rows, int64_t width, int64_t ld) {
  std::vector<V> out;
  out.reserve(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) out.push_back(x[static_cast<size_t>(r * ld + i)]);
  return out;
}

}  // namespace snug::test
