// Operands and one forward + backward of a general attention call (kernels/ops.inc's *_gqa ops),
// shared by the kernel tests (block_kernels_test.cpp, packed_attention_test.cpp,
// sliding_window_test.cpp): fast against ref, and the backward against finite differences.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/op_table.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace snug::test {

// Operands of one general attention call: q, k, v in separate row-strided buffers with a few
// spare columns, so that strides are exercised.
struct AttnCase {
  AttentionDims d;
  std::vector<float> q, k, v, dout;
  AttnCase(int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t hs, bool causal, uint64_t seed) {
    d.B = B;
    d.T = T;
    d.NH = NH;
    d.NKV = NKV;
    d.hs = hs;
    d.ldq = NH * hs + 1;
    d.ldk = NKV * hs + 2;
    d.ldv = NKV * hs + 3;
    d.ldo = NH * hs + 1;
    d.causal = causal;
    q = random_floats(B * T * d.ldq, seed, -1.5f, 1.5f);
    k = random_floats(B * T * d.ldk, seed + 1, -1.5f, 1.5f);
    v = random_floats(B * T * d.ldv, seed + 2);
    dout = random_floats(B * T * d.ldo, seed + 3);
  }
  int64_t rows() const { return d.B * d.T; }
};

// out, and dq/dk/dv from one forward + backward of `ops`, naive (flash = false) or flash.
struct AttnResult {
  std::vector<float> out, dq, dk, dv;
};
inline AttnResult run_attention(const OpTable& ops, const AttnCase& c, bool flash) {
  const AttentionDims& d = c.d;
  AttnResult r;
  r.out.assign(static_cast<size_t>(c.rows() * d.ldo), 0.0f);
  r.dq.assign(c.q.size(), 0.0f);
  r.dk.assign(c.k.size(), 0.0f);
  r.dv.assign(c.v.size(), 0.0f);
  if (flash) {
    std::vector<float> lse(static_cast<size_t>(d.B * d.NH * d.T));
    ops.flash_attention_forward_gqa(r.out.data(), lse.data(), c.q.data(), c.k.data(), c.v.data(),
                                    d);
    ops.flash_attention_backward_gqa(r.dq.data(), r.dk.data(), r.dv.data(), c.dout.data(),
                                     c.q.data(), c.k.data(), c.v.data(), r.out.data(), lse.data(),
                                     d);
  } else {
    std::vector<float> att(static_cast<size_t>(d.B * d.NH * d.T * d.T));
    ops.attention_forward_gqa(r.out.data(), att.data(), c.q.data(), c.k.data(), c.v.data(), d);
    ops.attention_backward_gqa(r.dq.data(), r.dk.data(), r.dv.data(), c.dout.data(), c.q.data(),
                               c.k.data(), c.v.data(), att.data(), d);
  }
  return r;
}

// Zeroes the spare columns of a strided buffer (they are not outputs).
inline std::vector<float> used_columns(const std::vector<float>& x, int64_t rows, int64_t ld,
                                       int64_t width) {
  std::vector<float> y(x.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(x.begin() + r * ld, width, y.begin() + r * ld);
  return y;
}

// `a` equals `b` (e.g. fast and ref): out, dq, dk and dv all_close within rtol, atol.
inline void expect_same_attention(const AttnResult& a, const AttnResult& b, const std::string& what,
                                  double rtol = 1e-4, double atol = 1e-5) {
  EXPECT_TRUE(all_close(a.out, b.out, rtol, atol)) << what << " out";
  EXPECT_TRUE(all_close(a.dq, b.dq, rtol, atol)) << what << " dq";
  EXPECT_TRUE(all_close(a.dk, b.dk, rtol, atol)) << what << " dk";
  EXPECT_TRUE(all_close(a.dv, b.dv, rtol, atol)) << what << " dv";
}

// Central differences of L = sum(out * R) with R the used columns of c.dout, the forward on the
// reference naive kernel, against the backward of every kernel (naive and flash, fast and ref).
// c.dout becomes R.
inline void expect_backward_matches_finite_differences(AttnCase& c) {
  const AttentionDims& d = c.d;
  std::vector<float> out(static_cast<size_t>(c.rows() * d.ldo)),
      att(static_cast<size_t>(d.B * d.NH * d.T * d.T));
  const std::vector<float> R = used_columns(c.dout, c.rows(), d.ldo, d.NH * d.hs);
  auto loss = [&] {
    ref::attention_forward_gqa(out.data(), att.data(), c.q.data(), c.k.data(), c.v.data(), d);
    double s = 0.0;
    for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * R[i];
    return s;
  };
  const auto n_q = numerical_grad(c.q, loss);
  const auto n_k = numerical_grad(c.k, loss);
  const auto n_v = numerical_grad(c.v, loss);
  c.dout = R;
  for (bool flash : {false, true})
    for (const OpTable* ops : {&fast_op_table(), &ref_op_table()}) {
      const AttnResult r = run_attention(*ops, c, flash);
      const std::string w =
          std::string(ops->impl) + (flash ? " flash" : " naive") + " NKV=" + std::to_string(d.NKV);
      expect_grad_close(used_columns(r.dq, c.rows(), d.ldq, d.NH * d.hs), n_q, w + " dq");
      expect_grad_close(used_columns(r.dk, c.rows(), d.ldk, d.NKV * d.hs), n_k, w + " dk");
      expect_grad_close(used_columns(r.dv, c.rows(), d.ldv, d.NKV * d.hs), n_v, w + " dv");
    }
}

}  // namespace snug::test
