// Checks shared by the CUDA attention tests (flash_cudatest.cpp, cudnn_attention_cudatest.cpp,
// attention_cudatest.cpp): the flash reference of a case, and a backward's three gradients
// against another set, compared on their valid columns only (the operands are strided).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "attention_cases.h"
#include "kernels/flash_attention.h"
#include "support/gpu.h"

namespace snug::test {

// snug::ref's flash attention of one case: the forward, then the backward from its own out and
// lse. Operands strided as d says; out, dq, dk, dv zero in the padding.
struct FlashReference {
  std::vector<float> out, lse, dq, dk, dv;
};

inline FlashReference flash_reference(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, const std::vector<float>& dout,
                                      const AttentionDims& d) {
  FlashReference r{std::vector<float>(static_cast<size_t>(d.B * d.T * d.ldo), 0.0f),
                   std::vector<float>(static_cast<size_t>(d.B * d.NH * d.T)),
                   std::vector<float>(q.size(), 0.0f), std::vector<float>(k.size(), 0.0f),
                   std::vector<float>(v.size(), 0.0f)};
  ref::flash_attention_forward_gqa(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), d);
  ref::flash_attention_backward_gqa(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), q.data(),
                                    k.data(), v.data(), r.out.data(), r.lse.data(), d);
  return r;
}

// A backward's three gradients, strided as d says: (q-shaped, k-shaped, v-shaped).
struct Grads {
  const std::vector<float>& dq;
  const std::vector<float>& dk;
  const std::vector<float>& dv;
};

// Each gradient's valid columns (rows B*T, widths NH*hs and NKV*hs) as `got`, `want`, to `check`.
template <typename Check>
void compare_grads(const Grads& got, const Grads& want, const AttentionDims& d, Check check) {
  const int64_t BT = d.B * d.T, wq = d.NH * d.hs, wkv = d.NKV * d.hs;
  check(columns(got.dq, BT, wq, d.ldq), columns(want.dq, BT, wq, d.ldq));
  check(columns(got.dk, BT, wkv, d.ldk), columns(want.dk, BT, wkv, d.ldk));
  check(columns(got.dv, BT, wkv, d.ldv), columns(want.dv, BT, wkv, d.ldv));
}

// Each within tol relative norm error of the reference's.
inline void expect_grads_near(const Grads& got, const Grads& want, const AttentionDims& d,
                              double tol) {
  compare_grads(got, want, d, [tol](const std::vector<float>& g, const std::vector<float>& w) {
    EXPECT_LT(rel_norm_error(g, w), tol);
  });
}

// The same bits (a second run of a deterministic backward).
inline void expect_grads_equal(const Grads& got, const Grads& want, const AttentionDims& d) {
  compare_grads(got, want, d,
                [](const std::vector<float>& g, const std::vector<float>& w) { EXPECT_EQ(g, w); });
}

}  // namespace snug::test
