// Internal to the reference attention kernels (ref_attention.cpp, ref_flash_attention.cpp): the
// gradients of q (B*T rows of NH*hs) and of k, v (B*T rows of NKV*hs) accumulated densely in
// double, then stored into the caller's strided float outputs.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_dims.h"

namespace snug::ref::detail {

class AttentionGrads {
 public:
  explicit AttentionGrads(const AttentionDims& d)
      : d_(d),
        q_(static_cast<size_t>(d.B * d.T * d.NH * d.hs), 0.0),
        k_(static_cast<size_t>(d.B * d.T * d.NKV * d.hs), 0.0),
        v_(k_.size(), 0.0) {}

  // Row bt = b*T + t, head h (query) or kv head kh.
  double* q(int64_t bt, int64_t h) { return q_.data() + (bt * d_.NH + h) * d_.hs; }
  double* k(int64_t bt, int64_t kh) { return k_.data() + (bt * d_.NKV + kh) * d_.hs; }
  double* v(int64_t bt, int64_t kh) { return v_.data() + (bt * d_.NKV + kh) * d_.hs; }

  // dq, dk, dv (overwrite) at the strides ldq, ldk, ldv.
  void store(float* dq, float* dk, float* dv) const {
    const int64_t wq = d_.NH * d_.hs, wkv = d_.NKV * d_.hs;
    for (int64_t bt = 0; bt < d_.B * d_.T; ++bt) {
      for (int64_t i = 0; i < wq; ++i)
        dq[bt * d_.ldq + i] = static_cast<float>(q_[static_cast<size_t>(bt * wq + i)]);
      for (int64_t i = 0; i < wkv; ++i) {
        dk[bt * d_.ldk + i] = static_cast<float>(k_[static_cast<size_t>(bt * wkv + i)]);
        dv[bt * d_.ldv + i] = static_cast<float>(v_[static_cast<size_t>(bt * wkv + i)]);
      }
    }
  }

 private:
  AttentionDims d_;
  std::vector<double> q_, k_, v_;
};

}  // namespace snug::ref::detail
